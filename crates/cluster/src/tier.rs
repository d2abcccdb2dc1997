//! The bucket as a tier of the cache: index objects and blobs read and
//! written, and whether the bucket answers at all.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::TryStreamExt;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use pkgproxy_cache::{Class, Entry, Expected, Sourced, UpstreamBody};
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;
use crate::layout::Layout;
use crate::small::{self, Small, SmallError};

/// What an index object holds: the entry a node committed under `key`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SharedEntry {
    /// The cache key (the object's name is its hash: this guards against a
    /// collision and lets a sweep list keys).
    pub key: String,
    /// The entry as the publishing node committed it.
    pub entry: Entry,
    /// The node that published it.
    pub node: String,
}

/// How the tier has been used since the start.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TierCounters {
    /// Fetches answered from the bucket.
    pub shared_hits: u64,
    /// Bodies published.
    pub published: u64,
    /// Bodies read from the bucket that did not match their hash.
    pub corrupt: u64,
    /// Operations the bucket failed.
    pub errors: u64,
}

/// How long misses leave a failing store alone before one asks it again.
pub const REST: std::time::Duration = std::time::Duration::from_secs(5);

/// How the names fetches answered within the cluster give as their
/// upstream begin (`cluster store`, `cluster peer NODE`).
pub const CLUSTER_ANSWERS: &str = "cluster ";

/// The name fetches answered from the bucket give as their upstream.
pub const ANSWERED_BY: &str = "cluster store";

/// The bucket, as every part of a node uses it.
#[derive(Debug)]
pub struct SharedTier {
    store: Arc<dyn ObjectStore>,
    layout: Layout,
    identity: crate::Identity,
    /// Asks other nodes for the bodies they are fetching (through the one
    /// way out, each on its own address).
    peers: pkgproxy_upstream::peer::PeerClient,

    degraded: AtomicBool,
    /// When the store last failed: misses leave it alone for [`REST`]
    /// after, rather than each waiting for it to fail again.
    failed_at: parking_lot::Mutex<Option<std::time::Instant>>,
    shared_hits: AtomicU64,
    published: AtomicU64,
    corrupt: AtomicU64,
    errors: AtomicU64,
}

