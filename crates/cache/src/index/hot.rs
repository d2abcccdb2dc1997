//! The entries hits asked for lately, in memory, so a hit costs no read of
//! the index file: a bounded share of the index (a cache of a million
//! entries does not fit in the memory pkgproxy keeps to), the rest read
//! from redb when asked for.
//!
//! A reader that missed here reads the entry from the file and offers it
//! back; a write that committed since the reader's read began must not be
//! overwritten by that older copy. Each write bumps a generation under the
//! exclusive side of a lock, and a reader's offer is taken, under the
//! shared side, only when no write came between: what is held here is never
//! older than the file.

use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use crate::entry::Entry;

/// Memory the held entries may take, roughly: about 150,000 entries of a
/// package with a content type and an ETag, so hits spread over a site's
/// working set (tens of thousands of packages, crates and layers) read
/// nothing from the file once each was asked for. It fills only as
/// distinct entries are asked for: a small cache never holds this much.
const CAPACITY_BYTES: u64 = 48 << 20;
/// What an entry costs beyond its key and header text: the hash, the
/// fields, the allocations.
const ENTRY_OVERHEAD: u64 = 192;

/// When a reader began reading the index file, in writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation(u64);

/// The entries held in memory.
pub struct Hot {
    entries: Cache<String, Arc<Entry>, EntryWeight>,
    generation: AtomicU64,
    writing: RwLock<()>,
}

impl std::fmt::Debug for Hot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hot").field("held", &self.entries.len()).finish_non_exhaustive()
    }
}

impl Default for Hot {
    fn default() -> Self {
        let estimated = (CAPACITY_BYTES / (ENTRY_OVERHEAD + 128)) as usize;
        Hot {
            entries: Cache::with_weighter(estimated, CAPACITY_BYTES, EntryWeight),
            generation: AtomicU64::new(0),
            writing: RwLock::new(()),
        }
    }
}

impl Hot {
    /// The entry held for `key`.
    pub fn get(&self, key: &str) -> Option<Arc<Entry>> {
        self.entries.get(key)
    }

    /// Taken before reading the index file, handed back to [`Hot::offer`].
    pub fn generation(&self) -> Generation {
        Generation(self.generation.load(Ordering::Acquire))
    }

    /// Holds `entry`, read from the file since `read_from`, unless a write
    /// came in between (it may be older than the file now).
    pub fn offer(&self, key: &str, entry: &Arc<Entry>, read_from: Generation) {
        let _reading = self.writing.read();
        if self.generation.load(Ordering::Acquire) == read_from.0 {
            self.entries.insert(key.to_string(), Arc::clone(entry));
        }
    }

    /// Applies what a commit wrote: `written` entries held as they are now,
    /// `removed` keys dropped.
    pub fn written<'a>(
        &self,
        written: impl IntoIterator<Item = (&'a str, &'a Arc<Entry>)>,
        removed: impl IntoIterator<Item = &'a str>,
    ) {
        let _writing = self.writing.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        for (key, entry) in written {
            self.entries.insert(key.to_string(), Arc::clone(entry));
        }
        for key in removed {
            self.entries.remove(key);
        }
    }

    /// Replaces the held copy of `key` by `entry` if one is held and names
    /// the same content (a use written; a fetch may have replaced it).
    pub fn refresh(&self, key: &str, entry: &Arc<Entry>) {
        let _writing = self.writing.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(held) = self.entries.peek(key) {
            if held.sha256 == entry.sha256 && held.fetched_at == entry.fetched_at {
                self.entries.insert(key.to_string(), Arc::clone(entry));
            }
        }
    }
}

/// An entry's weight: roughly the bytes it holds.
#[derive(Debug, Clone)]
struct EntryWeight;

impl Weighter<String, Arc<Entry>> for EntryWeight {
    fn weight(&self, key: &String, entry: &Arc<Entry>) -> u64 {
        let headers: usize = entry.headers.iter().map(|(name, value)| name.len() + value.len() + 48).sum();
        key.len() as u64 + headers as u64 + ENTRY_OVERHEAD
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{Class, Validators};

    fn entry(sha256: &str) -> Arc<Entry> {
        Arc::new(Entry {
            sha256: sha256.into(),
            size: 1,
            headers: vec![],
            validators: Validators::default(),
            fetched_at: 1,
            class: Class::Immutable,
            last_used_ns: 0,
        })
    }

    #[test]
    fn an_offer_read_before_a_write_is_refused_and_one_after_is_held() {
        let hot = Hot::default();
        let before = hot.generation();
        hot.written([("k", &entry("new"))], []);
        hot.offer("k", &entry("old"), before);
        assert_eq!(hot.get("k").unwrap().sha256, "new", "the older copy does not replace the write");
        hot.written([], ["k"]);
        assert!(hot.get("k").is_none());
        let after = hot.generation();
        hot.offer("k", &entry("read"), after);
        assert_eq!(hot.get("k").unwrap().sha256, "read");
    }

    #[test]
    fn memory_is_bounded() {
        let hot = Hot::default();
        let offered = 2 * CAPACITY_BYTES / ENTRY_OVERHEAD;
        for n in 0..offered {
            hot.offer(&format!("apt/debian/pool/main/p/package-{n}.deb"), &entry("x"), hot.generation());
        }
        assert!(hot.entries.weight() <= CAPACITY_BYTES);
        assert!((hot.entries.len() as u64) < offered / 2, "{} of {offered} held", hot.entries.len());
    }
}
