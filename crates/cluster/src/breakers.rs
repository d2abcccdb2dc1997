//! The breakers a cluster shares: a host that asked one node to leave it
//! alone (`429`, or `503` with `Retry-After`) limits the cluster's address,
//! not that node's, so every node leaves it alone until the time is up.
//! The node that was asked probes the host then; the others wait a little
//! longer for its word, so the host sees one probe from the cluster, not
//! one per node. One object holds them all, changed by compare-and-swap.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::{GetOptions, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::tier::SharedTier;

/// One host left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedBreaker {
    /// Until when (milliseconds since the Unix epoch).
    pub until_ms: u64,
    /// The node the host asked; it probes the host once the time is up.
    pub set_by: String,
}

impl SharedBreaker {
    /// Until when, as a time.
    pub fn until(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.until_ms)
    }
}

/// The hosts left alone, by host.
pub type SharedBreakers = BTreeMap<String, SharedBreaker>;

/// Tries of a compare-and-swap that others keep winning.
const SWAPS: usize = 5;

/// Records that `host` asked this node to leave it alone until `until`.
pub async fn opened(tier: &SharedTier, host: &str, until: SystemTime) {
    let until_ms = until.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let breaker = SharedBreaker { until_ms, set_by: tier.identity().node.clone() };
    change(tier, |breakers| match breakers.get(host) {
        Some(known) if known.until_ms >= until_ms => false,
        _ => {
            breakers.insert(host.to_owned(), breaker.clone());
            true
        }
    })
    .await;
}

/// Records that `host` answered this node's probe.
pub async fn closed(tier: &SharedTier, host: &str) {
    change(tier, |breakers| breakers.remove(host).is_some()).await;
}

/// Applies `edit` (which says whether it changed anything) to the shared
/// breakers, by compare-and-swap.
async fn change(tier: &SharedTier, edit: impl Fn(&mut SharedBreakers) -> bool) {
    let path = tier.layout().breakers();
    for _ in 0..SWAPS {
        let (mut breakers, version) = match tier.store().get_opts(&path, GetOptions::default()).await {
            Ok(found) => {
                let version = UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
                // One that cannot be read (or is too large) is written over.
                let bytes = crate::small::read(found, crate::small::Small::Breakers).await.unwrap_or_default();
                (serde_json::from_slice::<SharedBreakers>(&bytes).unwrap_or_default(), Some(version))
            }
            Err(object_store::Error::NotFound { .. }) => (SharedBreakers::new(), None),
            Err(error) => {
                tracing::debug!(%path, %error, "the cluster's breakers were not read");
                return;
            }
        };
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let before = breakers.len();
        breakers.retain(|_, breaker| breaker.until_ms + 60_000 > now_ms);
        if !edit(&mut breakers) && breakers.len() == before {
            return;
        }
        let json = Bytes::from(serde_json::to_vec(&breakers).expect("breakers serialise"));
        match tier.swap(&path, version, json).await {
            Ok(true) => return,
            Ok(false) => continue,
            Err(error) => {
                tracing::debug!(%path, %error, "the cluster's breakers were not written");
                return;
            }
        }
    }
}

/// Reads the shared breakers every `every` and calls `apply` with each new
/// version, until the tier is dropped.
pub async fn watch(
    tier: std::sync::Weak<SharedTier>,
    every: Duration,
    apply: impl Fn(&SharedBreakers) + Send + 'static,
) {
    crate::poll::watch(
        tier,
        |tier| tier.layout().breakers(),
        crate::small::Small::Breakers,
        every,
        |bytes| apply(&serde_json::from_slice(bytes).unwrap_or_default()),
    )
    .await;
}
