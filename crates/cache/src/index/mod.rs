//! The index: cache key → [`Entry`], persisted in redb.
//!
//! The file is the index; memory holds what hits asked for lately
//! ([`hot`]) and the totals, so a cache of a million entries opens in a
//! moment and keeps to a few megabytes, and a hit on a held entry costs no
//! disk access and no blocking call. Writes go to redb first (a durable,
//! crash-safe commit) and only then into memory, so what a reader sees is
//! always on disk. Writes block on fsync: callers run them off the async
//! threads.

mod group;
mod hot;
mod record;
mod tables;

use parking_lot::{Mutex, RwLock};
use std::collections::HashSet;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{Database, ReadableTable};

use crate::entry::Entry;
use crate::error::StoreError;
use crate::evict::{Obsolete, Picker};
use crate::recency::Used;
use group::Group;
pub use hot::Generation;
use hot::Hot;
use tables::{Tables, Totals, BLOBS, ENTRIES, HITS, USES};

/// Memory redb may keep of the file's pages; the rest is read from the
/// operating system's page cache when asked for.
const PAGE_CACHE_BYTES: usize = 8 << 20;

/// The persistent key → entry map.
pub struct Index {
    path: PathBuf,
    /// The open file; `None` after an I/O error, until a write reopens it.
    db: RwLock<Option<Arc<Database>>>,
    /// When a write last tried to reopen the file after an I/O error.
    reopened_at: Mutex<Option<Instant>>,
    /// Whether the last write failed for I/O (said once in the log).
    failing: AtomicBool,
    hot: Hot,
    /// The totals as last committed; also what serializes the writes and
    /// the memory updates after them, so memory follows the commit order.
    totals: Mutex<Totals>,
    /// How many evicted keys are remembered.
    evicted_kept: u64,
    /// The puts waiting for a commit.
    puts: Group<Vec<Record>, Result<Put, StoreError>>,
}

/// A put's key, entry and its encoding.
type Record = (String, Arc<Entry>, Vec<u8>);

