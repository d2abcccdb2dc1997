//! This node's part in a cluster (`[cluster]`): the shared tier is
//! connected at start, and a store that breaks the promises cluster mode
//! rests on stops the start. A store that cannot be reached does not: the
//! node starts alone (degraded) and connects once the store answers.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;

use pkgproxy_cache::Cache;
use pkgproxy_cluster::switch::{self, ClusterMode};
use pkgproxy_cluster::{ClusterConfig, ClusterError, Publisher, SharedTier};
use pkgproxy_upstream::offline::{Mode, Switch};

/// How long the start waits for the store before starting alone.
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// How often a node that started alone tries the store again.
const RETRY_EVERY: Duration = Duration::from_secs(10);

/// The node's shared tier, once connected.
#[derive(Debug)]
pub struct Cluster {
    /// The settings it was started with.
    pub config: ClusterConfig,
    tier: ArcSwapOption<SharedTier>,
    /// The node's offline switch, which follows the cluster's.
    switch: Switch,
}

impl Cluster {
    /// Connects to the store `config` names and publishes `cache`'s commits
    /// to it; a store that cannot be used is an error, one that cannot be
    /// reached yet is tried again in the background.
    pub async fn start(config: ClusterConfig, cache: &Cache, switch: Switch) -> Result<Arc<Cluster>, ClusterError> {
        let cluster = Arc::new(Cluster { config, tier: ArcSwapOption::empty(), switch });
        match tokio::time::timeout(CONNECT_WAIT, pkgproxy_cluster::connect(&cluster.config)).await {
            Ok(Ok(tier)) => cluster.joined(tier, cache),
            Ok(Err(error @ (ClusterError::Unfit { .. } | ClusterError::Config(_)))) => return Err(error),
            Ok(Err(error)) => cluster.retry(cache.clone(), error.to_string()),
            Err(_) => cluster.retry(cache.clone(), format!("no answer within {}s", CONNECT_WAIT.as_secs())),
        }
        Ok(cluster)
    }

    fn joined(&self, tier: Arc<SharedTier>, cache: &Cache) {
        cache.on_commit(Publisher::new(Arc::clone(&tier)));
        tokio::spawn(switch::watch(Arc::downgrade(&tier), self.config.offline_poll, follower(self.switch.clone())));
        self.tier.store(Some(tier));
        tracing::info!(
            endpoint = self.config.endpoint,
            bucket = self.config.bucket,
            node = self.config.node_id,
            "cluster store connected"
        );
    }

    fn retry(self: &Arc<Self>, cache: Cache, why: String) {
        tracing::warn!(
            endpoint = self.config.endpoint,
            error = why,
            "cluster store unreachable: this node works alone until it answers"
        );
        let cluster = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(RETRY_EVERY).await;
                let Some(cluster) = cluster.upgrade() else { return };
                match pkgproxy_cluster::connect(&cluster.config).await {
                    Ok(tier) => return cluster.joined(tier, &cache),
                    Err(error @ ClusterError::Unfit { .. }) => {
                        tracing::error!(%error, "the cluster store cannot be used: this node stays alone");
                        return;
                    }
                    Err(error) => tracing::debug!(%error, "cluster store still unreachable"),
                }
            }
        });
    }

    /// The shared tier, when connected.
    pub fn tier(&self) -> Option<Arc<SharedTier>> {
        self.tier.load_full()
    }

    /// Whether the node works alone now: not connected yet, or the store
    /// failed its last operation.
    pub fn is_degraded(&self) -> bool {
        self.tier().is_none_or(|tier| tier.is_degraded())
    }

    /// What the status and `info` show of the node's part in the cluster.
    pub fn info(&self) -> pkgproxy_control::ClusterInfo {
        let counters = self.tier().map(|tier| tier.counters()).unwrap_or_default();
        pkgproxy_control::ClusterInfo {
            node: self.config.node_id.clone(),
            endpoint: crate::redact::without_user(&self.config.endpoint),
            bucket: self.config.bucket.clone(),
            state: if self.is_degraded() { "degraded" } else { "connected" }.to_owned(),
            shared_hits: counters.shared_hits,
            published: counters.published,
            corrupt: counters.corrupt,
            errors: counters.errors,
        }
    }
}

/// What the node does with each new setting of the cluster's switch: an
/// offline mode is taken at once; a return to `never` is taken only when
/// the node followed the cluster into a mode before (a node started
/// offline on its own stays so).
fn follower(switch: Switch) -> impl Fn(&ClusterMode) + Send + 'static {
    let followed = std::sync::Mutex::new(false);
    move |set: &ClusterMode| {
        let Ok(mode) = set.mode.parse::<Mode>() else {
            tracing::warn!(mode = set.mode, "the cluster's offline switch names an unknown mode");
            return;
        };
        let mut followed = followed.lock().unwrap_or_else(|p| p.into_inner());
        if mode == Mode::Never && !*followed {
            return;
        }
        *followed = mode != Mode::Never;
        if switch.mode() != mode {
            tracing::info!(
                mode = set.mode,
                set_by = set.set_by,
                "the cluster's offline switch changed this node's mode"
            );
            switch.set_mode(mode);
        }
    }
}
