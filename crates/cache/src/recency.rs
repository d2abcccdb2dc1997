//! Which entries clients used lately. A hit records its use here, in
//! memory (a lock on one of a few shards, no disk write: the hit path is
//! where pkgproxy outruns nginx), and the uses are written into the index
//! in batches ([`crate::Store::persist_recency`]). Eviction reads both, so
//! an entry used a moment ago is never taken for an old one.
//!
//! A use is dated by a stamp ([`UseClock`]) finer than the second and
//! strictly increasing, so a burst of uses within one second (apt fetching
//! thirty packages, exactly when eviction runs) keeps its order.
//!
//! A hit is counted here too, beside its use: the count is added to the
//! entry's in the same batched write, so counting costs the hit path
//! nothing it did not pay already.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Locks the hits spread over.
const SHARDS: usize = 16;

/// Stamps uses: nanoseconds since the Unix epoch by the wall clock, each
/// stamp greater than every one before, so uses keep their order within a
/// second, within a nanosecond, under a clock that stands still (a test's)
/// or steps back.
#[derive(Debug, Default)]
pub struct UseClock {
    last: AtomicU64,
}

impl UseClock {
    /// The stamp of a use at `now`.
    pub fn stamp(&self, now: SystemTime) -> u64 {
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos().min(u128::from(u64::MAX)) as u64);
        let next = |last: u64| now.max(last.saturating_add(1));
        match self.last.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| Some(next(last))) {
            Ok(last) | Err(last) => next(last),
        }
    }

    /// Stamps from now on are later than `stamp` (the latest the index
    /// holds, at start).
    pub fn after(&self, stamp: u64) {
        self.last.fetch_max(stamp, Ordering::Relaxed);
    }
}

/// What is not yet written of a key's uses: when it was last used (a use
/// stamp), and how many hits it served since the last write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Used {
    /// The latest use stamp.
    pub at: u64,
    /// Hits served since the last write.
    pub hits: u64,
}

/// Uses not yet written: key → its latest use and the hits since.
#[derive(Debug)]
pub struct Recency {
    shards: Vec<Mutex<HashMap<String, Used>>>,
    hasher: RandomState,
    clock: UseClock,
}

impl Default for Recency {
    fn default() -> Self {
        Recency {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            clock: UseClock::default(),
        }
    }
}

impl Recency {
    fn shard(&self, key: &str) -> &Mutex<HashMap<String, Used>> {
        &self.shards[self.hasher.hash_one(key) as usize % SHARDS]
    }

    /// The clock that stamps the uses (also those a write records).
    pub fn clock(&self) -> &UseClock {
        &self.clock
    }

    /// `key` was used at `now` (served to a client that had it fetched).
    pub fn touch(&self, key: &str, now: SystemTime) {
        self.record(key, now, 0);
    }

    /// `key` was used at `now` as a hit: served from the cache.
    pub fn hit(&self, key: &str, now: SystemTime) {
        self.record(key, now, 1);
    }

    fn record(&self, key: &str, now: SystemTime, hits: u64) {
        let now = self.clock.stamp(now);
        let mut shard = self.shard(key).lock();
        match shard.get_mut(key) {
            Some(used) => {
                used.at = used.at.max(now);
                used.hits += hits;
            }
            None => {
                shard.insert(key.to_string(), Used { at: now, hits });
            }
        }
    }

    /// When `key` was last used, if that is not written yet.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.used(key).map(|used| used.at)
    }

    /// What is not written yet of `key`'s uses.
    pub fn used(&self, key: &str) -> Option<Used> {
        self.shard(key).lock().get(key).copied()
    }

    /// Every use not yet written, taken out to be written.
    pub fn drain(&self) -> Vec<(String, Used)> {
        let mut drained = Vec::new();
        for shard in &self.shards {
            drained.extend(std::mem::take(&mut *shard.lock()));
        }
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    const SECOND: u64 = 1_000_000_000;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn the_latest_use_is_kept_until_drained() {
        let recency = Recency::default();
        recency.touch("a", at(10));
        recency.touch("b", at(7));
        recency.touch("a", at(5));
        let (a, b) = (recency.get("a").unwrap(), recency.get("b").unwrap());
        assert!(a > b, "a was used last, though the clock stepped back");
        let mut drained = recency.drain();
        drained.sort_by(|one, other| one.0.cmp(&other.0));
        assert_eq!(drained, [("a".to_string(), Used { at: a, hits: 0 }), ("b".to_string(), Used { at: b, hits: 0 })]);
        assert_eq!(recency.get("a"), None);
    }

    #[test]
    fn hits_are_counted_beside_the_use_and_start_again_once_drained() {
        let recency = Recency::default();
        recency.hit("a", at(10));
        recency.touch("a", at(11));
        recency.hit("a", at(12));
        assert_eq!(recency.used("a").map(|used| used.hits), Some(2), "the fetch's own use is no hit");
        assert_eq!(recency.drain()[0].1.hits, 2);
        recency.hit("a", at(13));
        assert_eq!(recency.used("a").map(|used| used.hits), Some(1));
    }

    #[test]
    fn uses_within_one_second_or_one_instant_keep_their_order() {
        let clock = UseClock::default();
        let within: Vec<u64> = (0..5).map(|ms| clock.stamp(at(100) + Duration::from_millis(ms * 100))).collect();
        assert_eq!(within[0], 100 * SECOND, "the wall clock's nanoseconds");
        assert!(within.windows(2).all(|pair| pair[0] < pair[1]), "{within:?}");
        let still = at(100) + Duration::from_millis(450);
        let (first, second) = (clock.stamp(still), clock.stamp(still));
        assert!(within[4] < first && first < second, "a clock standing still: one apart");
        clock.after(200 * SECOND);
        assert!(clock.stamp(at(150)) > 200 * SECOND, "after the latest the index holds");
    }
}
