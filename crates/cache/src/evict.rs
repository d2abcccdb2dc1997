//! Which entries go when the cache is over its quota or its disk is short
//! of space: the least recently used first, by whole entries, counting a
//! blob's bytes as freed only when its last entry goes (an apt by-hash copy
//! and the same file by name, identical layers: one blob, several keys).
//!
//! Entries that can never be served again (an apt index file a newer
//! Release has superseded) go before any other.
//!
//! Eviction starts above a high-water mark and goes down to a low-water
//! mark, so it runs now and then, not on every write.

use std::collections::{HashMap, HashSet};

use crate::entry::Entry;

/// The limits the cache keeps to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// The most bytes of bodies kept (`None`: no limit).
    pub max_size: Option<u64>,
    /// The free space kept on the cache's file system.
    pub min_free: MinFree,
    /// The largest body cached (`None`: a tenth of `max_size`, see
    /// [`OBJECT_SHARE`]).
    pub max_object_size: Option<u64>,
}

/// Without a `max_object_size`, a body may take this share of `max_size`
/// at most: one client's two large downloads would otherwise flush every
/// other entry (eviction is by least recent use, whoever asked).
pub const OBJECT_SHARE: u64 = 10;

/// Free space kept on the cache's file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinFree {
    /// A share of the file system, in hundredths of a percent (`500`: 5 %).
    Share(u32),
    /// A number of bytes.
    Bytes(u64),
}

impl Default for MinFree {
    fn default() -> Self {
        MinFree::Share(500)
    }
}

impl MinFree {
    /// In bytes, on a file system of `total` bytes.
    pub fn bytes(self, total: u64) -> u64 {
        match self {
            MinFree::Share(share) => (u128::from(total) * u128::from(share) / 10_000) as u64,
            MinFree::Bytes(bytes) => bytes,
        }
    }
}

/// Where the cache stands against its quota.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes the cache takes on disk: its bodies (each blob once) and its
    /// index.
    pub bytes: u64,
    /// Free bytes on the cache's file system.
    pub free: u64,
    /// The file system's size.
    pub total: u64,
}

/// The share of the quota above which eviction starts, and the one it goes
/// down to, in percent.
const HIGH_WATER: u64 = 95;
const LOW_WATER: u64 = 90;

impl Quota {
    /// How many bytes to free now (`0`: none): over the high-water mark,
    /// down to the low-water mark; short of free space, to the headroom
    /// and a tenth more.
    pub fn to_free(&self, usage: Usage) -> u64 {
        let over_quota = match self.max_size {
            Some(max) if usage.bytes > max / 100 * HIGH_WATER => usage.bytes - max / 100 * LOW_WATER,
            _ => 0,
        };
        let headroom = self.min_free.bytes(usage.total);
        let short_of_space = match usage.free < headroom {
            true => headroom + headroom / 10 - usage.free,
            false => 0,
        };
        over_quota.max(short_of_space)
    }

    /// How many bytes to free to reach the low-water mark now, above the
    /// high-water mark or not.
    pub fn to_free_now(&self, usage: Usage) -> u64 {
        let over_low = self.max_size.map_or(0, |max| usage.bytes.saturating_sub(max / 100 * LOW_WATER));
        over_low.max(self.to_free(usage))
    }

    /// The largest body cached: `max_object_size`, else a tenth of
    /// `max_size` (`None`: no limit at all).
    pub fn largest_object(&self) -> Option<u64> {
        let share = self.max_size.map(|max| max / OBJECT_SHARE);
        match self.max_object_size {
            Some(largest) => Some(self.max_size.map_or(largest, |max| largest.min(max))),
            None => share,
        }
    }

    /// Whether a body of `size` bytes may be cached at all: one larger than
    /// [`Quota::largest_object`] is passed through.
    pub fn admits(&self, size: u64) -> bool {
        self.largest_object().is_none_or(|largest| size <= largest)
    }
}

/// What the sides know of entries that can never be served again (an apt
/// index file a newer Release superseded): eviction takes them first.
pub trait Obsolete {
    /// The key prefixes under which such entries may lie: only these are
    /// read, not the whole index.
    fn prefixes(&self) -> Vec<String>;
    /// Whether the entry `key` can never be served again.
    fn is_obsolete(&self, key: &str, entry: &Entry) -> bool;
}

/// Nothing is known to be obsolete.
#[derive(Debug, Clone, Copy, Default)]
pub struct NothingObsolete;

