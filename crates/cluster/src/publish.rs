//! Publishing what a node fetched: the committed, verified local file goes
//! to the bucket, then the index object that names it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

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

/// Publishes every body this node commits from an upstream.
#[derive(Debug)]
pub struct Publisher {
    tier: Arc<SharedTier>,
    uploads: Arc<Semaphore>,
}

impl Publisher {
    /// Publishes into `tier`.
    pub fn new(tier: Arc<SharedTier>) -> Arc<Self> {
        Arc::new(Publisher { tier, uploads: Arc::new(Semaphore::new(UPLOADS)) })
    }

    /// Publishes `entry`, committed locally under `key`, whose body `body`
    /// holds: the blob first (unless the bucket has it), then the index
    /// object. An index object is written only once: the entries shared
    /// so far never change under their key.
    pub async fn publish(&self, key: &str, entry: &Entry, body: Arc<File>) -> Result<(), ClusterError> {
        let blob = self.tier.layout().blob(&entry.sha256);
        let store = self.tier.store();
        let held = match store.head(&blob).await {
            Ok(meta) => meta.size == entry.size,
            Err(object_store::Error::NotFound { .. }) => false,
            Err(error) => return self.tier.outcome(Err(ClusterError::store(format!("look for {blob}"), error))),
        };
        if !held {
            self.upload(key, &blob, entry.size, body).await?;
        }
        let shared = SharedEntry { key: key.to_owned(), entry: entry.clone(), node: self.tier.node().to_owned() };
        let json = serde_json::to_vec(&shared).expect("an entry serialises");
        self.tier.create(&self.tier.layout().index(key), Bytes::from(json)).await?;
        self.tier.count_published();
        crate::lease::release(&self.tier, key).await;
        tracing::debug!(key, sha256 = entry.sha256, "published to the cluster store");
        Ok(())
    }

    async fn upload(
        &self,
        key: &str,
        blob: &object_store::path::Path,
        size: u64,
        body: Arc<File>,
    ) -> Result<(), ClusterError> {
        let local = |source| ClusterError::Local { key: key.to_owned(), source };
        if size <= SINGLE_PUT_LIMIT {
            let bytes = read_at(body, 0, size as usize).await.map_err(local)?;
            self.tier.create(blob, bytes).await?;
            return Ok(());
        }
        // Parts are invisible until the upload completes: nothing partial
        // is ever read. Bodies are named by their hash, so a second writer
        // of the same name writes the same bytes.
        let store = self.tier.store();
        let upload = match store.put_multipart(blob).await {
            Ok(upload) => upload,
            Err(error) => return self.tier.outcome(Err(ClusterError::store(format!("start uploading {blob}"), error))),
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
                return self.tier.outcome(Err(ClusterError::store(format!("upload {blob}"), error)));
            }
            writer.put(bytes);
            offset += len as u64;
        }
        match writer.finish().await {
            Ok(_) => self.tier.outcome(Ok(())),
            Err(error) => self.tier.outcome(Err(ClusterError::store(format!("finish uploading {blob}"), error))),
        }
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
        // Only what never changes under its name is shared so far; what
        // came from the bucket is there already, and what came from a peer
        // is the peer's to publish.
        if entry.class != Class::Immutable || answered_by.is_some_and(|by| by.starts_with(CLUSTER_ANSWERS)) {
            return;
        }
        let (key, entry) = (key.to_owned(), Arc::clone(entry));
        tokio::spawn(async move {
            let Ok(_slot) = Arc::clone(&self.uploads).acquire_owned().await else { return };
            if let Err(error) = self.publish(&key, &entry, body).await {
                tracing::warn!(key, %error, "not published to the cluster store");
            }
        });
    }
}
