//! Who fetches a key for the cluster: a lease object taken with a
//! conditional create, renewed by compare-and-swap while the fetch runs,
//! and taken over the same way once its holder stopped renewing it (a
//! node that died). A lease only saves fetches: bodies are verified and
//! named by their hash whoever fetched them, so losing one costs at most a
//! duplicate fetch, never a wrong byte.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::tier::SharedTier;

/// What a lease object says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// The node fetching the key.
    pub node: String,
    /// Where the others stream the body from while it arrives.
    pub peer_url: Option<String>,
    /// Until when it holds the lease unless it renews it (milliseconds
    /// since the Unix epoch).
    pub expires_ms: u64,
}

impl LeaseRecord {
    /// Whether its holder stopped renewing it.
    pub fn expired(&self) -> bool {
        self.expires_ms <= now_ms()
    }

    /// How long until it expires.
    pub fn left(&self) -> Duration {
        Duration::from_millis(self.expires_ms.saturating_sub(now_ms()))
    }
}

/// How taking a key's lease went.
#[derive(Debug)]
pub enum Taken {
    /// This node fetches it; the lease is renewed while the guard lives.
    Held(LeaseGuard),
    /// Another node does.
    HeldBy(LeaseRecord),
    /// The store did not answer: the node fetches on its own.
    Unavailable,
}

/// Renews a held lease until dropped.
#[derive(Debug)]
pub struct LeaseGuard {
    renewing: tokio::task::JoinHandle<()>,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.renewing.abort();
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn record(tier: &SharedTier) -> LeaseRecord {
    let identity = tier.identity();
    LeaseRecord {
        node: identity.node.clone(),
        peer_url: identity.peer_url.clone(),
        expires_ms: now_ms() + identity.lease_ttl.as_millis() as u64,
    }
}

fn payload(record: &LeaseRecord) -> PutPayload {
    PutPayload::from(Bytes::from(serde_json::to_vec(record).expect("a lease serialises")))
}

/// Takes the lease of `key` for this node, or says who holds it.
pub async fn take(tier: &Arc<SharedTier>, key: &str) -> Taken {
    let path = tier.layout().lease(key);
    // Twice: a lease that vanishes between the create and the read (its
    // holder released it) is created again.
    for _ in 0..2 {
        let create = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        match tier.store().put_opts(&path, payload(&record(tier)), create).await {
            Ok(written) => return Taken::Held(LeaseGuard::renew(tier, path, written.into())),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {}
            Err(error) => {
                tracing::debug!(%error, key, "lease not taken");
                let _ = tier.outcome::<()>(Err(crate::ClusterError::store(format!("take {path}"), error)));
                return Taken::Unavailable;
            }
        }
        let (held, version) = match read(tier, &path).await {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(()) => return Taken::Unavailable,
        };
        if !held.expired() {
            return Taken::HeldBy(held);
        }
        // Its holder stopped renewing it: taken over, by one node only.
        let taken = swap(tier, path, version).await;
        if let Taken::Held(_) = taken {
            tracing::info!(key, from = held.node, "took over the fetch of a node that stopped renewing its lease");
        }
        return taken;
    }
    Taken::Unavailable
}

/// Who holds `key`'s lease, without taking it (a node that cannot fetch
/// from its upstreams only looks): `None` when nobody does, or the store
/// does not say.
pub async fn holder(tier: &SharedTier, key: &str) -> Option<LeaseRecord> {
    match read(tier, &tier.layout().lease(key)).await {
        Ok(Some((held, _))) if !held.expired() => Some(held),
        _ => None,
    }
}

/// Takes `key`'s lease from `holder`, who answered that it is not fetching
/// the key (its fetch failed): its lease would otherwise keep the others
/// waiting until it lapses. Only that holder's lease is taken.
pub async fn take_from(tier: &Arc<SharedTier>, key: &str, holder: &LeaseRecord) -> Taken {
    let path = tier.layout().lease(key);
    let (held, version) = match read(tier, &path).await {
        Ok(Some(found)) => found,
        Ok(None) => return take(tier, key).await,
        Err(()) => return Taken::Unavailable,
    };
    if held.node != holder.node {
        return Taken::HeldBy(held);
    }
    swap(tier, path, version).await
}

/// Writes this node's lease over the one at `path`, if it is still the
/// version read; the node that won instead, when another did.
async fn swap(tier: &Arc<SharedTier>, path: Path, version: UpdateVersion) -> Taken {
    let update = PutOptions { mode: PutMode::Update(version), ..PutOptions::default() };
    match tier.store().put_opts(&path, payload(&record(tier)), update).await {
        Ok(written) => Taken::Held(LeaseGuard::renew(tier, path, written.into())),
        Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => {
            match read(tier, &path).await {
                Ok(Some((winner, _))) => Taken::HeldBy(winner),
                _ => Taken::Unavailable,
            }
        }
        Err(_) => Taken::Unavailable,
    }
}

/// The lease at `path` and its version, if there is one.
async fn read(tier: &SharedTier, path: &Path) -> Result<Option<(LeaseRecord, UpdateVersion)>, ()> {
    let found = match tier.store().get_opts(path, GetOptions::default()).await {
        Ok(found) => found,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(_) => return Err(()),
    };
    let version = UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
    let bytes = found.bytes().await.map_err(|_| ())?;
    // An unreadable lease is treated as expired: it is taken over.
    let record =
        serde_json::from_slice(&bytes).unwrap_or(LeaseRecord { node: String::new(), peer_url: None, expires_ms: 0 });
    Ok(Some((record, version)))
}

impl LeaseGuard {
    /// Renews the lease at `path`, written as `version`, every third of its
    /// lifetime, until dropped or until another node took it over.
    fn renew(tier: &Arc<SharedTier>, path: Path, version: UpdateVersion) -> LeaseGuard {
        let tier = Arc::clone(tier);
        let renewing = tokio::spawn(async move {
            let mut version = version;
            loop {
                tokio::time::sleep(tier.identity().lease_ttl / 3).await;
                let update = PutOptions { mode: PutMode::Update(version.clone()), ..PutOptions::default() };
                match tier.store().put_opts(&path, payload(&record(&tier)), update).await {
                    Ok(written) => version = written.into(),
                    Err(object_store::Error::Precondition { .. }) => {
                        tracing::warn!(%path, "lost a lease while fetching: another node took it over");
                        return;
                    }
                    Err(error) => tracing::debug!(%path, %error, "lease not renewed; tried again"),
                }
            }
        });
        LeaseGuard { renewing }
    }
}

/// Gives up this node's lease of `key` once the body is published: the
/// others find the index object from then on.
pub async fn release(tier: &SharedTier, key: &str) {
    let path = tier.layout().lease(key);
    if let Ok(Some((held, _))) = read(tier, &path).await {
        if held.node == tier.identity().node {
            let _ = tier.store().delete(&path).await;
        }
    }
}
