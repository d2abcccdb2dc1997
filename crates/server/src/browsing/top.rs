//! The top clients and the top cache keys of the last day, counted as
//! files are served, in bounded memory: a day is kept as hourly buckets,
//! each holding at most [`KEPT`] clients and keys (the "space saving"
//! count: a newcomer to a full bucket takes the place of its least
//! counted one, with that one's count, so whatever was served often is
//! never lost, and no map grows with the number of clients or keys).
//! Counts start again when pkgproxy does.

use parking_lot::Mutex;
use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;

/// How many clients and how many keys a bucket keeps.
const KEPT: usize = 64;

/// Seconds a bucket counts.
const BUCKET_SECS: u64 = 3_600;

/// Buckets in a day.
const BUCKETS: u64 = 24;

/// What was served lately, by whom.
#[derive(Debug, Default)]
pub struct Top {
    buckets: Mutex<VecDeque<Bucket>>,
}

/// One hour's counts.
#[derive(Debug)]
struct Bucket {
    /// Its hour (Unix seconds / [`BUCKET_SECS`]).
    hour: u64,
    clients: Counts<IpAddr>,
    keys: Counts<String>,
}

/// At most [`KEPT`] items and their counts.
#[derive(Debug)]
struct Counts<K> {
    counted: HashMap<K, u64>,
}

impl<K: Hash + Eq + Clone> Counts<K> {
    fn new() -> Self {
        Counts { counted: HashMap::with_capacity(KEPT) }
    }

    /// Counts `item` once; one counted already costs no allocation (this
    /// runs on every file served).
    fn add<Q>(&mut self, item: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(count) = self.counted.get_mut(item) {
            *count += 1;
            return;
        }
        let mut start = 0;
        if self.counted.len() >= KEPT {
            let least = self.counted.iter().min_by_key(|(_, count)| **count).map(|(k, c)| (k.clone(), *c));
            if let Some((least, count)) = least {
                self.counted.remove::<K>(&least);
                start = count;
            }
        }
        self.counted.insert(item.to_owned(), start + 1);
    }
}

impl Top {
    /// A file of `key` was served to `client` at `now` (Unix seconds);
    /// `key` is `None` for content only the client's credentials may
    /// read, which is never counted by name.
    pub fn served(&self, client: IpAddr, key: Option<&str>, now: u64) {
        let hour = now / BUCKET_SECS;
        let mut buckets = self.buckets.lock();
        if buckets.back().is_none_or(|last| last.hour < hour) {
            buckets.push_back(Bucket { hour, clients: Counts::new(), keys: Counts::new() });
            while buckets.front().is_some_and(|first| first.hour + BUCKETS <= hour) {
                buckets.pop_front();
            }
        }
        let Some(bucket) = buckets.back_mut() else { return };
        bucket.clients.add(&client);
        if let Some(key) = key {
            bucket.keys.add(key);
        }
    }

    /// The clients served the most over the day before `now`, most first.
    pub fn clients(&self, now: u64) -> Vec<(IpAddr, u64)> {
        self.summed(now, |bucket| bucket.clients.counted.iter().map(|(k, c)| (*k, *c)).collect())
    }

    /// The keys served the most over the day before `now`, most first.
    pub fn keys(&self, now: u64) -> Vec<(String, u64)> {
        self.summed(now, |bucket| bucket.keys.counted.iter().map(|(k, c)| (k.clone(), *c)).collect())
    }

    fn summed<K: Hash + Eq + Ord>(&self, now: u64, of: impl Fn(&Bucket) -> Vec<(K, u64)>) -> Vec<(K, u64)> {
        let hour = now / BUCKET_SECS;
        let buckets = self.buckets.lock();
        let mut summed: HashMap<K, u64> = HashMap::new();
        for bucket in buckets.iter().filter(|bucket| bucket.hour + BUCKETS > hour) {
            for (item, count) in of(bucket) {
                *summed.entry(item).or_default() += count;
            }
        }
        drop(buckets);
        let mut summed: Vec<_> = summed.into_iter().collect();
        summed.sort_by(|(a, one), (b, other)| other.cmp(one).then_with(|| a.cmp(b)));
        summed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn the_day_s_most_served_come_first_and_an_older_day_is_forgotten() {
        let top = Top::default();
        let start = 100 * DAY;
        for _ in 0..3 {
            top.served(ip(1), Some("npm/npm/tarball/a/a-1.0.0.tgz"), start);
        }
        top.served(ip(2), Some("npm/npm/tarball/b/b-1.0.0.tgz"), start + 7_200);
        top.served(ip(2), None, start + 7_200);
        assert_eq!(top.clients(start + 7_200), [(ip(1), 3), (ip(2), 2)]);
        let keys = top.keys(start + 7_200);
        assert_eq!(keys[0], ("npm/npm/tarball/a/a-1.0.0.tgz".to_string(), 3));
        assert_eq!(keys.len(), 2, "a private file is never counted by name: {keys:?}");
        assert_eq!(top.clients(start + DAY + 3_600), [(ip(2), 2)], "a day later, the first hour is gone");
        assert!(top.clients(start + 3 * DAY).is_empty());
    }

    #[test]
    fn a_bucket_keeps_a_bounded_number_of_clients_and_never_loses_a_frequent_one() {
        let top = Top::default();
        // More than a 64th of what is served is never lost.
        for _ in 0..500 {
            top.served(ip(1), Some("frequent"), 0);
        }
        for n in 0..10_000u32 {
            let [_, _, a, b] = n.to_be_bytes();
            top.served(IpAddr::from([10, 1, a, b]), Some(&format!("once-{n}")), 0);
        }
        let clients = top.clients(0);
        assert!(clients.len() <= KEPT, "{}", clients.len());
        assert_eq!(clients[0], (ip(1), 500));
        assert_eq!(top.keys(0)[0], ("frequent".to_string(), 500));
    }
}
