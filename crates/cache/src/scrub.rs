//! The scrub (`pkgproxyctl cache verify`): every blob the index names is
//! read again and hashed against its name, at a pace that leaves the disk
//! to the clients. An entry whose blob is missing or damaged is dropped (the
//! next request fetches it again); blobs no entry names, and temporary files
//! nothing writes to any more, are deleted. Run by the daemon itself, so it
//! never races the daemon's own writes; hits are served all along.

use std::collections::HashSet;
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

impl Store {
    /// Scrubs the store (see the module). Blocking, and long.
    pub fn scrub(&self, pace: u64, left_over_after: Duration) -> Result<Scrubbed, StoreError> {
        let mut scrubbed = Scrubbed::default();
        let mut bad = HashSet::new();
        self.index().visit_blobs(|sha256, size| {
            scrubbed.checked += 1;
            let sound =
                self.blobs().rehash(sha256, pace).is_some_and(|(actual, length)| actual == sha256 && length == size);
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

        let scrubbed = store.scrub(u64::MAX, Duration::ZERO).unwrap();
        assert_eq!((scrubbed.checked, scrubbed.bad, scrubbed.entries_removed), (3, 2, 2));
        assert_eq!((scrubbed.orphans_removed, scrubbed.temps_removed), (1, 1));
        assert!(scrubbed.found_damage());
        assert!(store.lookup("flipped").is_none() && store.lookup("deleted").is_none());
        assert!(store.lookup("sound").is_some());
        assert!(!orphan.exists());
        let again = store.scrub(u64::MAX, Duration::ZERO).unwrap();
        assert_eq!(again, Scrubbed { checked: 1, ..Scrubbed::default() }, "clean now");
    }

    #[test]
    fn a_young_orphan_or_temporary_file_may_be_a_download_and_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        std::fs::write(dir.path().join("tmp/123-4.part"), b"a download going on").unwrap();
        let scrubbed = store.scrub(u64::MAX, LEFT_OVER_AFTER).unwrap();
        assert_eq!(scrubbed, Scrubbed::default());
        assert!(dir.path().join("tmp/123-4.part").exists());
    }
}