impl SharedTier {
    /// The tier in `store` under `prefix`, for the node `identity` names,
    /// asking its peers through `peers`.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        identity: crate::Identity,
        peers: pkgproxy_upstream::peer::PeerClient,
    ) -> Arc<Self> {
        Arc::new(SharedTier {
            store,
            layout: Layout::new(prefix),
            identity,
            peers,

            degraded: AtomicBool::new(false),
            failed_at: parking_lot::Mutex::new(None),
            shared_hits: AtomicU64::new(0),
            published: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    /// Whether the bucket failed its last operation: the node works alone
    /// (hits and misses served locally, nothing shared) until it answers.
    pub fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// Whether a miss should ask the store: not while it rests after a
    /// failure (one miss asks again once the rest is over).
    pub fn worth_asking(&self) -> bool {
        let mut failed_at = self.failed_at.lock();
        match *failed_at {
            Some(at) if at.elapsed() < REST => false,
            Some(_) => {
                // This miss asks; the others rest until it is answered.
                *failed_at = Some(std::time::Instant::now());
                true
            }
            None => true,
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> TierCounters {
        TierCounters {
            shared_hits: self.shared_hits.load(Ordering::Relaxed),
            published: self.published.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub(crate) fn node(&self) -> &str {
        &self.identity.node
    }

    /// Who this node is to the others.
    pub fn identity(&self) -> &crate::Identity {
        &self.identity
    }

    pub(crate) fn peers(&self) -> &pkgproxy_upstream::peer::PeerClient {
        &self.peers
    }

    /// Records how an operation went: a failure degrades the node, a
    /// success ends that.
    pub(crate) fn outcome<T>(&self, result: Result<T, ClusterError>) -> Result<T, ClusterError> {
        match &result {
            Ok(_) => {
                *self.failed_at.lock() = None;
                if self.degraded.swap(false, Ordering::Relaxed) {
                    tracing::info!("the cluster store answers again");
                }
            }
            Err(error) => {
                *self.failed_at.lock() = Some(std::time::Instant::now());
                self.errors.fetch_add(1, Ordering::Relaxed);
                if !self.degraded.swap(true, Ordering::Relaxed) {
                    tracing::warn!(%error, "the cluster store failed: this node works alone until it answers");
                }
            }
        }
        result
    }

    pub(crate) fn count_published(&self) {
        self.published.fetch_add(1, Ordering::Relaxed);
    }

    /// The entry published under `key`, if any.
    pub async fn lookup(&self, key: &str) -> Result<Option<SharedEntry>, ClusterError> {
        Ok(self.lookup_versioned(key).await?.map(|(shared, _)| shared))
    }

    /// The entry published under `key`, if any, with the version of its
    /// index object (what a compare-and-swap replaces).
    pub(crate) async fn lookup_versioned(
        &self,
        key: &str,
    ) -> Result<Option<(SharedEntry, UpdateVersion)>, ClusterError> {
        let path = self.layout.index(key);
        let read = async {
            let found = self.store.get_opts(&path, GetOptions::default()).await?;
            let version = UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
            Ok::<_, SmallError>((small::read(found, Small::Index).await?, version))
        };
        let (bytes, version) = match read.await {
            Ok(read) => read,
            Err(SmallError::Store(object_store::Error::NotFound { .. })) => return self.outcome(Ok(None)),
            Err(SmallError::Store(error)) => {
                return self.outcome(Err(ClusterError::store(format!("read {path}"), error)))
            }
            Err(error @ SmallError::Oversized { .. }) => {
                self.outcome(Ok(()))?;
                return Err(ClusterError::Malformed { what: path.to_string(), reason: error.to_string() });
            }
        };
        self.outcome(Ok(()))?;
        let shared: SharedEntry = serde_json::from_slice(&bytes)
            .map_err(|error| ClusterError::Malformed { what: path.to_string(), reason: error.to_string() })?;
        Ok((shared.key == key).then_some((shared, version)))
    }

    /// The body of `entry` from byte `from` on, as an upstream answer: a
    /// `200` (a `206` from a later byte) whose extensions say what it must
    /// hash to. `None`: the bucket does not hold it.
    pub async fn answer(&self, entry: &Entry, from: u64) -> Result<Option<Sourced>, ClusterError> {
        let path = self.layout.blob(&entry.sha256);
        let options = GetOptions { range: (from > 0).then_some(GetRange::Offset(from)), ..GetOptions::default() };
        let found = match self.store.get_opts(&path, options).await {
            Ok(found) => found,
            Err(object_store::Error::NotFound { .. }) => return self.outcome(Ok(None)),
            Err(error) => return self.outcome(Err(ClusterError::store(format!("read {path}"), error))),
        };
        self.outcome(Ok(()))?;
        if found.meta.size != entry.size {
            // Another body under this name: never served, and gone.
            self.count_corrupt(&entry.sha256).await;
            return Ok(None);
        }
        let stream = found.into_stream().map_ok(http_body::Frame::data).map_err(|error| error.into());
        let body: UpstreamBody = http_body_util::StreamBody::new(sync_wrapper::SyncStream::new(stream)).boxed();
        let mut answer = Response::new(body);
        *answer.status_mut() = if from > 0 { StatusCode::PARTIAL_CONTENT } else { StatusCode::OK };
        let headers = answer.headers_mut();
        for (name, value) in &entry.headers {
            if let (Ok(name), Ok(value)) = (header::HeaderName::try_from(name), HeaderValue::try_from(value)) {
                headers.append(name, value);
            }
        }
        let validators =
            [(header::ETAG, &entry.validators.etag), (header::LAST_MODIFIED, &entry.validators.last_modified)];
        for (name, value) in validators {
            if let Some(value) = value.as_deref().and_then(|v| HeaderValue::try_from(v).ok()) {
                headers.insert(name, value);
            }
        }
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(entry.size - from));
        if from > 0 {
            let range = format!("bytes {from}-{}/{}", entry.size - 1, entry.size);
            headers.insert(header::CONTENT_RANGE, HeaderValue::try_from(range).expect("digits are a valid value"));
        }
        self.shared_hits.fetch_add(1, Ordering::Relaxed);
        Ok(Some(Sourced {
            response: answer,
            answered_by: Some(ANSWERED_BY.into()),
            // What changes under its name is as old here as where it was
            // fetched.
            fetched_at: (entry.class == Class::Revalidated).then_some(entry.fetched_at),
            expected: Some(Expected { size: Some(entry.size), sha256: Some(entry.sha256.clone()), sha512: None }),
        }))
    }

    /// A body read from the bucket did not hash to its name: it is removed,
    /// so the next miss fetches from upstream, and counted.
    pub async fn count_corrupt(&self, sha256: &str) {
        self.corrupt.fetch_add(1, Ordering::Relaxed);
        let path = self.layout.blob(sha256);
        tracing::warn!(%path, "a body in the cluster store does not match its hash: removed");
        if let Err(error) = self.store.delete(&path).await {
            tracing::warn!(%path, %error, "the damaged body could not be removed");
        }
    }

    /// Writes `bytes` to `path` unless something is there already; `false`
    /// when it was.
    pub(crate) async fn create(&self, path: &object_store::path::Path, bytes: Bytes) -> Result<bool, ClusterError> {
        let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        match self.store.put_opts(path, PutPayload::from_bytes(bytes), options).await {
            Ok(_) => self.outcome(Ok(true)),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => Ok(false),
            Err(error) => self.outcome(Err(ClusterError::store(format!("write {path}"), error))),
        }
    }

    /// Writes `bytes` to `path` if the object there is still `version`
    /// (if there is none, for `None`); `false` when another writer came
    /// first.
    pub(crate) async fn swap(
        &self,
        path: &object_store::path::Path,
        version: Option<UpdateVersion>,
        bytes: Bytes,
    ) -> Result<bool, ClusterError> {
        let mode = version.map_or(PutMode::Create, PutMode::Update);
        let options = PutOptions { mode, ..PutOptions::default() };
        match self.store.put_opts(path, PutPayload::from_bytes(bytes), options).await {
            Ok(_) => self.outcome(Ok(true)),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => Ok(false),
            Err(error) => self.outcome(Err(ClusterError::store(format!("write {path}"), error))),
        }
    }
}
