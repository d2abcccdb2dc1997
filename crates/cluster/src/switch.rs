//! The cluster's offline switch: one object in the bucket that every node
//! polls, so one command takes the whole fleet offline (or back) and no
//! node of it sends anything upstream. A node offline this way still reads
//! the bucket: it is the cluster's, not an upstream.

use std::time::Duration;

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;
use crate::tier::SharedTier;

/// What the switch object says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMode {
    /// The offline mode every node takes (`never`, `offline`,
    /// `store-overloaded`).
    pub mode: String,
    /// The node that set it.
    pub set_by: String,
    /// When (milliseconds since the Unix epoch).
    pub at_ms: u64,
}

/// How often a node reads the switch by default.
pub const DEFAULT_POLL: Duration = Duration::from_secs(2);

/// Sets the cluster's mode to `mode`, for every node.
pub async fn set(tier: &SharedTier, mode: &str) -> Result<(), ClusterError> {
    let record = ClusterMode {
        mode: mode.to_owned(),
        set_by: tier.identity().node.clone(),
        at_ms: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
    };
    let path = tier.layout().cluster_mode();
    let json = Bytes::from(serde_json::to_vec(&record).expect("a mode serialises"));
    let written = tier.store().put(&path, PutPayload::from(json)).await;
    tier.outcome(written.map(|_| ()).map_err(|error| ClusterError::store(format!("write {path}"), error)))
}

/// Reads the switch every `every` and calls `apply` with each new setting
/// (the first one found included), until the tier is dropped.
pub async fn watch(tier: std::sync::Weak<SharedTier>, every: Duration, apply: impl Fn(&ClusterMode) + Send + 'static) {
    crate::poll::watch(
        tier,
        |tier| tier.layout().cluster_mode(),
        crate::small::Small::Switch,
        every,
        |bytes| match serde_json::from_slice::<ClusterMode>(bytes) {
            Ok(mode) => apply(&mode),
            Err(error) => tracing::warn!(%error, "the cluster's offline switch is not readable"),
        },
    )
    .await;
}
