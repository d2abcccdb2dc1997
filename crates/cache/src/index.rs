//! The index: cache key → [`Entry`], persisted in redb and mirrored in memory.
//!
//! Every lookup is answered from the in-memory map, so a cache hit costs no
//! disk access and no blocking call; writes go to redb first (a durable,
//! crash-safe commit) and only then into the map, so what a reader sees is
//! always on disk. Writes block on fsync: callers run them off the async
//! threads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use redb::{Database, ReadableTable, TableDefinition};

use crate::entry::Entry;
use crate::error::StoreError;

const ENTRIES: TableDefinition<&str, &[u8]> = TableDefinition::new("entries");

/// The persistent key → entry map.
pub struct Index {
    path: PathBuf,
    db: Database,
    entries: RwLock<HashMap<String, Arc<Entry>>>,
    /// How many entries name each blob, so a blob is deleted when its last
    /// entry goes (two keys may hold the same bytes), and the bytes of the
    /// blobs named.
    blob_refs: Mutex<BlobRefs>,
}

/// Each named blob's entry count and size, and the bytes of them all.
#[derive(Debug, Default)]
struct BlobRefs {
    counts: HashMap<String, (usize, u64)>,
    bytes: u64,
}

impl BlobRefs {
    fn hold(&mut self, entry: &Entry) {
        let held = self.counts.entry(entry.sha256.clone()).or_insert((0, entry.size));
        if held.0 == 0 {
            self.bytes += entry.size;
        }
        held.0 += 1;
    }

