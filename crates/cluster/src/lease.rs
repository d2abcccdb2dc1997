//! Who fetches a key for the cluster: a lease object taken with a
//! conditional create, renewed by compare-and-swap while the fetch runs,
//! and taken over the same way once its holder stopped renewing it (a
//! node that died). A lease only saves fetches: bodies are verified and
//! named by their hash whoever fetched them, so losing one costs at most a
//! duplicate fetch, never a wrong byte.
//!
//! A lease lives no longer than its holder keeps rewriting it, by the
//! reader's reckoning: at most twice the reader's `lease_ttl` after the
//! store last wrote it, whatever it claims (a holder whose clock runs
//! ahead, or a lease tampered with, keeps nobody waiting). A lease goes
//! when its fetch ends: at once when the upstream's answer is not a body
//! (a `404`, a failure), a lease's life later otherwise (what the fetch
//! stored is published meanwhile, and the others stream it from this node
//! until then), and by the hourly sweep when its node died first.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::small::{self, Small, SmallError};
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

/// Renews a held lease until dropped; then removes it, a lease's life
/// later, if it is still this node's.
#[derive(Debug)]
pub struct LeaseGuard {
    renewing: tokio::task::JoinHandle<()>,
    tier: Arc<SharedTier>,
    path: Path,
    /// The version last written: the lease is this node's while the store
    /// holds that version.
    version: Arc<parking_lot::Mutex<UpdateVersion>>,
    /// Given up already ([`LeaseGuard::release_now`]).
    released: bool,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.renewing.abort();
        if self.released {
            return;
        }
        let (tier, path, version) = (Arc::clone(&self.tier), self.path.clone(), Arc::clone(&self.version));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // Until then the others stream what this node stored from
                // it, or find it published.
                tokio::time::sleep(tier.identity().lease_ttl).await;
                let version = version.lock().clone();
                remove_if(&tier, &path, &version).await;
            });
        }
    }
}

impl LeaseGuard {
    /// Gives the lease up now: the fetch brought no body to share (the
    /// upstream answered a `404`, or failed), and the others need not wait
    /// for it.
    pub async fn release_now(mut self) {
        self.renewing.abort();
        self.released = true;
        let version = self.version.lock().clone();
        remove_if(&self.tier, &self.path, &version).await;
    }
}

/// Removes the lease at `path` if the store still holds `version` of it
/// (this node's last write: nobody took it over since).
async fn remove_if(tier: &SharedTier, path: &Path, version: &UpdateVersion) {
    let still_ours = match tier.store().head(path).await {
        Ok(meta) => meta.e_tag.is_some() && meta.e_tag == version.e_tag,
        Err(_) => false,
    };
    if still_ours {
        if let Err(error) = tier.store().delete(path).await {
            tracing::debug!(%path, %error, "a lease was not removed: the sweep will");
        }
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

/// The lease at `path` and its version, if there is one, its life bounded
/// by when the store last wrote it ([`bounded_life`]).
async fn read(tier: &SharedTier, path: &Path) -> Result<Option<(LeaseRecord, UpdateVersion)>, ()> {
    let found = match tier.store().get_opts(path, GetOptions::default()).await {
        Ok(found) => found,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(_) => return Err(()),
    };
    let version = UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
    let written = found.meta.last_modified;
    // An unreadable lease (or one too large) is treated as expired: it is
    // taken over.
    let record = match small::read(found, Small::Lease).await {
        Ok(bytes) => serde_json::from_slice(&bytes).ok(),
        Err(SmallError::Oversized { .. }) => None,
        Err(SmallError::Store(_)) => return Err(()),
    };
    let mut record = record.unwrap_or(LeaseRecord { node: String::new(), peer_url: None, expires_ms: 0 });
    record.expires_ms = bounded_life(record.expires_ms, written.timestamp_millis(), tier.identity().lease_ttl);
    Ok(Some((record, version)))
}

/// When a lease the store last wrote at `written_ms` ends, whatever it
/// claims (`expires_ms`): a live holder rewrites it every third of
/// `lease_ttl`, so one not rewritten for twice that is over.
fn bounded_life(expires_ms: u64, written_ms: i64, lease_ttl: Duration) -> u64 {
    let written_ms = u64::try_from(written_ms).unwrap_or(0);
    expires_ms.min(written_ms.saturating_add(2 * lease_ttl.as_millis() as u64))
}

impl LeaseGuard {
    /// Renews the lease at `path`, written as `version`, every third of its
    /// lifetime, until dropped or until another node took it over.
    fn renew(tier: &Arc<SharedTier>, path: Path, version: UpdateVersion) -> LeaseGuard {
        let version = Arc::new(parking_lot::Mutex::new(version));
        let (renewer, renewed, renewed_path) = (Arc::clone(tier), Arc::clone(&version), path.clone());
        let renewing = tokio::spawn(async move {
            let (tier, path) = (renewer, renewed_path);
            loop {
                tokio::time::sleep(tier.identity().lease_ttl / 3).await;
                let current = renewed.lock().clone();
                let update = PutOptions { mode: PutMode::Update(current), ..PutOptions::default() };
                match tier.store().put_opts(&path, payload(&record(&tier)), update).await {
                    Ok(written) => *renewed.lock() = written.into(),
                    Err(object_store::Error::Precondition { .. }) => {
                        tracing::warn!(%path, "lost a lease while fetching: another node took it over");
                        return;
                    }
                    Err(error) => tracing::debug!(%path, %error, "lease not renewed; tried again"),
                }
            }
        });
        LeaseGuard { renewing, tier: Arc::clone(tier), path, version, released: false }
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

/// Removes the leases under `tier`'s prefix that no holder rewrote for ten
/// lease lives before `now` (their nodes died before they could): how
/// many. Leases are otherwise removed by their holders.
pub async fn sweep(tier: &SharedTier, now: SystemTime) -> Result<usize, object_store::Error> {
    let stale_after = tier.identity().lease_ttl * 10;
    let mut listed = tier.store().list(Some(&tier.layout().leases()));
    let mut removed = 0;
    while let Some(meta) = futures_util::StreamExt::next(&mut listed).await {
        let meta = meta?;
        let written = SystemTime::from(meta.last_modified);
        if now.duration_since(written).is_ok_and(|age| age > stale_after)
            && tier.store().delete(&meta.location).await.is_ok()
        {
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_lives_no_longer_than_twice_the_ttl_after_its_last_write() {
        let ttl = Duration::from_secs(30);
        let written = 1_800_000_000_000;
        assert_eq!(bounded_life(written as u64 + 30_000, written, ttl), written as u64 + 30_000, "as claimed");
        let ten_years = written as u64 + 315_360_000_000;
        assert_eq!(bounded_life(ten_years, written, ttl), written as u64 + 60_000, "a clock ahead, or tampering");
        assert_eq!(bounded_life(5, -1, ttl), 5);
    }
}
