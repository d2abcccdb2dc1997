//! This node's part in a cluster (`[cluster]`): the shared tier is
//! connected at start, and a store that breaks the promises cluster mode
//! rests on stops the start. A store that cannot be reached does not: the
//! node starts alone (degraded) and connects once the store answers.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;

use pkgproxy_cache::Cache;
use pkgproxy_cluster::breakers::{self, SharedBreakers};
use pkgproxy_cluster::members::{self, Members};
use pkgproxy_cluster::peer::Asked;
use pkgproxy_cluster::switch::{self, ClusterMode};
use pkgproxy_cluster::{ClusterConfig, ClusterError, Publisher, SharedTier, ThroughPeer};
use pkgproxy_upstream::offline::{BreakerWatcher, Mode, Switch};
use pkgproxy_upstream::peer::PeerClient;

/// A request as this node received it: what a peer's credential signs.
#[derive(Debug, Clone, Copy)]
pub struct ClientRequest<'a> {
    /// Its method.
    pub method: &'a http::Method,
    /// Its target as received (origin-form or absolute).
    pub uri: &'a http::Uri,
    /// Its headers.
    pub headers: &'a http::HeaderMap,
}

/// Whether `client` is a request another node of `tier`'s cluster sent,
/// with a credential good now.
pub fn is_from_peer(tier: &SharedTier, client: &ClientRequest<'_>) -> bool {
    let Some(key) = &tier.identity().peer_key else { return false };
    let now = std::time::SystemTime::now();
    key.verify(client.method, &client.uri.to_string(), client.headers, now)
}

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
    /// Publishes what this node fetches.
    publisher: Arc<Publisher>,
    /// Which other nodes ask their upstreams, for this node's misses while
    /// it cannot.
    members: Arc<Members>,
    /// How the other nodes are asked: the one way out's peer client.
    peers: PeerClient,
}

impl Cluster {
    /// Connects to the store `config` names and publishes `cache`'s commits
    /// to it; a store that cannot be used is an error, one that cannot be
    /// reached yet is tried again in the background.
    pub async fn start(
        config: ClusterConfig,
        cache: &Cache,
        switch: Switch,
        peers: PeerClient,
    ) -> Result<Arc<Cluster>, ClusterError> {
        let publisher = Publisher::new();
        // Commits are remembered from the start, published once connected.
        cache.on_commit(Arc::clone(&publisher) as Arc<dyn pkgproxy_cache::Committed>);
        let members = Arc::default();
        let cluster = Arc::new(Cluster { config, tier: ArcSwapOption::empty(), switch, publisher, members, peers });
        let connecting = pkgproxy_cluster::connect(&cluster.config, cluster.peers.clone());
        match tokio::time::timeout(CONNECT_WAIT, connecting).await {
            Ok(Ok(tier)) => cluster.joined(tier),
            Ok(Err(error @ (ClusterError::Unfit { .. } | ClusterError::Config(_)))) => return Err(error),
            Ok(Err(error)) => cluster.retry(error.to_string()),
            Err(_) => cluster.retry(format!("no answer within {}s", CONNECT_WAIT.as_secs())),
        }
        Ok(cluster)
    }

    fn joined(&self, tier: Arc<SharedTier>) {
        self.publisher.connect(Arc::clone(&tier));
        let poll = self.config.offline_poll;
        tokio::spawn(switch::watch(Arc::downgrade(&tier), poll, follower(self.switch.clone())));
        self.switch.watch_breakers(Arc::new(Sharing { tier: Arc::downgrade(&tier) }));
        let imposing = imposer(self.switch.clone(), tier.identity().node.clone(), poll);
        tokio::spawn(breakers::watch(Arc::downgrade(&tier), poll, imposing));
        tokio::spawn(pkgproxy_cluster::sweep::keep_swept(self.config.clone(), Arc::downgrade(&tier)));
        let switch = self.switch.clone();
        let online = move || switch.mode() != Mode::Offline;
        tokio::spawn(members::keep_announcing(Arc::downgrade(&tier), poll, online));
        self.tier.store(Some(tier));
        tracing::info!(
            endpoint = self.config.endpoint,
            bucket = self.config.bucket,
            node = self.config.node_id,
            "cluster store connected"
        );
    }

