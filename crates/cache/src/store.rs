//! The store: the index and the blob store kept consistent with each other.
//!
//! The order of a write is what makes the cache crash-safe: the body is
//! fsynced and renamed into the blob store before the index commit that makes
//! it visible, so an index entry never names a missing or partial blob. A
//! crash can leave a blob no entry names, never the reverse.
//!
//! Nothing is scanned at open (a cache of a million entries opens in a
//! moment): an entry is checked against its blob when it is first read from
//! the index file, and one whose blob is missing or of the wrong length is
//! not served and is dropped at the next upkeep; blobs no entry names are
//! found by the scrub.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::blobs::{BlobStore, BodyHashes, TempBlob};
use crate::clock::Clock;
use crate::entry::{unix_secs, Class, Entry, Validators};
use crate::error::StoreError;
use crate::evict::{Obsolete, Picker, Quota, Usage};
use crate::index::Index;
use crate::open_files::{default_capacity, OpenFiles};
use crate::recency::Recency;

/// A body to store whole, with what its entry says of it.
#[derive(Debug, Clone)]
pub struct Record {
    /// Its cache key.
    pub key: String,
    /// The bytes.
    pub body: bytes::Bytes,
    /// The upstream's headers kept with it.
    pub headers: Vec<(String, String)>,
    /// Its validators, for the next revalidation.
    pub validators: Validators,
    /// How it ages.
    pub class: Class,
    /// When it was fetched, if elsewhere (Unix seconds: a bundle's entry);
    /// `None`: now. Never later than now.
    pub fetched_at: Option<u64>,
}

/// The persistent cache on disk.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    blobs: BlobStore,
    index: Index,
    open_files: OpenFiles,
    clock: Arc<dyn Clock>,
    recency: Recency,
    /// Whether a download could not be stored (the disk was full) since
    /// the last commit (said once in the log, not per download).
    full: std::sync::atomic::AtomicBool,
    /// The limits the cache keeps to (set once the settings are read).
    quota: parking_lot::RwLock<Quota>,
    /// Keys whose entry was found without its body, dropped at the next
    /// upkeep.
    damaged: parking_lot::Mutex<Vec<String>>,
    /// Bodies served whole whose commit is under way (see
    /// [`PendingCommit`]).
    pending_commits: std::sync::atomic::AtomicUsize,
}

/// A body served whole before its commit ends, counted while it lasts: a
/// reader who must find it in the index waits for it only while any is
/// pending (see [`crate::Cache::settled`]).
pub(crate) struct PendingCommit(Arc<Store>);

impl PendingCommit {
    pub(crate) fn new(store: &Arc<Store>) -> Self {
        store.pending_commits.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        PendingCommit(Arc::clone(store))
    }
}

impl Drop for PendingCommit {
    fn drop(&mut self) {
        self.0.pending_commits.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// How an entry was used: when last (a use stamp, [`Entry::use_order`]),
/// and how many hits it served while held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Use {
    /// Its place in the order of use: nanoseconds since the Unix epoch.
    pub last_use: u64,
    /// How many times it was served from the cache.
    pub hits: u64,
}

/// What an eviction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evicted {
    /// Entries removed.
    pub entries: usize,
    /// Bytes of blobs deleted.
    pub bytes: u64,
}

impl Store {
    /// Opens the store under `dir`, deleting the partial downloads a crash
    /// may have left; entries are dated by `clock`.
    pub fn open(dir: &Path, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create folder", dir, e))?;
        let blobs = BlobStore::open(dir)?;
        let index = Index::open(&dir.join("index.redb"))?;
        let recency = Recency::default();
        recency.clock().after(index.latest_use()?);
        let open_files = OpenFiles::new(default_capacity());
        let store = Store {
            dir: dir.to_path_buf(),
            blobs,
            index,
            open_files,
            clock,
            recency,
            full: Default::default(),
            quota: Default::default(),
            damaged: Default::default(),
            pending_commits: Default::default(),
        };
        Ok(store)
    }

    pub(crate) fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    pub(crate) fn index(&self) -> &Index {
        &self.index
    }

