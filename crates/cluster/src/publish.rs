//! Publishing what a node fetched: the committed, verified local file goes
//! to the bucket, then the index object that names it.

use parking_lot::Mutex;
use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use bytes::Bytes;
use object_store::{ObjectStoreExt, WriteMultipart};
use pkgproxy_cache::{Class, Committed, Entry};
use tokio::sync::Semaphore;

use crate::error::ClusterError;
use crate::tier::{SharedEntry, SharedTier, CLUSTER_ANSWERS};

/// Bodies up to this size go up in one `PUT`; larger ones in parts.
const SINGLE_PUT_LIMIT: u64 = 64 * 1024 * 1024;

/// The size of an upload's parts.
const PART_SIZE: usize = 8 * 1024 * 1024;

/// Uploads at once: publishing never takes the bandwidth clients need.
const UPLOADS: usize = 4;

/// Keys remembered for publishing later, at most: beyond, a key is
/// published when another node fetches it again.
const PENDING_LIMIT: usize = 100_000;

/// Publishes every body this node commits from an upstream. What could not
/// be published (the store was down, or not connected yet) is remembered,
/// and published when a client next asks for it.
#[derive(Debug)]
pub struct Publisher {
    tier: ArcSwapOption<SharedTier>,
    uploads: Arc<Semaphore>,
    pending: Mutex<HashSet<String>>,
    /// How many keys wait, readable without the lock: every hit asks.
    waiting: AtomicUsize,
}

impl Publisher {
    /// A publisher that remembers what it is given until it is connected.
    pub fn new() -> Arc<Self> {
        Arc::new(Publisher {
            tier: ArcSwapOption::empty(),
            uploads: Arc::new(Semaphore::new(UPLOADS)),
            pending: Mutex::new(HashSet::new()),
            waiting: AtomicUsize::new(0),
        })
    }

    /// Publishes into `tier` from now on.
    pub fn connect(&self, tier: Arc<SharedTier>) {
        self.tier.store(Some(tier));
    }

    /// How many keys wait to be published.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// A client was served `key` from this node's cache: if it waits to be
    /// published, it is now (`open` gives its body).
    pub fn accessed(self: &Arc<Self>, key: &str, entry: &Entry, open: impl FnOnce() -> std::io::Result<Arc<File>>) {
        if self.waiting() == 0 || self.tier.load().as_ref().is_none_or(|tier| !tier.worth_asking()) {
            return;
        }
        let removed = self.pending.lock().remove(key);
        if !removed {
            return;
        }
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        if let Ok(body) = open() {
            self.spawn_publish(key.to_owned(), Arc::new(entry.clone()), body);
        }
    }