    /// Drops one reference to `sha256`; returns it when none is left.
    fn release(&mut self, sha256: &str) -> Option<String> {
        let held = self.counts.get_mut(sha256)?;
        held.0 -= 1;
        if held.0 > 0 {
            return None;
        }
        self.bytes -= held.1;
        self.counts.remove(sha256);
        Some(sha256.to_string())
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Index {
    /// Opens or creates the index file and loads every record. Records that
    /// cannot be decoded are reported and skipped (they are dropped at the
    /// next write of that key).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::create(path).map_err(|e| index_error(path, e))?;
        let index =
            Index { path: path.to_path_buf(), db, entries: RwLock::new(HashMap::new()), blob_refs: Mutex::default() };
        index.load()?;
        Ok(index)
    }

    fn load(&self) -> Result<(), StoreError> {
        let path = &self.path;
        let txn = self.db.begin_write().map_err(|e| index_error(path, e))?;
        // Opening the table in a write transaction creates it on first use.
        txn.open_table(ENTRIES).map_err(|e| index_error(path, e))?;
        txn.commit().map_err(|e| index_error(path, e))?;

        let txn = self.db.begin_read().map_err(|e| index_error(path, e))?;
        let table = txn.open_table(ENTRIES).map_err(|e| index_error(path, e))?;
        let mut entries = HashMap::new();
        for row in table.iter().map_err(|e| index_error(path, e))? {
            let (key, value) = row.map_err(|e| index_error(path, e))?;
            let key = key.value().to_string();
            match serde_json::from_slice::<Entry>(value.value()) {
                Ok(entry) => {
                    entries.insert(key, Arc::new(entry));
                }
                Err(e) => tracing::warn!(key, error = %e, "skipping unreadable cache index record"),
            }
        }
        let mut refs = BlobRefs::default();
        for entry in entries.values() {
            refs.hold(entry);
        }
        *self.entries.write().unwrap_or_else(|p| p.into_inner()) = entries;
        *self.blob_refs.lock().unwrap_or_else(|p| p.into_inner()) = refs;
        Ok(())
    }

    /// The entry for `key`, if any.
    pub fn get(&self, key: &str) -> Option<Arc<Entry>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Every key and entry (for start-up checks and maintenance).
    pub fn snapshot(&self) -> Vec<(String, Arc<Entry>)> {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        entries.iter().map(|(k, v)| (k.clone(), Arc::clone(v))).collect()
    }

    /// Number of entries and the sum of their body sizes.
    pub fn totals(&self) -> (usize, u64) {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        (entries.len(), entries.values().map(|e| e.size).sum())
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
    /// many). Returns the entries and the hashes of blobs no entry refers
    /// to any more. Blocking.
    pub fn put_all(&self, records: Vec<(String, Entry)>) -> Result<(Vec<Arc<Entry>>, Vec<String>), StoreError> {
        let encoded = records
            .iter()
            .map(|(key, entry)| {
                serde_json::to_vec(entry).map_err(|e| StoreError::Record { key: key.clone(), message: e.to_string() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.write(|table| {
            for ((key, _), record) in records.iter().zip(&encoded) {
                table.insert(key.as_str(), record.as_slice())?;
            }
            Ok(())
        })?;
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let mut refs = self.blob_refs.lock().unwrap_or_else(|p| p.into_inner());
        let (mut written, mut freed) = (Vec::with_capacity(records.len()), Vec::new());
        for (key, entry) in records {
            let entry = Arc::new(entry);
            refs.hold(&entry);
            if let Some(old) = entries.insert(key, Arc::clone(&entry)) {
                freed.extend(refs.release(&old.sha256));
            }
            written.push(entry);
        }
        Ok((written, freed))
    }

    /// Removes `key`. Returns the hash of a blob no entry refers to any more.
    /// Blocking.
    pub fn remove(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.remove_all(&[key.to_string()])?.pop())
    }

    /// Removes every one of `keys` in one commit. Returns the hashes of
    /// blobs no entry refers to any more. Blocking.
    pub fn remove_all(&self, keys: &[String]) -> Result<Vec<String>, StoreError> {
        self.write(|table| {
            for key in keys {
                table.remove(key.as_str())?;
            }
            Ok(())
        })?;
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let mut refs = self.blob_refs.lock().unwrap_or_else(|p| p.into_inner());
        Ok(keys.iter().filter_map(|key| entries.remove(key)).filter_map(|old| refs.release(&old.sha256)).collect())
    }

    /// Writes when each of `uses` (key, time) was last used, in one commit,
    /// into the records as they are in the table (a record a fetch replaced
    /// meanwhile keeps its new content). Blocking.
    pub fn touch_all(&self, uses: &[(String, u64)]) -> Result<(), StoreError> {
        let mut touched = Vec::new();
        self.write(|table| {
            for (key, at) in uses {
                let Some(record) = table.get(key.as_str())? else { continue };
                let Ok(mut entry) = serde_json::from_slice::<Entry>(record.value()) else { continue };
                drop(record);
                if entry.last_used >= *at {
                    continue;
                }
                entry.last_used = *at;
                let Ok(encoded) = serde_json::to_vec(&entry) else { continue };
                table.insert(key.as_str(), encoded.as_slice())?;
                touched.push((key.clone(), entry));
            }
            Ok(())
        })?;
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        for (key, entry) in touched {
            if let Some(held) = entries.get_mut(&key) {
                if held.sha256 == entry.sha256 && held.fetched_at == entry.fetched_at {
                    *held = Arc::new(entry);
                }
            }
        }
        Ok(())
    }

    /// Bytes of the blobs the entries name, each once.
    pub fn blob_bytes(&self) -> u64 {
        self.blob_refs.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }

    fn write(
        &self,
        change: impl FnOnce(&mut redb::Table<'_, &str, &[u8]>) -> Result<(), redb::StorageError>,
    ) -> Result<(), StoreError> {
        let path = &self.path;
        let txn = self.db.begin_write().map_err(|e| index_error(path, e))?;
        {
            let mut table = txn.open_table(ENTRIES).map_err(|e| index_error(path, e))?;
            change(&mut table).map_err(|e| index_error(path, e))?;
        }
        txn.commit().map_err(|e| index_error(path, e))
    }
}

fn index_error(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Index { path: path.to_path_buf(), message: e.to_string() }
}