    /// The clock that dates entries.
    pub fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    /// The same clock, to keep.
    pub fn shared_clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry for `key`, if any: from memory when hits asked for it
    /// lately, else read from the index file, checked against its blob.
    pub fn lookup(&self, key: &str) -> Option<Arc<Entry>> {
        if let Some(entry) = self.index.held(key) {
            return Some(entry);
        }
        let (entry, read_from) = match self.index.read(key) {
            Ok(found) => found?,
            Err(error) => {
                tracing::error!(key, %error, "cannot read the cache index");
                return None;
            }
        };
        // Opening it checks it, and keeps the handle for the hit that asked.
        if self.open_body(&entry).is_err() {
            let mut damaged = self.damaged.lock();
            // Said and queued once, however often it is asked for before
            // the next upkeep drops it.
            if !damaged.iter().any(|held| held == key) {
                tracing::warn!(key, sha256 = entry.sha256, "a cached body is missing or damaged: not served, dropped");
                damaged.push(key.to_string());
            }
            return None;
        }
        self.index.hold(key, &entry, read_from);
        Some(entry)
    }

    /// The body of `entry`, for positioned reads (a held handle when there
    /// is one); an error when the blob is missing or not of the entry's
    /// length.
    pub fn open_body(&self, entry: &Entry) -> std::io::Result<Arc<File>> {
        self.open_files.get_or_open(&entry.sha256, || {
            let file = self.blobs.open_blob(&entry.sha256)?;
            match file.metadata()?.len() == entry.size {
                true => Ok(file),
                false => {
                    Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "the blob is not of its entry's length"))
                }
            }
        })
    }

    fn delete_blob(&self, sha256: &str) {
        self.open_files.forget(sha256);
        self.blobs.remove(sha256);
    }

    /// Number of entries and bytes of bodies.
    pub fn totals(&self) -> (usize, u64) {
        self.index.totals()
    }

    /// Starts a download's temporary file.
    pub fn temp(&self) -> Result<TempBlob, StoreError> {
        self.blobs.temp()
    }

    /// Makes a finished download the entry for `key`. `entry.sha256` and
    /// `entry.size` must be those of `hashes`. Blocking.
    pub fn commit(
        &self,
        key: &str,
        temp: TempBlob,
        hashes: &BodyHashes,
        entry: Entry,
    ) -> Result<Arc<Entry>, StoreError> {
        debug_assert_eq!(entry.sha256, hashes.sha256);
        let entry = self.used_now(entry);
        if self.blobs.blob_len(&hashes.sha256) == Some(hashes.size) {
            // The same bytes are already stored (under another key or an
            // earlier fetch); the temporary file is dropped and deleted.
            drop(temp);
        } else {
            self.blobs.promote(temp, &hashes.sha256)?;
        }
        let (entry, freed) = self.index.put(key, entry)?;
        if let Some(sha256) = freed {
            self.delete_blob(&sha256);
        }
        if self.full.swap(false, std::sync::atomic::Ordering::Relaxed) {
            tracing::info!("bodies are stored again: downloads are cached");
        }
        Ok(entry)
    }

    /// Whether a body served whole is not yet in the index.
    pub fn commits_pending(&self) -> bool {
        self.pending_commits.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// Replaces the metadata of `key`'s entry (after a `304`) without touching
    /// its body. Blocking.
    pub fn update(&self, key: &str, entry: Entry) -> Result<Arc<Entry>, StoreError> {
        let (entry, freed) = self.index.put(key, self.used_now(entry))?;
        if let Some(sha256) = freed {
            self.delete_blob(&sha256);
        }
        Ok(entry)
    }

    /// Whether a blob with `sha256` and `size` is stored.
    pub fn holds(&self, sha256: &str, size: u64) -> bool {
        self.blobs.blob_len(sha256) == Some(size)
    }

    /// Makes `key` an entry for a blob already stored (see
    /// [`Cache::adopt`](crate::Cache::adopt)). Blocking.
    pub fn adopt(&self, key: &str, sha256: &str, size: u64, class: Class) -> Result<Option<Arc<Entry>>, StoreError> {
        if !self.holds(sha256, size) {
            return Ok(None);
        }
        let entry = Entry {
            sha256: sha256.to_string(),
            size,
            headers: vec![],
            validators: Validators::default(),
            fetched_at: unix_secs(self.clock.now()),
            class,
            last_used_ns: 0,
        };
        self.update(key, entry).map(Some)
    }

    /// Makes `body`, which pkgproxy wrote itself (a side's record of an
    /// answer), the entry for `key`, with the same crash safety as a
    /// download. Blocking.
    pub fn put(
        &self,
        key: &str,
        body: &[u8],
        headers: Vec<(String, String)>,
        class: Class,
    ) -> Result<Arc<Entry>, StoreError> {
        let mut temp = self.temp()?;
        temp.append(body)?;
        let hashes = temp.hashes();
        let entry = Entry {
            sha256: hashes.sha256.clone(),
            size: hashes.size,
            headers,
            validators: Validators::default(),
            fetched_at: unix_secs(self.clock.now()),
            class,
            last_used_ns: 0,
        };
        self.commit(key, temp, &hashes, entry)
    }

    /// Makes `key` an entry for what `from` holds, confirmed now and aging
    /// as `class` (a name moved to content fetched under its digest; `from`
    /// itself to record that the upstream confirmed it). `None` when
    /// `from` holds nothing. Blocking.
    pub fn link(&self, key: &str, from: &str, class: Class) -> Result<Option<Arc<Entry>>, StoreError> {
        let Some(entry) = self.lookup(from) else { return Ok(None) };
        let mut entry = Entry::clone(&entry);
        entry.fetched_at = unix_secs(self.clock.now());
        entry.class = class;
        self.update(key, entry).map(Some)
    }

    /// Makes each of `records` (bodies pkgproxy holds whole: a generation
    /// of files that go together) the entry for its key, all in one index
    /// commit: a reader sees all of them or none. Blocking.
    pub fn put_all(&self, records: Vec<Record>) -> Result<(), StoreError> {
        let now = unix_secs(self.clock.now());
        let mut entries = Vec::with_capacity(records.len());
        for record in records {
            let mut temp = self.temp()?;
            temp.append(&record.body)?;
            let hashes = temp.hashes();
            if self.blobs.blob_len(&hashes.sha256) != Some(hashes.size) {
                self.blobs.promote(temp, &hashes.sha256)?;
            }
            let entry = Entry {
                sha256: hashes.sha256,
                size: hashes.size,
                headers: record.headers,
                validators: record.validators,
                fetched_at: record.fetched_at.map_or(now, |at| at.min(now)),
                class: record.class,
                last_used_ns: 0,
            };
            entries.push((record.key, self.used_now(entry)));
        }
        let (_, freed) = self.index.put_all(entries)?;
        freed.iter().for_each(|sha256| self.delete_blob(sha256));
        Ok(())
    }

    /// Records a fact under each of `keys` (a repository's link to a blob,
    /// say): an empty body with `headers`, written in one commit. Blocking.
    pub fn mark(&self, keys: &[String], headers: Vec<(String, String)>, class: Class) -> Result<(), StoreError> {
        let empty = self.temp()?;
        let hashes = empty.hashes();
        if self.blobs.blob_len(&hashes.sha256) != Some(0) {
            self.blobs.promote(empty, &hashes.sha256)?;
        }
        let entry = Entry {
            sha256: hashes.sha256,
            size: 0,
            headers,
            validators: Validators::default(),
            fetched_at: unix_secs(self.clock.now()),
            class,
            last_used_ns: 0,
        };
        let records = keys.iter().map(|key| (key.clone(), self.used_now(entry.clone()))).collect();
        let (_, freed) = self.index.put_all(records)?;
        freed.iter().for_each(|sha256| self.delete_blob(sha256));
        Ok(())
    }

    /// A client was just served `key`'s entry: remembered in memory, written
    /// with the next [`Store::persist_recency`].
    pub fn touch(&self, key: &str) {
        self.recency.touch(key, self.clock.now());
    }

    /// A client was just served `key`'s entry from the cache: a use, and a
    /// hit counted, both written with the next [`Store::persist_recency`].
    pub fn hit(&self, key: &str) {
        self.recency.hit(key, self.clock.now());
    }

    /// `entry`, used now: writing an entry (a fetch, a revalidation, a
    /// name moved to it) is a use of it.
    fn used_now(&self, entry: Entry) -> Entry {
        Entry { last_used_ns: self.recency.clock().stamp(self.clock.now()), ..entry }
    }

    /// Writes what hits learnt since the last call into the index: the
    /// uses, in one commit, and the entries found without their body,
    /// dropped. Returns how many uses. Blocking.
    pub fn persist_recency(&self) -> Result<usize, StoreError> {
        let damaged = std::mem::take(&mut *self.damaged.lock());
        if !damaged.is_empty() {
            self.remove_all(&damaged)?;
        }
        let uses = self.recency.drain();
        self.index.record_uses(&uses)?;
        Ok(uses.len())
    }

    /// Where the cache stands: the bytes of its blobs, and the space on its
    /// file system.
    pub fn usage(&self) -> Usage {
        let (free, total) = file_system_space(&self.dir).unwrap_or((u64::MAX, u64::MAX));
        Usage { bytes: self.index.blob_bytes() + files_beside(&self.dir), free, total }
    }

    /// Removes the least recently used entries until the cache is back
    /// within `quota` (their blobs are deleted once no entry names them; a
    /// client still reading one keeps its open handle). Blocking.
    pub fn evict(&self, quota: &Quota, obsolete: &dyn Obsolete) -> Result<Evicted, StoreError> {
        self.evict_bytes(quota.to_free(self.usage()), obsolete)
    }

    /// Evicts now down to `quota`'s low-water mark, over its high-water
    /// mark or not (`pkgproxyctl cache gc`). Blocking.
    pub fn collect(&self, quota: &Quota, obsolete: &dyn Obsolete) -> Result<Evicted, StoreError> {
        self.evict_bytes(quota.to_free_now(self.usage()), obsolete)
    }

    /// Calls `visit` with every entry whose key starts with `prefix`, and
    /// its place in the order of use as eviction sees it (a use stamp,
    /// [`Entry::use_order`]). Blocking: it reads the index file.
    pub fn visit(&self, prefix: &str, mut visit: impl FnMut(&str, &Entry, u64)) -> Result<(), StoreError> {
        self.index.visit(prefix, |key, entry| {
            let last_use = self.recency.get(key).unwrap_or(0).max(entry.use_order());
            visit(key, entry, last_use);
        })
    }

    /// Calls `visit` with every entry whose key starts with `prefix` and
    /// how it was used ([`Use`]: the written uses and those in memory).
    /// Blocking: it reads the index file.
    pub fn visit_used(&self, prefix: &str, mut visit: impl FnMut(&str, &Entry, Use)) -> Result<(), StoreError> {
        self.index.visit_counted(prefix, |key, entry, hits| {
            let unwritten = self.recency.used(key).unwrap_or_default();
            let last_use = unwritten.at.max(entry.use_order());
            visit(key, entry, Use { last_use, hits: hits + unwritten.hits });
        })
    }

    /// When eviction removed `key`'s entry (Unix seconds), if it did and
    /// nothing was cached under it since.
    pub fn evicted_at(&self, key: &str) -> Option<u64> {
        self.index.evicted_at(key)
    }

    /// Removes every one of `keys`, deleting the blobs no entry names any
    /// more. Blocking.
    pub fn remove_all(&self, keys: &[String]) -> Result<Evicted, StoreError> {
        self.remove_keys(keys, None)
    }

    /// Removes `keys`, remembered as evicted at `evicted_at` when given.
    fn remove_keys(&self, keys: &[String], evicted_at: Option<u64>) -> Result<Evicted, StoreError> {
        let before = self.index.blob_bytes();
        let freed = self.index.remove_all(keys, evicted_at)?;
        freed.iter().for_each(|sha256| self.delete_blob(sha256));
        Ok(Evicted { entries: keys.len(), bytes: before.saturating_sub(self.index.blob_bytes()) })
    }

    /// Evicts the least recently used entries to free `bytes` now (a
    /// download found the disk full); the bytes freed. Blocking.
    pub fn make_room(&self, bytes: u64) -> Result<u64, StoreError> {
        self.evict_bytes(bytes, &crate::evict::NothingObsolete).map(|evicted| evicted.bytes)
    }

    /// Keeps to `quota` from now on: a body it does not admit is passed
    /// through, not cached.
    pub fn set_quota(&self, quota: Quota) {
        *self.quota.write() = quota;
    }

    /// The limits kept to now.
    pub fn quota(&self) -> Quota {
        *self.quota.read()
    }

    /// Whether a body of `size` bytes may be cached.
    pub fn admits(&self, size: u64) -> bool {
        self.quota.read().admits(size)
    }

    /// A download found the disk full even after eviction and is passed
    /// through uncached: said once, until a body is stored again.
    pub fn report_full(&self, key: &str) {
        if !self.full.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(key, "the cache's disk is full: downloads are passed through uncached until there is room");
        }
    }

    /// A download could not be stored (`error`) and is passed through
    /// uncached: said once, until a body is stored again.
    pub fn report_not_stored(&self, key: &str, error: &StoreError) {
        if error.is_full() {
            return self.report_full(key);
        }
        if !self.full.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(key, %error, "cannot store bodies: downloads are passed through uncached until one is stored");
        }
    }

    fn evict_bytes(&self, to_free: u64, obsolete: &dyn Obsolete) -> Result<Evicted, StoreError> {
        if to_free == 0 {
            return Ok(Evicted::default());
        }
        // The uses hits recorded since the last write count: an entry used
        // a moment ago is never taken for an old one.
        self.persist_recency()?;
        let mut evicted = Evicted::default();
        // In rounds, so a large eviction holds a bounded list of keys.
        while evicted.bytes < to_free {
            let mut picker = Picker::new(to_free - evicted.bytes).at_most(EVICTION_ROUND);
            self.index.choose(&mut picker, obsolete)?;
            let chosen = picker.chosen();
            if chosen.is_empty() {
                break;
            }
            let round = self.remove_keys(&chosen, Some(crate::entry::unix_secs(self.clock.now())))?;
            evicted.entries += round.entries;
            evicted.bytes += round.bytes;
        }
        if evicted.entries > 0 {
            tracing::info!(entries = evicted.entries, bytes = evicted.bytes, "evicted the least recently used entries");
        }
        Ok(evicted)
    }

    /// Forgets `key` and deletes its body if nothing else uses it. Blocking.
    pub fn remove(&self, key: &str) -> Result<(), StoreError> {
        if let Some(sha256) = self.index.remove(key)? {
            self.delete_blob(&sha256);
        }
        Ok(())
    }
}

