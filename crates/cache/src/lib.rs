//! pkgproxy's cache: one persistent store for every side.
//!
//! Owns the blob store (bodies named by SHA-256), the crash-safe index (cache
//! key → entry, in redb), the freshness rule, and shared fetches (one
//! upstream request per key, streamed to every waiter). It opens no sockets:
//! what to send upstream is the caller's business, handed in as a future.

#![forbid(unsafe_code)]

mod blobs;
mod clock;
mod entry;
mod error;
pub mod evict;
pub mod fetch;
pub mod freshness;
mod holder;
mod index;
mod open_files;
pub mod recency;
pub mod scrub;
mod store;

use std::path::Path;
use std::sync::Arc;

pub use blobs::BodyHashes;
pub use clock::{Clock, ManualClock, SystemClock};
pub use entry::{unix_secs, Class, Entry, Validators, NANOS_PER_SEC};
pub use error::{FetchError, StoreError};
pub use evict::{MinFree, NothingObsolete, Obsolete, Quota, Usage};
pub use fetch::{
    BodyReader, Committed, Expected, Fetch, FetchBody, FetchSpec, Head, Joined, PassedAnswer, Phase, Source, Sourced,
    StartFetch, StreamingCheck, UpstreamBody, Verifier,
};
pub use freshness::{freshness, ClientDirectives, Freshness, Window};
pub use store::{Evicted, Record, Store, Use};

/// The cache as the server uses it: lookups, bodies and shared fetches.
#[derive(Debug, Clone)]
pub struct Cache {
    store: Arc<Store>,
    fetches: Arc<fetch::Fetches>,
    /// How far the scrub in progress is.
    scrubbing: Arc<scrub::Progress>,
}

impl Cache {
    /// Opens the cache under `dir`, deleting the partial downloads a crash
    /// may have left; entries are dated by `clock`.
    pub fn open(dir: &Path, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        let store = Arc::new(Store::open(dir, clock)?);
        let fetches = fetch::Fetches::new(Arc::clone(&store));
        Ok(Cache { store, fetches, scrubbing: Arc::default() })
    }