/// What a put wrote, and the hashes of blobs no entry refers to any more.
type Put = (Vec<Arc<Entry>>, Vec<String>);

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Keys changed in one commit by the writes of many (an eviction, the uses
/// of a minute): a commit's copied pages stay in memory until it is done.
const WRITE_BATCH: usize = 2_000;

/// Keys read at a time by the walks that visit the whole index, each in a
/// short read transaction (a long one would keep the file from reusing
/// the pages freed meanwhile).
const PAGE: usize = 1_000;

impl Index {
    /// Opens or creates the index file. Nothing is read but the totals,
    /// unless the index was written by a version without them: then they
    /// are built once from the entries.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let (db, totals) = open_file(path)?;
        Ok(Index {
            path: path.to_path_buf(),
            db: RwLock::new(Some(Arc::new(db))),
            reopened_at: Mutex::new(None),
            failing: AtomicBool::new(false),
            hot: Hot::default(),
            totals: Mutex::new(totals),
            evicted_kept: tables::EVICTED_KEPT,
            puts: Group::default(),
        })
    }

    /// The open file, for a read. `None` while an I/O error keeps it
    /// closed (reopening may mean a repair: a write does it, never a
    /// read on the request path).
    fn file(&self) -> Option<Arc<Database>> {
        self.db.read().clone()
    }

    fn open_file_or_fail(&self) -> Result<Arc<Database>, StoreError> {
        self.file().ok_or_else(|| index_error(&self.path, "closed after an I/O error; the next write reopens it"))
    }

    /// The open file, for a write: reopened if an I/O error closed it, at
    /// most every few seconds (the disk may still be full).
    fn file_for_write(&self) -> Result<Arc<Database>, StoreError> {
        if let Some(db) = self.file() {
            return Ok(db);
        }
        let mut db = self.db.write();
        if let Some(db) = db.as_ref() {
            return Ok(Arc::clone(db));
        }
        let mut reopened_at = self.reopened_at.lock();
        if reopened_at.is_some_and(|at| at.elapsed() < REOPEN_EVERY) {
            return Err(index_error(&self.path, "closed after an I/O error; reopened again shortly"));
        }
        *reopened_at = Some(Instant::now());
        let (reopened, _) = open_file(&self.path)?;
        let reopened = Arc::new(reopened);
        *db = Some(Arc::clone(&reopened));
        Ok(reopened)
    }

    /// Closes the file after a write failed for I/O (a full disk): redb
    /// refuses every later read and write until it is reopened, which
    /// follows at once. Said once until a write succeeds again.
    fn close_after(&self, error: &redb::Error) {
        if !matches!(error, redb::Error::Io(_) | redb::Error::PreviousIo) {
            return;
        }
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(path = %self.path.display(), %error, "the cache index cannot be written: reopened, and written again once it can");
        }
        let failed = self.db.write().take();
        if let Some(failed) = failed {
            wait_and_close(failed);
        }
        if let Err(error) = self.file_for_write() {
            tracing::debug!(%error, "the cache index stays closed for now");
        }
    }

    /// The entry held in memory for `key`, if it is.
    pub fn held(&self, key: &str) -> Option<Arc<Entry>> {
        self.hot.get(key)
    }

    /// The entry for `key` as the file has it, and when the read began
    /// (for [`Index::hold`]); none while an I/O error keeps the file
    /// closed. Blocking only in the sense of a read from the page cache:
    /// no fsync, no lock a write holds.
    pub fn read(&self, key: &str) -> Result<Option<(Arc<Entry>, Generation)>, StoreError> {
        let generation = self.hot.generation();
        let Some(db) = self.file() else { return Ok(None) };
        let txn = db.begin_read().map_err(|e| self.fail(e))?;
        let table = txn.open_table(ENTRIES).map_err(|e| self.fail(e))?;
        let record = table.get(key).map_err(|e| self.fail(e))?;
        let entry = record.and_then(|record| tables::decode(key, record.value()));
        Ok(entry.map(|entry| (Arc::new(entry), generation)))
    }

    /// When eviction removed `key`'s entry (Unix seconds), if it did and no
    /// entry was put under it since.
    pub fn evicted_at(&self, key: &str) -> Option<u64> {
        let txn = self.file()?.begin_read().ok()?;
        let table = txn.open_table(tables::EVICTED).ok()?;
        let at = table.get(key).ok()??.value();
        Some(at)
    }

    /// Keeps `entry`, read since `read_from`, in memory for the next hits.
    pub fn hold(&self, key: &str, entry: &Arc<Entry>, read_from: Generation) {
        self.hot.offer(key, entry, read_from);
    }

    /// Number of entries and the sum of their body sizes.
    pub fn totals(&self) -> (usize, u64) {
        let totals = *self.totals.lock();
        (totals.entries as usize, totals.entry_bytes)
    }

    /// The latest use stamp written (`0`: none). Blocking.
    pub fn latest_use(&self) -> Result<u64, StoreError> {
        let txn = self.open_file_or_fail()?.begin_read().map_err(|e| self.fail(e))?;
        let uses = txn.open_table(USES).map_err(|e| self.fail(e))?;
        let last = uses.last().map_err(|e| self.fail(e))?;
        Ok(last.map_or(0, |(used, _)| used.value().0))
    }

    /// Bytes of the blobs the entries name, each once.
    pub fn blob_bytes(&self) -> u64 {
        self.totals.lock().blob_bytes
    }

    /// Writes `entry` under `key` durably. Returns the hash of a blob that no
    /// entry refers to any more (the replaced entry's), for the caller to
    /// delete. Blocking.
    pub fn put(&self, key: &str, entry: Entry) -> Result<(Arc<Entry>, Option<String>), StoreError> {
        let (mut entries, freed) = self.put_all(vec![(key.to_string(), entry)])?;
        let entry = entries.pop().expect("one entry written");
        Ok((entry, freed.into_iter().next()))
    }

    /// Writes every `(key, entry)` in one durable commit (one fsync however
    /// many), shared with the puts that come meanwhile. Returns the entries
    /// and the hashes of blobs no entry refers to any more. Blocking.
    pub fn put_all(&self, records: Vec<(String, Entry)>) -> Result<Put, StoreError> {
        let records = records
            .into_iter()
            .map(|(key, entry)| match record::encode(&entry) {
                Ok(record) => Ok((key, Arc::new(entry), record)),
                Err(message) => Err(StoreError::Record { key, message }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.puts.submit(records, |puts| self.commit_puts(puts))
    }

    /// Commits `puts` together: each one's result, in order.
    fn commit_puts(&self, puts: Vec<Vec<Record>>) -> Vec<Result<Put, StoreError>> {
        let written = self.write(
            |tables| {
                let mut freed = Vec::with_capacity(puts.len());
                for records in &puts {
                    let mut freed_by_put = Vec::new();
                    for (key, entry, record) in records {
                        freed_by_put.extend(tables.put(key, entry, record)?);
                    }
                    freed.push(freed_by_put);
                }
                Ok(freed)
            },
            |hot| hot.written(puts.iter().flatten().map(|(key, entry, _)| (key.as_str(), entry)), []),
        );
        match written {
            Ok(freed) => puts
                .into_iter()
                .zip(freed)
                .map(|(records, freed)| Ok((records.into_iter().map(|(_, entry, _)| entry).collect(), freed)))
                .collect(),
            Err(error) => puts.iter().map(|_| Err(error.copy())).collect(),
        }
    }

    /// Removes `key`. Returns the hash of a blob no entry refers to any more.
    /// Blocking.
    pub fn remove(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.remove_all(&[key.to_string()], None)?.pop())
    }

    /// Removes every one of `keys`, a few thousand to a commit (a large
    /// eviction holds bounded memory; a crash between commits leaves each
    /// entry whole or gone), remembering them as evicted at `evicted_at`
    /// when given. Returns the hashes of blobs no entry refers to any more.
    /// Blocking.
    pub fn remove_all(&self, keys: &[String], evicted_at: Option<u64>) -> Result<Vec<String>, StoreError> {
        let mut freed = Vec::new();
        for batch in keys.chunks(WRITE_BATCH) {
            freed.extend(self.write(
                |tables| {
                    let mut freed = Vec::new();
                    for key in batch {
                        let removed = tables.remove(key)?;
                        if let (Some(_), Some(at)) = (&removed, evicted_at) {
                            tables.mark_evicted(key, at, self.evicted_kept)?;
                        }
                        freed.extend(removed.and_then(|(_, freed)| freed));
                    }
                    Ok(freed)
                },
                |hot| hot.written([], batch.iter().map(String::as_str)),
            )?);
        }
        Ok(freed)
    }

    /// [`Index::record_uses`] of uses with no hits (for tests of
    /// recency alone).
    #[cfg(test)]
    pub fn touch_all(&self, uses: &[(String, u64)]) -> Result<(), StoreError> {
        let uses: Vec<_> = uses.iter().map(|(key, at)| (key.clone(), Used { at: *at, hits: 0 })).collect();
        self.record_uses(&uses)
    }

    /// Writes each of `uses`, a few thousand to a commit: when its key was
    /// last used, into the records as they are in the table (a record a
    /// fetch replaced meanwhile keeps its new content), and the hits it
    /// served since, added to its count. Blocking.
    pub fn record_uses(&self, uses: &[(String, Used)]) -> Result<(), StoreError> {
        for batch in uses.chunks(WRITE_BATCH) {
            let mut touched = Vec::new();
            self.write(
                |tables| {
                    for (key, used) in batch {
                        if let Some(entry) = tables.touch(key, used.at)? {
                            touched.push((key.as_str(), Arc::new(entry)));
                        }
                        tables.add_hits(key, used.hits)?;
                    }
                    Ok(())
                },
                |_| {},
            )?;
            for (key, entry) in &touched {
                self.hot.refresh(key, entry);
            }
        }
        Ok(())
    }

    /// The keys to remove to free what `picker` asks: first those under
    /// `obsolete`'s prefixes that it says can never be served again, then
    /// the least recently used.
    pub fn choose(&self, picker: &mut Picker, obsolete: &dyn Obsolete) -> Result<(), StoreError> {
        let txn = self.open_file_or_fail()?.begin_read().map_err(|e| self.fail(e))?;
        let entries = txn.open_table(ENTRIES).map_err(|e| self.fail(e))?;
        let blobs = txn.open_table(BLOBS).map_err(|e| self.fail(e))?;
        let holders = |sha256: &str| {
            blobs.get(tables::blob_key(sha256).as_slice()).ok().flatten().map_or(1, |held| held.value().0)
        };
        for prefix in obsolete.prefixes() {
            let rows = entries.range::<&str>(prefix.as_str()..).map_err(|e| self.fail(e))?;
            for row in rows {
                let (key, record) = row.map_err(|e| self.fail(e))?;
                let key = key.value();
                if !key.starts_with(&prefix) || picker.is_done() {
                    break;
                }
                let Some(entry) = tables::decode(key, record.value()) else { continue };
                if obsolete.is_obsolete(key, &entry) {
                    picker.offer(key, &entry.sha256, entry.size, holders(&entry.sha256));
                }
            }
        }
        let uses = txn.open_table(USES).map_err(|e| self.fail(e))?;
        for row in uses.iter().map_err(|e| self.fail(e))? {
            if picker.is_done() {
                break;
            }
            let (used, _) = row.map_err(|e| self.fail(e))?;
            let (_, key) = used.value();
            let record = entries.get(key).map_err(|e| self.fail(e))?;
            let Some(entry) = record.and_then(|record| tables::decode(key, record.value())) else { continue };
            picker.offer(key, &entry.sha256, entry.size, holders(&entry.sha256));
        }
        Ok(())
    }

    /// Calls `visit` with every entry whose key starts with `prefix`, in
    /// key order, a page at a time. Blocking.
    pub fn visit(&self, prefix: &str, mut visit: impl FnMut(&str, &Entry)) -> Result<(), StoreError> {
        self.visit_counted(prefix, |key, entry, _| visit(key, entry))
    }

    /// Calls `visit` with every entry whose key starts with `prefix`, and
    /// the hits it served as written so far, in key order, a page at a
    /// time. Blocking.
    pub fn visit_counted(&self, prefix: &str, mut visit: impl FnMut(&str, &Entry, u64)) -> Result<(), StoreError> {
        let mut after: Option<String> = None;
        loop {
            let txn = self.open_file_or_fail()?.begin_read().map_err(|e| self.fail(e))?;
            let table = txn.open_table(ENTRIES).map_err(|e| self.fail(e))?;
            // Absent until the first hit is written.
            let hits = txn.open_table(HITS).ok();
            let counted =
                |key: &str| hits.as_ref().and_then(|hits| hits.get(key).ok().flatten()).map_or(0, |n| n.value());
            let start = after.as_deref().map_or(Bound::Included(prefix), Bound::Excluded);
            let rows = table.range::<&str>((start, Bound::Unbounded)).map_err(|e| self.fail(e))?;
            let mut read = 0;
            for row in rows.take(PAGE) {
                let (key, record) = row.map_err(|e| self.fail(e))?;
                let key = key.value();
                if !key.starts_with(prefix) {
                    return Ok(());
                }
                if let Some(entry) = tables::decode(key, record.value()) {
                    visit(key, &entry, counted(key));
                }
                after = Some(key.to_string());
                read += 1;
            }
            if read < PAGE {
                return Ok(());
            }
        }
    }

    /// Every blob the entries name, with its size, a page at a time, in
    /// hash order. Blocking.
    pub fn visit_blobs(&self, mut visit: impl FnMut(&str, u64)) -> Result<(), StoreError> {
        let mut after: Option<Vec<u8>> = None;
        loop {
            let txn = self.open_file_or_fail()?.begin_read().map_err(|e| self.fail(e))?;
            let table = txn.open_table(BLOBS).map_err(|e| self.fail(e))?;
            let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page: Vec<(Vec<u8>, u64)> = table
                .range::<&[u8]>((start, Bound::Unbounded))
                .map_err(|e| self.fail(e))?
                .take(PAGE)
                .map(|row| row.map(|(key, held)| (key.value().to_vec(), held.value().1)))
                .collect::<Result<_, _>>()
                .map_err(|e| self.fail(e))?;
            drop(table);
            drop(txn);
            for (key, size) in &page {
                visit(&tables::blob_name(key), *size);
            }
            match page.last() {
                Some((last, _)) if page.len() == PAGE => after = Some(last.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// Whether an entry names the blob `sha256`.
    pub fn names_blob(&self, sha256: &str) -> Result<bool, StoreError> {
        let txn = self.open_file_or_fail()?.begin_read().map_err(|e| self.fail(e))?;
        let table = txn.open_table(BLOBS).map_err(|e| self.fail(e))?;
        Ok(table.get(tables::blob_key(sha256).as_slice()).map_err(|e| self.fail(e))?.is_some())
    }

    /// The keys of the entries naming any of `blobs`. Blocking: it reads
    /// every entry.
    pub fn keys_naming(&self, blobs: &HashSet<String>) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        if !blobs.is_empty() {
            self.visit("", |key, entry| {
                if blobs.contains(&entry.sha256) {
                    keys.push(key.to_string());
                }
            })?;
        }
        Ok(keys)
    }

    /// How many entries the file holds, counted (the totals are kept, not
    /// counted: this is for tests of them).
    #[cfg(test)]
    pub fn counted(&self) -> u64 {
        use redb::ReadableTableMetadata;
        let txn = self.open_file_or_fail().unwrap().begin_read().unwrap();
        txn.open_table(ENTRIES).unwrap().len().unwrap()
    }

    /// Runs `change` on the tables in one durable commit, then `apply` on
    /// the memory, both under the totals' lock.
    fn write<R>(
        &self,
        change: impl FnOnce(&mut Tables<'_>) -> Result<R, redb::StorageError>,
        apply: impl FnOnce(&Hot),
    ) -> Result<R, StoreError> {
        let mut totals = self.totals.lock();
        let db = self.file_for_write()?;
        let written = (|| {
            let txn = begin_write(&db, &self.path)?;
            let mut tables = Tables::open(&txn)?;
            let result = change(&mut tables).map_err(boxed)?;
            let committed = tables.close().map_err(boxed)?;
            txn.commit().map_err(boxed)?;
            Ok::<_, Box<redb::Error>>((result, committed))
        })();
        drop(db);
        match written {
            Ok((result, committed)) => {
                *totals = committed;
                apply(&self.hot);
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(path = %self.path.display(), "the cache index is written again");
                }
                Ok(result)
            }
            Err(error) => {
                self.close_after(&error);
                Err(index_error(&self.path, *error))
            }
        }
    }

    fn fail(&self, e: impl Into<redb::Error>) -> StoreError {
        index_error(&self.path, e.into())
    }
}

/// How often a write may try to reopen the file after an I/O error.
const REOPEN_EVERY: Duration = Duration::from_secs(1);

/// Closes `db` once the reads still using it are done (they hold the
/// file's lock, which a reopening needs); gives up waiting after a second.
fn wait_and_close(mut db: Arc<Database>) {
    for _ in 0..1_000 {
        match Arc::try_unwrap(db) {
            Ok(db) => return drop(db),
            Err(shared) => db = shared,
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The length of the index file from which its commits also save where
/// its free pages are (redb's quick repair): after a crash the file then
/// opens at once, where redb would walk all of it to find them again (a
/// second or two at a million entries). It costs about 4.5 ms of CPU a
/// commit whatever the file's length, while a file under this length is
/// walked in a tenth of a second.
const QUICK_REPAIR_FROM: u64 = 64 << 20;

/// A write transaction of the file at `path`, saving where its free pages
/// are when that pays.
fn begin_write(db: &Database, path: &Path) -> Result<redb::WriteTransaction, Box<redb::Error>> {
    let mut txn = db.begin_write().map_err(boxed)?;
    txn.set_quick_repair(quick_repair_pays(path));
    Ok(txn)
}

/// Whether the file at `path` is long enough for a walk of it after a
/// crash to cost more than saving its free pages at each commit.
fn quick_repair_pays(path: &Path) -> bool {
    std::fs::metadata(path).map_or(true, |meta| meta.len() >= QUICK_REPAIR_FROM)
}

/// Opens (creating) the file and its tables, building the tables beside
/// the entries if it was written by a version without them.
fn open_file(path: &Path) -> Result<(Database, Totals), StoreError> {
    let opened = (|| {
        let db = Database::builder().set_cache_size(PAGE_CACHE_BYTES).create(path).map_err(boxed)?;
        let txn = begin_write(&db, path)?;
        let mut tables = Tables::open(&txn)?;
        let built = tables.build_if_older().map_err(boxed)?;
        let totals = tables.close().map_err(boxed)?;
        txn.commit().map_err(boxed)?;
        Ok::<_, Box<redb::Error>>((db, totals, built))
    })();
    let (db, totals, built) = opened.map_err(|e| index_error(path, *e))?;
    if built && totals.entries > 0 {
        tracing::info!(entries = totals.entries, "the cache index was brought to this version's layout");
    }
    Ok((db, totals))
}

/// redb's error, boxed (it is large, and rare).
fn boxed(error: impl Into<redb::Error>) -> Box<redb::Error> {
    Box::new(error.into())
}

/// The store's error for what redb said of `path`: a full disk is told
/// apart, since it is answered by eviction and passing bodies through.
fn index_error(path: &Path, error: impl Into<IndexFailure>) -> StoreError {
    match error.into() {
        IndexFailure::Redb(redb::Error::Io(source)) if crate::error::no_room(&source) => {
            StoreError::Io { action: "write the index", path: path.to_path_buf(), source }
        }
        IndexFailure::Redb(redb::Error::DatabaseAlreadyOpen) => StoreError::InUse {
            dir: path.parent().unwrap_or(path).to_path_buf(),
            holder: crate::holder::lock_holder(path),
        },
        IndexFailure::Redb(error) => StoreError::Index { path: path.to_path_buf(), message: error.to_string() },
        IndexFailure::Said(message) => StoreError::Index { path: path.to_path_buf(), message: message.to_string() },
    }
}

/// What went wrong with the index file: what redb said, or what we say.
enum IndexFailure {
    Redb(redb::Error),
    Said(&'static str),
}

impl From<redb::Error> for IndexFailure {
    fn from(error: redb::Error) -> Self {
        IndexFailure::Redb(error)
    }
}

impl From<&'static str> for IndexFailure {
    fn from(message: &'static str) -> Self {
        IndexFailure::Said(message)
    }
}

#[cfg(test)]
mod tests;
