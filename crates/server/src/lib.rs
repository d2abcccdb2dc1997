//! pkgproxy's server: the gateway, the request path, the control sockets
//! and [`run`], which ties them to the cache and the way out.
//!
//! `run` takes its listeners and a shutdown future, so tests bind
//! `127.0.0.1:0` and stop it when they like; it reads no global state.

mod body;
pub mod config;
pub mod control;
mod gateway;
mod headers;
mod proxy;
mod state;
mod stats;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pkgproxy_cache::{Cache, StoreError};
use pkgproxy_upstream::Upstream;
use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::Settings;
pub use stats::SideSnapshot;

/// How long in-flight requests get to finish after shutdown is asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The sockets the server serves.
#[derive(Debug)]
pub struct Listeners {
    /// The proxy listener (`-addr`).
    pub proxy: TcpListener,
    /// `stats.sock`.
    pub stats: UnixListener,
    /// `admin.sock`.
    pub admin: UnixListener,
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The cache could not be opened.
    #[error("cannot open the cache: {0}")]
    Cache(#[from] StoreError),
    /// The listener's address could not be read.
    #[error("proxy listener: {0}")]
    Listener(std::io::Error),
}

/// Runs the server until `shutdown` completes, then lets requests in flight
/// finish (for up to ten seconds).
pub async fn run(
    settings: Settings,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let cache_dir = settings.cache_dir.clone();
    let cache = tokio::task::spawn_blocking(move || Cache::open(&cache_dir)).await.map_err(|e| {
        ServerError::Cache(StoreError::Index { path: settings.cache_dir.clone(), message: e.to_string() })
    })??;
    let listen = listeners.proxy.local_addr().map_err(ServerError::Listener)?;
    let upstream = Upstream::new(settings.upstream.clone());
    let state = Arc::new(state::State {
        settings,
        cache,
        upstream,
        stats: stats::Stats::default(),
        started: Instant::now(),
        listen,
    });
    let (entries, bytes) = state.cache.totals();
    tracing::info!(%listen, cache_dir = %state.cache.dir().display(), entries, bytes, "pkgproxy is serving");

    let token = CancellationToken::new();
    let tracker = TaskTracker::new();
    tracker.spawn(gateway::serve_proxy(listeners.proxy, Arc::clone(&state), token.clone(), tracker.clone()));
    for (listener, role) in [(listeners.stats, control::Role::Stats), (listeners.admin, control::Role::Admin)] {
        tracker.spawn(gateway::serve_control(listener, Arc::clone(&state), role, token.clone(), tracker.clone()));
    }
    shutdown.await;
    tracing::info!("shutting down");
    token.cancel();
    tracker.close();
    if tokio::time::timeout(DRAIN_TIMEOUT, tracker.wait()).await.is_err() {
        tracing::warn!("requests still in flight after {} s; stopping anyway", DRAIN_TIMEOUT.as_secs());
    }
    Ok(())
}