    /// The wall clock entries are dated by (injected: tests move it).
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.store.shared_clock()
    }

    /// The entry for `key`, if any (from memory when asked for lately).
    pub fn lookup(&self, key: &str) -> Option<Arc<Entry>> {
        self.store.lookup(key)
    }

    /// The body of a cached entry, to be read with positioned reads (the
    /// handle may be shared with other readers).
    pub fn open_body(&self, entry: &Entry) -> std::io::Result<Arc<std::fs::File>> {
        self.store.open_body(entry)
    }

    /// Tells `hook` of every body a fetch commits from now on (a cluster
    /// publishes them); `false` when a hook was set already.
    pub fn on_commit(&self, hook: Arc<dyn Committed>) -> bool {
        self.fetches.on_commit(hook)
    }

    /// Joins or starts the shared fetch for `spec.key`, from one request
    /// that cannot resume.
    pub fn fetch(&self, spec: FetchSpec, start: impl FnOnce() -> StartFetch) -> Joined {
        self.fetches.join(spec, || fetch::once(start()))
    }

    /// Joins or starts the shared fetch for `spec.key`, from the source
    /// `make` returns (called only when the fetch starts).
    pub fn fetch_from(&self, spec: FetchSpec, make: impl FnOnce() -> Box<dyn Source>) -> Joined {
        self.fetches.join(spec, make)
    }

    /// Waits until the bodies clients were served whole are committed: a
    /// client is answered once its body is checked, and the commit (the
    /// disk's flushes) follows within milliseconds. Free while none is
    /// pending.
    pub async fn settled(&self) {
        self.fetches.settled().await;
    }

    /// Waits until `key`'s body, if one was served whole, is committed;
    /// `true` if it waited.
    pub async fn settled_on(&self, key: &str) -> bool {
        self.fetches.settled_on(key).await
    }

    /// Makes `key` an entry for bytes the store already holds under their
    /// SHA-256 (fetched under another name), if it holds them with this
    /// size. Blocking.
    pub fn adopt(&self, key: &str, sha256: &str, size: u64, class: Class) -> Result<Option<Arc<Entry>>, StoreError> {
        self.store.adopt(key, sha256, size, class)
    }

    /// When eviction removed `key`'s entry (Unix seconds), if it did and
    /// nothing was cached under it since (the last many evictions only).
    pub fn evicted_at(&self, key: &str) -> Option<u64> {
        self.store.evicted_at(key)
    }

    /// Whether the store holds bytes with `sha256` and `size` (what
    /// [`Cache::adopt`] would take), without adopting them.
    pub fn holds(&self, sha256: &str, size: u64) -> bool {
        self.store.holds(sha256, size)
    }

    /// Stores `body` as the entry for `key` (see [`Store::put`]). Blocking.
    pub fn put(
        &self,
        key: &str,
        body: &[u8],
        headers: Vec<(String, String)>,
        class: Class,
    ) -> Result<Arc<Entry>, StoreError> {
        self.store.put(key, body, headers, class)
    }

    /// Makes `key` an entry for what `from` holds, confirmed now (see
    /// [`Store::link`]). Blocking.
    pub fn link(&self, key: &str, from: &str, class: Class) -> Result<Option<Arc<Entry>>, StoreError> {
        self.store.link(key, from, class)
    }

    /// Stores every one of `records` in one commit (see [`Store::put_all`]).
    /// Blocking.
    pub fn put_all(&self, records: Vec<Record>) -> Result<(), StoreError> {
        self.store.put_all(records)
    }

    /// Records a fact under each of `keys`: an empty body with `headers`,
    /// in one commit (see [`Store::mark`]). Blocking.
    pub fn mark(&self, keys: &[String], headers: Vec<(String, String)>, class: Class) -> Result<(), StoreError> {
        self.store.mark(keys, headers, class)
    }

    /// The newest entry of `key`: one whose body is whole and checked but
    /// whose commit is under way, before the entry it replaces.
    pub fn newest_entry(&self, key: &str) -> Option<Arc<Entry>> {
        match self.fetches.whole(key) {
            Some((entry, _)) => Some(entry),
            None => self.lookup(key),
        }
    }

    /// The whole body cached under `key`, when there is one of at most
    /// `limit` bytes (a side reading back a small record): the newest, so
    /// one served whole whose commit is still under way before the entry
    /// it replaces (a client asking right after another was served a
    /// revalidated body reads that body). Blocking.
    pub fn read_small(&self, key: &str, limit: u64) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let (entry, file) = match self.fetches.whole(key) {
            Some(whole) => whole,
            None => {
                let entry = self.lookup(key)?;
                let file = self.open_body(&entry).ok()?;
                (entry, file)
            }
        };
        if entry.size > limit {
            return None;
        }
        let mut body = vec![0; usize::try_from(entry.size).ok()?];
        file.read_exact_at(&mut body, 0).ok()?;
        Some(body)
    }

    /// A client was just served `key`'s entry (remembered in memory).
    pub fn touch(&self, key: &str) {
        self.store.touch(key);
    }

    /// A client was just served `key`'s entry from the cache: a use and a
    /// hit (remembered in memory, written with the uses).
    pub fn hit(&self, key: &str) {
        self.store.hit(key);
    }

    /// Writes the uses remembered so far into the index. Blocking.
    pub fn persist_recency(&self) -> Result<usize, StoreError> {
        self.store.persist_recency()
    }

    /// Keeps to `quota`: a body it does not admit is passed through, not
    /// cached.
    pub fn set_quota(&self, quota: Quota) {
        self.store.set_quota(quota);
    }

    /// The limits the cache keeps to now.
    pub fn quota(&self) -> Quota {
        self.store.quota()
    }

    /// Where the cache stands against a quota.
    pub fn usage(&self) -> Usage {
        self.store.usage()
    }

    /// Evicts the least recently used entries until within `quota`;
    /// `obsolete` says which entries can never be served again: they go
    /// first. Blocking.
    pub fn evict(&self, quota: &Quota, obsolete: &dyn Obsolete) -> Result<Evicted, StoreError> {
        self.store.evict(quota, obsolete)
    }

    /// Evicts now down to `quota`'s low-water mark. Blocking.
    pub fn collect(&self, quota: &Quota, obsolete: &dyn Obsolete) -> Result<Evicted, StoreError> {
        self.store.collect(quota, obsolete)
    }

    /// Reads every blob back and repairs what is wrong (see [`scrub`]).
    /// Blocking, and long.
    pub fn scrub(&self) -> Result<scrub::Scrubbed, StoreError> {
        self.store.scrub(scrub::PACE, scrub::LEFT_OVER_AFTER, &self.scrubbing)
    }

    /// How far the scrub in progress is; `None` when none is running.
    pub fn scrub_reached(&self) -> Option<scrub::Reached> {
        self.scrubbing.reached()
    }

    /// Calls `visit` with every entry whose key starts with `prefix`, and
    /// its place in the order of use ([`Entry::use_order`]: nanoseconds
    /// since the Unix epoch). Blocking: it reads the index file.
    pub fn visit(&self, prefix: &str, visit: impl FnMut(&str, &Entry, u64)) -> Result<(), StoreError> {
        self.store.visit(prefix, visit)
    }

    /// Calls `visit` with every entry whose key starts with `prefix`, and
    /// how it was used: when last, and how many hits it served. Blocking:
    /// it reads the index file, never a body.
    pub fn visit_used(&self, prefix: &str, visit: impl FnMut(&str, &Entry, Use)) -> Result<(), StoreError> {
        self.store.visit_used(prefix, visit)
    }

    /// Removes every one of `keys`. Blocking.
    pub fn remove_all(&self, keys: &[String]) -> Result<Evicted, StoreError> {
        self.store.remove_all(keys)
    }

    /// Number of entries and bytes of bodies.
    pub fn totals(&self) -> (usize, u64) {
        self.store.totals()
    }

    /// The fetch of `key` in progress, if any (none is started).
    pub fn fetch_in_progress(&self, key: &str) -> Option<Arc<Fetch>> {
        self.fetches.get(key)
    }

    /// Fetches in progress.
    pub fn fetches_in_progress(&self) -> usize {
        self.fetches.in_progress()
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        self.store.dir()
    }
}