/// The most entries one round of eviction removes.
const EVICTION_ROUND: usize = 10_000;

/// The bytes of the files at the top of the cache directory `dir`: the
/// index, and what the sides keep beside it (apt's `apt-index.redb`,
/// LXD's `lxd-items.redb`): the quota counts every file pkgproxy keeps
/// there, not only the bodies. Blobs are counted from the index, once each.
fn files_beside(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let file_bytes =
        |entry: std::fs::DirEntry| entry.metadata().ok().filter(|meta| meta.is_file()).map(|meta| meta.len());
    entries.filter_map(Result::ok).filter_map(file_bytes).sum()
}

/// Free and total bytes of the file system holding `dir`.
fn file_system_space(dir: &Path) -> Option<(u64, u64)> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    let unit = stat.f_frsize;
    Some((stat.f_bavail * unit, stat.f_blocks * unit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::evict::MinFree;

    fn store_body(store: &Store, key: &str, body: &[u8]) -> Arc<Entry> {
        let mut temp = store.temp().unwrap();
        temp.append(body).unwrap();
        let hashes = temp.hashes();
        let entry = Entry {
            sha256: hashes.sha256.clone(),
            size: hashes.size,
            headers: vec![("content-type".into(), "application/octet-stream".into())],
            validators: Validators { etag: Some("\"1\"".into()), last_modified: None },
            fetched_at: 1_700_000_000,
            class: Class::Immutable,
            last_used_ns: 0,
        };
        store.commit(key, temp, &hashes, entry).unwrap()
    }

    #[test]
    fn entries_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let stored = {
            let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
            store_body(&store, "apt/debian/pool/a.deb", b"package bytes")
        };
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let entry = store.lookup("apt/debian/pool/a.deb").unwrap();
        assert_eq!(entry, stored);
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut store.open_body(&entry).unwrap(), &mut body).unwrap();
        assert_eq!(body, b"package bytes");
        assert_eq!(store.totals(), (1, 13));
    }

    #[test]
    fn eviction_takes_the_least_recently_used_and_a_shared_blob_stays_while_named() {
        const MIB: usize = 1 << 20;
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(crate::clock::ManualClock::new(std::time::SystemTime::now()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let put = |key: &str, byte: u8| store.put(key, &vec![byte; MIB], vec![], Class::Immutable).unwrap();
        put("stale", 1);
        put("shared-by-name", 2);
        clock.advance(std::time::Duration::from_secs(10));
        put("fresh", 3);
        put("shared-by-hash", 2);
        clock.advance(std::time::Duration::from_secs(10));
        store.touch("stale");
        let index = std::fs::metadata(dir.path().join("index.redb")).unwrap().len();
        let usage = store.usage().bytes;
        assert_eq!(usage - index, 3 * MIB as u64, "the shared blob counts once, the index counts too");
        std::fs::write(dir.path().join("apt-index.redb"), vec![0; MIB]).unwrap();
        assert_eq!(store.usage().bytes, usage + MIB as u64, "a side's index beside the cache's counts too");
        std::fs::remove_file(dir.path().join("apt-index.redb")).unwrap();

        // A quota that takes a little under one blob: from 95 % to 90 %.
        let max_size = Some((usage - MIB as u64 * 3 / 4) * 10 / 9);
        let quota = Quota { max_size, min_free: MinFree::Bytes(0), max_object_size: None };
        let evicted = store.evict(&quota, &crate::evict::NothingObsolete).unwrap();
        assert_eq!((evicted.entries, evicted.bytes), (2, MIB as u64));
        assert!(store.lookup("stale").is_some(), "used a moment ago, not yet written");
        assert!(store.lookup("shared-by-name").is_none(), "the least recently used");
        assert!(store.lookup("fresh").is_none(), "next, and the first to free bytes");
        let shared = store.lookup("shared-by-hash").expect("still named");
        assert_eq!(store.open_body(&shared).unwrap().metadata().unwrap().len(), MIB as u64, "its bytes stay");
        assert_eq!(
            store.evict(&quota, &crate::evict::NothingObsolete).unwrap(),
            Evicted::default(),
            "within the quota now"
        );

        // What eviction took is remembered as evicted, and when; what was
        // never cached or removed by hand is not.
        let now = crate::entry::unix_secs(clock.now());
        assert_eq!(store.evicted_at("fresh"), Some(now));
        assert_eq!(store.evicted_at("never"), None);
        store.remove_all(&["stale".to_string()]).unwrap();
        assert_eq!(store.evicted_at("stale"), None, "removed, not evicted");
        put("fresh", 4);
        assert_eq!(store.evicted_at("fresh"), None, "cached again");
        drop(store);
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        assert_eq!(store.evicted_at("shared-by-name"), Some(now), "remembered across a restart");
    }

    #[test]
    fn uses_are_written_in_a_batch_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(crate::clock::ManualClock::new(std::time::SystemTime::now()));
        {
            let store = Store::open(dir.path(), clock.clone()).unwrap();
            store.put("a", b"a", vec![], Class::Immutable).unwrap();
            clock.advance(std::time::Duration::from_secs(100));
            store.touch("a");
            store.touch("gone");
            assert_eq!(store.persist_recency().unwrap(), 2);
        }
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let entry = store.lookup("a").unwrap();
        assert!(entry.last_used_ns >= (entry.fetched_at + 100) * crate::entry::NANOS_PER_SEC);
        assert_eq!(entry.use_order(), entry.last_used_ns);
    }

    #[test]
    fn hits_are_counted_with_the_uses_kept_across_a_restart_and_gone_with_their_entry() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(crate::clock::ManualClock::new(std::time::SystemTime::now()));
        let hits = |store: &Store| {
            let mut seen = Vec::new();
            store.visit_used("", |key, _, used| seen.push((key.to_string(), used.hits))).unwrap();
            seen
        };
        {
            let store = Store::open(dir.path(), clock.clone()).unwrap();
            store.put("a", b"a", vec![], Class::Immutable).unwrap();
            store.put("b", b"b", vec![], Class::Immutable).unwrap();
            store.touch("a");
            store.hit("a");
            store.hit("a");
            assert_eq!(hits(&store), [("a".to_string(), 2), ("b".to_string(), 0)], "counted in memory");
            store.persist_recency().unwrap();
            store.hit("a");
            assert_eq!(hits(&store), [("a".to_string(), 3), ("b".to_string(), 0)], "written and in memory");
            store.persist_recency().unwrap();
        }
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        assert_eq!(hits(&store), [("a".to_string(), 3), ("b".to_string(), 0)], "kept across a restart");
        store.remove_all(&["a".to_string()]).unwrap();
        store.put("a", b"a again", vec![], Class::Immutable).unwrap();
        assert_eq!(hits(&store), [("a".to_string(), 0), ("b".to_string(), 0)], "a new entry counts afresh");
    }

    #[test]
    fn marks_are_written_together_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let keys = ["link/a".to_string(), "link/b".to_string()];
        {
            let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
            store.mark(&keys, vec![("visibility".into(), "public".into())], Class::Immutable).unwrap();
            store.mark(&keys[1..], vec![("visibility".into(), "private".into())], Class::Immutable).unwrap();
        }
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let visibility = |key: &str| store.lookup(key).map(|entry| entry.headers[0].1.clone());
        assert_eq!(visibility("link/a").as_deref(), Some("public"));
        assert_eq!(visibility("link/b").as_deref(), Some("private"), "a mark replaced");
        assert_eq!(store.totals(), (2, 0));
        store.remove("link/a").unwrap();
        store.remove("link/b").unwrap();
        assert_eq!(store.totals(), (0, 0));
    }

    #[test]
    fn an_entry_whose_body_is_damaged_is_not_served_and_is_dropped_at_the_next_upkeep() {
        let dir = tempfile::tempdir().unwrap();
        let entry = {
            let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
            store_body(&store, "k", b"0123456789")
        };
        let blob = BlobStore::open(dir.path()).unwrap().path(&entry.sha256);
        std::fs::write(&blob, b"01234").unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        assert_eq!(store.totals(), (1, 10), "nothing is read at open");
        assert!(store.lookup("k").is_none());
        store.persist_recency().unwrap();
        assert_eq!(store.totals(), (0, 0));
        assert!(!blob.exists());
    }

    #[test]
    fn a_large_index_is_not_read_at_open_and_totals_are_kept_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let keys: Vec<String> = (0..5_000).map(|n| format!("go/example.com/m{n}/@v/v1.0.0.info")).collect();
        {
            let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
            let records = keys
                .iter()
                .map(|key| Record {
                    key: key.clone(),
                    body: bytes::Bytes::from(format!("{{\"Version\":\"{key}\"}}")),
                    headers: vec![],
                    validators: Validators::default(),
                    class: Class::Immutable,
                    fetched_at: (key == &keys[1]).then_some(1_000),
                })
                .collect();
            store.put_all(records).unwrap();
            store.remove(&keys[0]).unwrap();
        }
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let (entries, bytes) = store.totals();
        assert_eq!(entries, 4_999);
        let expected: usize = keys[1..].iter().map(|key| format!("{{\"Version\":\"{key}\"}}").len()).sum();
        assert_eq!(bytes, expected as u64);
        assert_eq!(store.index.counted(), 4_999);
        assert!(store.lookup(&keys[0]).is_none());
        assert!(store.lookup(&keys[4_000]).is_some(), "read from the file when asked for");
        assert_eq!(store.lookup(&keys[1]).unwrap().fetched_at, 1_000, "fetched elsewhere, dated so");
        assert!(store.lookup(&keys[2]).unwrap().fetched_at > 1_000, "fetched now");
        let mut listed = 0;
        store.visit("go/example.com/m4", |_, _, _| listed += 1).unwrap();
        assert_eq!(listed, 1 + 10 + 100 + 1000, "m4, m40.., m400.., m4000..");
    }

    #[test]
    fn replacing_an_entry_frees_its_old_body_but_not_a_shared_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let old = store_body(&store, "a", b"old");
        store_body(&store, "b", b"old");
        store_body(&store, "a", b"new");
        // "b" still holds the old bytes.
        assert!(store.blobs.path(&old.sha256).exists());
        store.remove("b").unwrap();
        assert!(!store.blobs.path(&old.sha256).exists());
        assert_eq!(store.totals(), (1, 3));
    }
}
