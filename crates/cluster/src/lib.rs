//! The shared tier of a cluster of pkgproxies: verified bodies published to
//! S3-compatible object storage, read through by every node on a local
//! miss.
//!
//! The local store stays tier 1 and the only hot path: repeated hits never
//! touch the bucket. A node that misses locally asks the bucket before the
//! upstream ([`SharedFirst`]), and takes what it finds through the same
//! fetch as an upstream body, verified against the hash the bucket names it
//! by. What a node fetched from upstream and committed is published from the
//! committed local file ([`Publisher`]): nothing unverified reaches the
//! bucket, a blob is there before the index object that names it, and a
//! bucket that fails costs the cluster its sharing, never a client its
//! answer (`degraded`).
//!
//! Only stores that honour conditional writes are used: a concurrent
//! self-test at start ([`selftest`]) refuses the others.

#![forbid(unsafe_code)]

pub mod breakers;
mod config;
mod credential;
mod error;
mod layout;
pub mod lease;
pub mod members;
pub mod peer;
mod poll;
mod publish;
pub mod selftest;
pub mod small;
mod source;
pub mod sweep;
pub mod switch;
mod through_peer;
mod tier;

pub use config::{ClusterConfig, Credentials, DEFAULT_LEASE_TTL};
pub use error::ClusterError;
pub use publish::Publisher;
pub use source::{IsFresh, SharedFirst};
pub use through_peer::ThroughPeer;
pub use tier::{SharedEntry, SharedTier, TierCounters};

use std::sync::Arc;

/// Connects to the store `config` names and checks it keeps the promises
/// cluster mode rests on ([`selftest`]): the tier this node shares, or why
/// the store cannot be used.
pub async fn connect(
    config: &ClusterConfig,
    peers: pkgproxy_upstream::peer::PeerClient,
) -> Result<Arc<SharedTier>, ClusterError> {
    let store: Arc<dyn object_store::ObjectStore> = config.store()?;
    let layout = layout::Layout::new(&config.prefix);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let probe = layout.probe(&format!("{}-{stamp}", config.node_id));
    selftest::check(Arc::clone(&store), &probe, &config.endpoint).await?;
    Ok(SharedTier::new(store, &config.prefix, config.identity(), peers))
}

/// Who a node is to the others of its cluster.
#[derive(Clone)]
pub struct Identity {
    /// Its name.
    pub node: String,
    /// Where the others reach it, if they may.
    pub peer_url: Option<String>,
    /// What nodes of this cluster sign their requests to each other with
    /// (`None`: a node alone, which asks nobody).
    pub peer_key: Option<peer::PeerKey>,
    /// How long its leases last unless renewed.
    pub lease_ttl: std::time::Duration,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").field("node", &self.node).field("peer_url", &self.peer_url).finish_non_exhaustive()
    }
}

impl Identity {
    /// A node no other reaches, with default leases (tests, tools).
    pub fn alone(node: &str) -> Self {
        Identity { node: node.to_owned(), peer_url: None, peer_key: None, lease_ttl: DEFAULT_LEASE_TTL }
    }
}
