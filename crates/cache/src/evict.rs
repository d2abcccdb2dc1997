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

use std::collections::HashMap;

/// The limits the cache keeps to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// The most bytes of bodies kept (`None`: no limit).
    pub max_size: Option<u64>,
    /// The free space kept on the cache's file system.
    pub min_free: MinFree,
    /// The largest body cached (`None`: no limit but `max_size`).
    pub max_object_size: Option<u64>,
}

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

    /// Whether a body of `size` bytes may be cached at all: one larger
    /// than the quota, or than `max_object_size`, is passed through.
    pub fn admits(&self, size: u64) -> bool {
        self.max_size.is_none_or(|max| size <= max) && self.max_object_size.is_none_or(|max| size <= max)
    }
}

/// One entry, as eviction sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its key.
    pub key: String,
    /// When it was last used (or fetched).
    pub last_use: u64,
    /// Its blob.
    pub sha256: String,
    /// Its blob's size.
    pub size: u64,
    /// Whether it can never be served again.
    pub obsolete: bool,
}

/// The keys to remove to free `to_free` bytes, least recently used first;
/// a blob counts once its last key is removed. Fewer bytes when every
/// entry together holds fewer.
pub fn choose(mut candidates: Vec<Candidate>, to_free: u64) -> Vec<String> {
    if to_free == 0 {
        return Vec::new();
    }
    let mut holders: HashMap<&str, usize> = HashMap::new();
    for candidate in &candidates {
        *holders.entry(candidate.sha256.as_str()).or_default() += 1;
    }
    let mut holders: HashMap<String, usize> = holders.into_iter().map(|(sha, n)| (sha.to_string(), n)).collect();
    candidates
        .sort_by(|a, b| (!a.obsolete, a.last_use).cmp(&(!b.obsolete, b.last_use)).then_with(|| a.key.cmp(&b.key)));
    let (mut chosen, mut freed) = (Vec::new(), 0);
    for candidate in candidates {
        if freed >= to_free {
            break;
        }
        let left = holders.get_mut(&candidate.sha256).expect("counted above");
        *left -= 1;
        if *left == 0 {
            freed += candidate.size;
        }
        chosen.push(candidate.key);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(key: &str, last_use: u64, sha256: &str, size: u64) -> Candidate {
        Candidate { key: key.into(), last_use, sha256: sha256.into(), size, obsolete: false }
    }

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
        assert!(quota.admits(1000) && !quota.admits(1001));
    }

    #[test]
    fn the_least_recently_used_go_first_and_a_shared_blob_counts_when_its_last_key_goes() {
        let candidates = vec![
            candidate("new", 30, "n", 100),
            candidate("by-name", 10, "shared", 100),
            candidate("by-hash", 40, "shared", 100),
            candidate("old", 5, "o", 100),
        ];
        assert_eq!(choose(candidates.clone(), 100), ["old"]);
        assert_eq!(choose(candidates.clone(), 150), ["old", "by-name", "new"], "by-name alone frees nothing");
        assert_eq!(choose(candidates.clone(), 0), Vec::<String>::new());
        assert_eq!(choose(candidates.clone(), 10_000).len(), 4);
        let mut superseded = candidates;
        superseded[0].obsolete = true;
        assert_eq!(choose(superseded, 100), ["new"], "what can never be served again goes first");
    }
}