impl Obsolete for NothingObsolete {
    fn prefixes(&self) -> Vec<String> {
        Vec::new()
    }

    fn is_obsolete(&self, _: &str, _: &Entry) -> bool {
        false
    }
}

/// Picks the keys to remove, offered in the order they should go, until
/// enough bytes are freed; a blob counts once its last key is picked.
#[derive(Debug, Default)]
pub struct Picker {
    to_free: u64,
    /// The most keys picked at once (the rest in a later round).
    most: usize,
    freed: u64,
    chosen: Vec<String>,
    picked: HashSet<String>,
    /// For each blob some of whose keys are picked: how many.
    taken: HashMap<String, u64>,
}

impl Picker {
    /// A picker that frees `to_free` bytes.
    pub fn new(to_free: u64) -> Self {
        Picker { to_free, most: usize::MAX, ..Picker::default() }
    }

    /// Picks at most `most` keys.
    pub fn at_most(self, most: usize) -> Self {
        Picker { most, ..self }
    }

    /// Whether enough is picked.
    pub fn is_done(&self) -> bool {
        self.freed >= self.to_free || self.chosen.len() >= self.most
    }

    /// Offers `key`, whose blob `sha256` of `size` bytes `holders` keys
    /// name in all. A key offered twice counts once.
    pub fn offer(&mut self, key: &str, sha256: &str, size: u64, holders: u64) {
        if self.is_done() || !self.picked.insert(key.to_string()) {
            return;
        }
        let taken = self.taken.entry(sha256.to_string()).or_default();
        *taken += 1;
        if *taken >= holders {
            self.freed += size;
        }
        self.chosen.push(key.to_string());
    }

    /// The keys picked, in the order offered.
    pub fn chosen(self) -> Vec<String> {
        self.chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_starts_at_the_high_water_mark_and_goes_to_the_low_one() {
        let quota = Quota { max_size: Some(1000), min_free: MinFree::Bytes(0), max_object_size: None };
        let usage = |bytes| Usage { bytes, free: 1 << 30, total: 1 << 31 };
        assert_eq!(quota.to_free(usage(950)), 0);
        assert_eq!(quota.to_free(usage(960)), 60);
        assert_eq!(Quota::default().to_free(usage(1 << 40)), 0, "no limit");
        let tight = Quota { max_size: None, min_free: MinFree::Share(500), max_object_size: Some(10) };
        assert!(!tight.admits(11) && tight.admits(10));
        assert_eq!(tight.to_free(Usage { bytes: 0, free: 40, total: 1000 }), 15, "5 % and a tenth more");
        assert!(quota.admits(100) && !quota.admits(101), "a tenth of the quota by default");
        let set = Quota { max_object_size: Some(600), ..quota };
        assert!(set.admits(600) && !set.admits(601), "as configured");
        let over = Quota { max_object_size: Some(5000), ..quota };
        assert!(over.admits(1000) && !over.admits(1001), "never more than the quota");
        assert!(Quota::default().admits(u64::MAX), "no quota, no limit");
    }

    #[test]
    fn keys_are_picked_until_enough_is_freed_and_a_shared_blob_counts_when_its_last_key_goes() {
        // In order of use: old, by-name (shares a blob with by-hash), new, by-hash.
        let offered = [("old", "o", 1), ("by-name", "shared", 2), ("new", "n", 1), ("by-hash", "shared", 2)];
        let pick = |to_free| {
            let mut picker = Picker::new(to_free);
            for (key, sha256, holders) in offered {
                picker.offer(key, sha256, 100, holders);
            }
            picker.chosen()
        };
        assert_eq!(pick(100), ["old"]);
        assert_eq!(pick(150), ["old", "by-name", "new"], "by-name alone frees nothing");
        assert_eq!(pick(0), Vec::<String>::new());
        assert_eq!(pick(10_000).len(), 4);
        let mut twice = Picker::new(250);
        twice.offer("superseded", "s", 100, 1);
        twice.offer("old", "o", 100, 1);
        twice.offer("superseded", "s", 100, 1);
        assert!(!twice.is_done(), "a key offered again counts once");
        assert_eq!(twice.chosen(), ["superseded", "old"]);
        let mut few = Picker::new(1_000).at_most(2);
        for key in ["a", "b", "c"] {
            few.offer(key, key, 1, 1);
        }
        assert_eq!(few.chosen(), ["a", "b"], "the rest in a later round");
    }
}