    fn remember(&self, key: String) {
        let mut pending = self.pending.lock();
        if pending.len() < PENDING_LIMIT && pending.insert(key) {
            self.waiting.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn spawn_publish(self: &Arc<Self>, key: String, entry: Arc<Entry>, body: Arc<File>) {
        let publisher = Arc::clone(self);
        tokio::spawn(async move {
            let Ok(_slot) = Arc::clone(&publisher.uploads).acquire_owned().await else { return };
            let Some(tier) = publisher.tier.load_full() else { return publisher.remember(key) };
            if let Err(error) = publish(&tier, &key, &entry, body).await {
                tracing::warn!(key, %error, "not published to the cluster store yet: it will be when next asked for");
                publisher.remember(key);
            }
        });
    }
}

/// Publishes `entry`, committed locally under `key`, whose body `body`
/// holds: the blob first (unless the bucket has it), then the index object.
/// What never changes under its name has its index object written once;
/// what does is replaced by compare-and-swap, and only by a newer fetch.
async fn publish(tier: &SharedTier, key: &str, entry: &Entry, body: Arc<File>) -> Result<(), ClusterError> {
    let blob = tier.layout().blob(&entry.sha256);
    let held = match tier.store().head(&blob).await {
        Ok(meta) => meta.size == entry.size,
        Err(object_store::Error::NotFound { .. }) => false,
        Err(error) => return tier.outcome(Err(ClusterError::store(format!("look for {blob}"), error))),
    };
    if !held {
        upload(tier, key, &blob, entry.size, body).await?;
    }
    let shared = SharedEntry { key: key.to_owned(), entry: entry.clone(), node: tier.node().to_owned() };
    let json = Bytes::from(serde_json::to_vec(&shared).expect("an entry serialises"));
    match entry.class {
        Class::Immutable => {
            tier.create(&tier.layout().index(key), json).await?;
            crate::lease::release(tier, key).await;
        }
        Class::Revalidated => replace_if_newer(tier, key, entry, json).await?,
    }
    tier.count_published();
    tracing::debug!(key, sha256 = entry.sha256, "published to the cluster store");
    Ok(())
}

/// Compare-and-swap rounds before a replacement gives way: every writer
/// that beat it wrote a fetch at least as new.
const SWAPS: usize = 4;

/// Replaces the index object of `key` with `json` (which publishes
/// `entry`), unless the one there is from a fetch as new or newer: two
/// nodes refreshing one `InRelease` never put the older answer over the
/// newer one.
async fn replace_if_newer(tier: &SharedTier, key: &str, entry: &Entry, json: Bytes) -> Result<(), ClusterError> {
    let path = tier.layout().index(key);
    for _ in 0..SWAPS {
        let version = match tier.lookup_versioned(key).await? {
            Some((held, _)) if held.entry.fetched_at >= entry.fetched_at => return Ok(()),
            Some((_, version)) => Some(version),
            None => None,
        };
        if tier.swap(&path, version, json.clone()).await? {
            return Ok(());
        }
    }
    Ok(())
}

/// Uploads the `size` bytes of `body` as `blob`.
async fn upload(
    tier: &SharedTier,
    key: &str,
    blob: &object_store::path::Path,
    size: u64,
    body: Arc<File>,
) -> Result<(), ClusterError> {
    let local = |source| ClusterError::Local { key: key.to_owned(), source };
    if size <= SINGLE_PUT_LIMIT {
        let bytes = read_at(body, 0, size as usize).await.map_err(local)?;
        tier.create(blob, bytes).await?;
        return Ok(());
    }
    // Parts are invisible until the upload completes: nothing partial is
    // ever read. Bodies are named by their hash, so a second writer of the
    // same name writes the same bytes.
    let upload = match tier.store().put_multipart(blob).await {
        Ok(upload) => upload,
        Err(error) => return tier.outcome(Err(ClusterError::store(format!("start uploading {blob}"), error))),
    };
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
    let mut offset = 0;
    while offset < size {
        let len = (size - offset).min(PART_SIZE as u64) as usize;
        let bytes = match read_at(Arc::clone(&body), offset, len).await {
            Ok(bytes) => bytes,
            Err(error) => {
                let _ = writer.abort().await;
                return Err(local(error));
            }
        };
        if let Err(error) = writer.wait_for_capacity(2).await {
            return tier.outcome(Err(ClusterError::store(format!("upload {blob}"), error)));
        }
        writer.put(bytes);
        offset += len as u64;
    }
    match writer.finish().await {
        Ok(_) => tier.outcome(Ok(())),
        Err(error) => tier.outcome(Err(ClusterError::store(format!("finish uploading {blob}"), error))),
    }
}

/// `len` bytes of `file` from `offset`, read on the blocking pool.
async fn read_at(file: Arc<File>, offset: u64, len: usize) -> std::io::Result<Bytes> {
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0; len];
        file.read_exact_at(&mut buf, offset)?;
        Ok(Bytes::from(buf))
    })
    .await
    .map_err(std::io::Error::other)?
}

impl Committed for Publisher {
    fn committed(self: Arc<Self>, key: &str, entry: &Arc<Entry>, body: Arc<File>, answered_by: Option<&str>) {
        // What came from the bucket is there already, and what came from a
        // peer is the peer's to publish.
        if answered_by.is_some_and(|by| by.starts_with(CLUSTER_ANSWERS)) {
            return;
        }
        self.spawn_publish(key.to_owned(), Arc::clone(entry), body);
    }
}
