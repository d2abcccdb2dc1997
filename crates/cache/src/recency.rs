//! Which entries clients used lately. A hit records its use here, in
//! memory (a lock on one of a few shards, no disk write: the hit path is
//! where pkgproxy outruns nginx), and the uses are written into the index
//! in batches ([`crate::Store::persist_recency`]). Eviction reads both, so
//! an entry used a moment ago is never taken for an old one.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

/// Locks the hits spread over.
const SHARDS: usize = 16;

/// Uses not yet written: key → when (seconds since the Unix epoch).
#[derive(Debug)]
pub struct Recency {
    shards: Vec<Mutex<HashMap<String, u64>>>,
    hasher: RandomState,
}

impl Default for Recency {
    fn default() -> Self {
        Recency { shards: (0..SHARDS).map(|_| Mutex::default()).collect(), hasher: RandomState::new() }
    }
}

impl Recency {
    fn shard(&self, key: &str) -> &Mutex<HashMap<String, u64>> {
        &self.shards[self.hasher.hash_one(key) as usize % SHARDS]
    }

    /// `key` was used at `now`.
    pub fn touch(&self, key: &str, now: u64) {
        let mut shard = self.shard(key).lock().unwrap_or_else(|p| p.into_inner());
        match shard.get_mut(key) {
            Some(at) => *at = (*at).max(now),
            None => {
                shard.insert(key.to_string(), now);
            }
        }
    }

    /// When `key` was last used, if that is not written yet.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.shard(key).lock().unwrap_or_else(|p| p.into_inner()).get(key).copied()
    }

    /// Every use not yet written, taken out to be written.
    pub fn drain(&self) -> Vec<(String, u64)> {
        let mut drained = Vec::new();
        for shard in &self.shards {
            drained.extend(std::mem::take(&mut *shard.lock().unwrap_or_else(|p| p.into_inner())));
        }
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_use_is_kept_until_drained() {
        let recency = Recency::default();
        recency.touch("a", 10);
        recency.touch("a", 5);
        recency.touch("b", 7);
        assert_eq!(recency.get("a"), Some(10));
        let mut drained = recency.drain();
        drained.sort();
        assert_eq!(drained, [("a".to_string(), 10), ("b".to_string(), 7)]);
        assert_eq!(recency.get("a"), None);
    }
}
