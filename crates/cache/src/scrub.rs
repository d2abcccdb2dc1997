//! The scrub (`pkgproxyctl cache verify`): every blob the index names is
//! read again and hashed against its name, at a pace that leaves the disk
//! to the clients. An entry whose blob is missing or damaged is dropped (the
//! next request fetches it again); blobs no entry names, and temporary files
//! nothing writes to any more, are deleted. Run by the daemon itself, so it
//! never races the daemon's own writes; hits are served all along.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::error::StoreError;
use crate::store::Store;

/// How fast blobs are read back: the disk's bandwidth is the clients'.
pub const PACE: u64 = 256 * 1024 * 1024;

/// How long a blob no entry names, or a temporary file, must be untouched
/// before it counts as left over (younger ones may belong to a download).
pub const LEFT_OVER_AFTER: Duration = Duration::from_secs(10 * 60);

/// What a scrub found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scrubbed {
    /// Blobs read back.
    pub checked: usize,
    /// Blobs missing or not matching their name.
    pub bad: usize,
    /// Entries dropped because their blob was bad.
    pub entries_removed: usize,
    /// Blobs no entry named, deleted.
    pub orphans_removed: usize,
    /// Stale temporary files deleted.
    pub temps_removed: usize,
    /// Bytes freed on disk.
    pub bytes_freed: u64,
}

impl Scrubbed {
    /// Whether anything was wrong.
    pub fn found_damage(&self) -> bool {
        self.bad + self.orphans_removed + self.temps_removed > 0
    }
}

/// How far the scrub in progress is, for a progress bar.
#[derive(Debug, Default)]
pub struct Progress {
    running: AtomicBool,
    checked: AtomicUsize,
    bytes_read: AtomicU64,
    bytes_total: AtomicU64,
}

/// The scrub in progress, as far as it went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reached {
    /// Blobs read back so far.
    pub checked: usize,
    /// Bytes read back so far.
    pub bytes_read: u64,
    /// Bytes of every blob named when it started.
    pub bytes_total: u64,
}

impl Progress {
    /// How far the scrub in progress is; `None` when none is running.
    pub fn reached(&self) -> Option<Reached> {
        self.running.load(Ordering::Acquire).then(|| Reached {
            checked: self.checked.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_total: self.bytes_total.load(Ordering::Relaxed),
        })
    }

    /// Starts counting a scrub of `bytes_total`; `false` when one is
    /// already running.
    fn start(&self, bytes_total: u64) -> bool {
        if self.running.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.checked.store(0, Ordering::Relaxed);
        self.bytes_read.store(0, Ordering::Relaxed);
        self.bytes_total.store(bytes_total, Ordering::Relaxed);
        true
    }
}

/// Ends the count when the scrub returns, however it returns.
struct Running<'a>(&'a Progress);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

impl Store {
    /// Scrubs the store (see the module), counting in `progress`. Blocking,
    /// and long; one at a time.
    pub fn scrub(&self, pace: u64, left_over_after: Duration, progress: &Progress) -> Result<Scrubbed, StoreError> {
        if !progress.start(self.index().blob_bytes()) {
            return Err(StoreError::Busy("a verify of the cache is already running"));
        }
        let _running = Running(progress);
        let mut scrubbed = Scrubbed::default();
        let mut bad = HashSet::new();
        let read = |bytes: u64| {
            progress.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        };
        self.index().visit_blobs(|sha256, size| {
            scrubbed.checked += 1;
            progress.checked.fetch_add(1, Ordering::Relaxed);
            let rehashed = self.blobs().rehash(sha256, pace, &read);
            let sound = rehashed.is_some_and(|(actual, length)| actual == sha256 && length == size);
            if !sound {
                bad.insert(sha256.to_string());
            }
        })?;
        let damaged = self.index().keys_naming(&bad)?;
        for sha256 in &bad {
            tracing::warn!(sha256, "a cached body is missing or damaged: its entries are dropped");
        }
        scrubbed.bad = bad.len();
        let removed = self.remove_all(&damaged)?;
        scrubbed.entries_removed = removed.entries;
        let named = |sha256: &str| self.index().names_blob(sha256).unwrap_or(true);
        let (orphans, orphan_bytes) = self.blobs().sweep_old_orphans(&named, left_over_after);
        scrubbed.orphans_removed = orphans;
        scrubbed.temps_removed = self.blobs().clear_stale_temp(left_over_after);
        scrubbed.bytes_freed = removed.bytes + orphan_bytes;
        Ok(scrubbed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::SystemClock;
    use crate::entry::Class;

    #[test]
    fn each_kind_of_damage_is_found_and_repaired_and_a_clean_cache_reports_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let flipped = store.put("flipped", b"some bytes", vec![], Class::Immutable).unwrap();
        let deleted = store.put("deleted", b"other bytes", vec![], Class::Immutable).unwrap();
        store.put("sound", b"sound bytes", vec![], Class::Immutable).unwrap();
        std::fs::write(store.blobs().path(&flipped.sha256), b"some byteZ").unwrap();
        std::fs::remove_file(store.blobs().path(&deleted.sha256)).unwrap();
        let orphan = store.blobs().path(&"ab".repeat(32));
        std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
        std::fs::write(&orphan, b"nobody's").unwrap();
        std::fs::write(dir.path().join("tmp/123-4.part"), b"half a download").unwrap();

        let progress = Progress::default();
        let scrubbed = store.scrub(u64::MAX, Duration::ZERO, &progress).unwrap();
        assert_eq!(progress.reached(), None, "done");
        assert_eq!((scrubbed.checked, scrubbed.bad, scrubbed.entries_removed), (3, 2, 2));
        assert_eq!((scrubbed.orphans_removed, scrubbed.temps_removed), (1, 1));
        assert!(scrubbed.found_damage());
        assert!(store.lookup("flipped").is_none() && store.lookup("deleted").is_none());
        assert!(store.lookup("sound").is_some());
        assert!(!orphan.exists());
        let again = store.scrub(u64::MAX, Duration::ZERO, &progress).unwrap();
        assert_eq!(again, Scrubbed { checked: 1, ..Scrubbed::default() }, "clean now");
    }

    #[test]
    fn a_young_orphan_or_temporary_file_may_be_a_download_and_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        std::fs::write(dir.path().join("tmp/123-4.part"), b"a download going on").unwrap();
        let scrubbed = store.scrub(u64::MAX, LEFT_OVER_AFTER, &Progress::default()).unwrap();
        assert_eq!(scrubbed, Scrubbed::default());
        assert!(dir.path().join("tmp/123-4.part").exists());
    }

    #[test]
    fn progress_is_counted_while_it_runs_and_one_runs_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        store.put("a", &[7; 3000], vec![], Class::Immutable).unwrap();
        let progress = Progress::default();
        assert!(progress.start(10));
        assert!(matches!(store.scrub(u64::MAX, Duration::ZERO, &progress), Err(StoreError::Busy(_))));
        assert_eq!(progress.reached(), Some(Reached { checked: 0, bytes_read: 0, bytes_total: 10 }));
        progress.running.store(false, Ordering::Release);
        let seen = parking_lot::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            scope.spawn(|| store.scrub(6000, Duration::ZERO, &progress).unwrap());
            for _ in 0..50 {
                seen.lock().extend(progress.reached());
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let seen = seen.into_inner();
        assert!(seen.iter().any(|reached| reached.bytes_total == 3000), "{seen:?}");
        assert!(seen.windows(2).all(|pair| pair[0].bytes_read <= pair[1].bytes_read));
        assert_eq!(progress.reached(), None);
    }
}