    fn retry(self: &Arc<Self>, why: String) {
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
                match pkgproxy_cluster::connect(&cluster.config, cluster.peers.clone()).await {
                    Ok(tier) => return cluster.joined(tier),
                    Err(error @ ClusterError::Unfit { .. }) => {
                        tracing::error!(%error, "the cluster store cannot be used: this node stays alone");
                        return;
                    }
                    Err(error) => tracing::debug!(%error, "cluster store still unreachable"),
                }
            }
        });
    }

    /// A client was served `key` from this node's cache: published now if
    /// it could not be before (the store was down).
    pub fn accessed(
        &self,
        key: &str,
        entry: &pkgproxy_cache::Entry,
        open: impl FnOnce() -> std::io::Result<Arc<std::fs::File>>,
    ) {
        self.publisher.accessed(key, entry, open);
    }

    /// The shared tier, when connected.
    pub fn tier(&self) -> Option<Arc<SharedTier>> {
        self.tier.load_full()
    }

    /// The source of a miss while this node does not ask its upstreams
    /// (it is offline): the request asked of an online node of the
    /// cluster, else `upstream` (which refuses as offline). What the peer
    /// is asked is built from what the side decided (`asked`), never from
    /// where the client pointed. A request another node sent here (it
    /// proves itself with the cluster's credential) is never sent on: two
    /// nodes that each took the other for online would send it back and
    /// forth, each waiting for its own fetch.
    pub fn through_peer(
        &self,
        client: &ClientRequest<'_>,
        asked: Asked,
        headers: http::HeaderMap,
        upstream: Box<dyn pkgproxy_cache::Source>,
    ) -> Box<dyn pkgproxy_cache::Source> {
        match self.tier() {
            Some(tier) if !is_from_peer(&tier, client) => {
                Box::new(ThroughPeer::new(tier, Arc::clone(&self.members), asked, headers, upstream))
            }
            _ => upstream,
        }
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
    let followed = parking_lot::Mutex::new(false);
    move |set: &ClusterMode| {
        let Ok(mode) = set.mode.parse::<Mode>() else {
            tracing::warn!(mode = set.mode, "the cluster's offline switch names an unknown mode");
            return;
        };
        let mut followed = followed.lock();
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

/// Shares the breakers hosts asked this node to open with the cluster.
#[derive(Debug)]
struct Sharing {
    tier: std::sync::Weak<SharedTier>,
}

impl Sharing {
    /// Runs `change` on the tier in the background (the switch tells its
    /// watcher under its lock, from whatever task settled a request).
    fn share<F, Fut>(&self, host: &str, change: F)
    where
        F: FnOnce(Arc<SharedTier>, String) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (tier, host) = (self.tier.clone(), host.to_owned());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(tier) = tier.upgrade() {
                    change(tier, host).await;
                }
            });
        }
    }
}

impl BreakerWatcher for Sharing {
    fn opened(&self, host: &str, until: std::time::SystemTime) {
        self.share(host, move |tier, host| async move { breakers::opened(&tier, &host, until).await });
    }

    fn closed(&self, host: &str) {
        self.share(host, |tier, host| async move { breakers::closed(&tier, &host).await });
    }
}

/// What the node does with each new version of the shared breakers: a host
/// another node was asked to leave alone is left alone here too, a little
/// longer than asked (two polls and a second), so the asked node's probe
/// is the cluster's one probe; a host that answered it is tried again at
/// once. This node's own breakers it knows already.
fn imposer(switch: Switch, me: String, poll: Duration) -> impl Fn(&SharedBreakers) + Send + 'static {
    let imposed = parking_lot::Mutex::new(std::collections::BTreeSet::<String>::new());
    move |shared: &SharedBreakers| {
        let mut imposed = imposed.lock();
        for (host, breaker) in shared.iter().filter(|(_, breaker)| breaker.set_by != me) {
            switch.impose(host, breaker.until() + poll * 2 + Duration::from_secs(1));
            imposed.insert(host.clone());
        }
        imposed.retain(|host| {
            let still = shared.contains_key(host);
            if !still {
                switch.lift(host);
            }
            still
        });
    }
}
