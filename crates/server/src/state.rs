//! What every request handler shares: settings, the cache, the way out and
//! the counters. Built once in `run` and passed down, never global.

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use pkgproxy_cache::{Cache, Clock};
use pkgproxy_sides::Sides;
use pkgproxy_upstream::offline::auto::AutoOffline;
use pkgproxy_upstream::offline::Mode;
use pkgproxy_upstream::Upstream;

use crate::config::Settings;
use crate::headers::LoopMark;
use crate::shadow::Shadows;
use crate::stats::Stats;

/// The server's shared state.
#[derive(Debug)]
pub struct State {
    /// Validated settings.
    pub settings: Settings,
    /// The store of bodies and its index, and the fetches in progress.
    pub cache: Cache,
    /// Every side, with what it has learnt.
    pub sides: Sides,
    /// The one way out.
    pub upstream: Upstream,
    /// Per-side counters.
    pub stats: Stats,
    /// When the server started (for uptime).
    pub started: Instant,
    /// The proxy's listening address.
    pub listen: SocketAddr,
    /// The offline mode pkgproxy will start in after a restart.
    pub restart_mode: Mutex<Mode>,
    /// Automatic offline mode.
    pub auto_offline: Arc<AutoOffline>,
    /// This process's mark in `Via`, to refuse requests that loop back.
    pub loop_mark: LoopMark,
    /// Where copies of the traffic go (replaced on a reload).
    pub shadows: arc_swap::ArcSwap<Shadows>,
    /// Whether the status page is on (`[status] page`, changed on a reload).
    pub status_page: std::sync::atomic::AtomicBool,
    /// The cache's page: whether it is on, and the top clients and
    /// packages it shows.
    pub browsing: crate::browsing::Browsing,
    /// Whether `/metrics` is served on the proxy listener.
    pub status_metrics: std::sync::atomic::AtomicBool,
    /// Held while a reload runs: one at a time.
    pub reloading: tokio::sync::Mutex<()>,
    /// The wall clock.
    pub clock: Arc<dyn Clock>,
    /// Numbers the requests (logs name them).
    pub request_ids: AtomicU64,
    /// TLS on the proxy listener.
    pub tls: crate::tls::ListenerTls,
    /// What the request path keeps between requests for the kinds of
    /// request only some sides make (tokens, names pointing at digests,
    /// grants, generations).
    pub kept: crate::kept::Kept,
    /// Where a line per request goes, if anywhere.
    pub access_log: crate::access_log::AccessLog,
    /// Who may connect to the proxy listener, and how many are.
    pub admission: Arc<crate::admission::Admission>,
    /// The cluster this node is part of, if any.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
    /// The last refusals and failures, for the status page.
    pub trouble: crate::trouble::Trouble,
    /// Each side's traffic over the last hour and day.
    pub history: crate::history::History,
    /// What is being fetched ahead of clients.
    pub ahead: crate::ahead::Ahead,
    /// The fleet's policy, and what it keeps between requests.
    pub gate: crate::gate::Gate,
    /// How recent a revalidation answers a client asking for a fresh copy
    /// (changed on a reload).
    pub revalidate_floor: crate::config::Floor,
    /// The keys whose signed bundles an import takes (`[bundles]`).
    pub trusted_keys: arc_swap::ArcSwap<Vec<crate::signing::PublicKey>>,
}
