//! pkgproxy's server: the gateway, the request path, the control sockets
//! and [`run`], which ties them to the cache, the sides and the way out.
//!
//! `run` takes its settings, its listeners and a shutdown future, so tests
//! bind `127.0.0.1:0` and stop it when they like; it reads no global state.
//!
//! # Layout
//!
//! The request path, in the order a request meets it:
//!
//! ```text
//! admission.rs         who may connect, and how many at once
//! gateway/             accept; each connection's deadlines (deadline.rs),
//!                      HTTP/1.1 (keep-alive, pipelining, CONNECT upgrades),
//!                      HTTP/2 (http2/: prior knowledge, h2c, ALPN), each
//!                      request's framing (framing.rs); who asked
//!                      (context.rs); an answer sent, once (`send`: the
//!                      kernel's sendfile.rs or HTTP/2's frames, the trouble
//!                      table, the access log's line in access_log.rs)
//! status/              the status page at `/` and its JSON
//! browse/              the cache's page at `/cache/` and its JSON
//! browsing/            what it keeps: the top clients and packages of the
//!                      last day
//! proxy/mod.rs         loop check -> route table (pkgproxy_sides::route)
//!                      -> the shadows' tap (shadow/) -> the side's decision
//!   proxy/lookup.rs      what the cache holds for a request, decided once
//!                        (remembered, fresh, adoptable, stale and why,
//!                        missing and why): pure, read by every caller
//!   proxy/cached.rs      through the cache: the lookup, then a hit, an
//!                        adoption, or what the side needs fetched first
//!                        and the shared fetch; content only some clients
//!                        may read confirmed first (access.rs)
//!     proxy/fetching.rs       the fetch's upstream requests, through the
//!                             side's pool (pkgproxy_upstream, the one way out;
//!                             headers in outgoing.rs), redirects followed and
//!                             Bearer tokens (kept/tokens.rs) when the side asks
//!     proxy/follow.rs         what a client asks for next, fetched ahead of
//!                             it (a few at once: ahead.rs)
//!     proxy/peer.rs           a cluster's peer asking for an entry
//!   proxy/forward.rs     uncached, with the request's body (upload.rs);
//!                        recorded and replayed when the side asks
//!   proxy/generation.rs  an index and the files it names, as one unit
//!   proxy/pointer.rs     a name pointing at content by digest (a tag):
//!                        one HEAD per name (single_flight.rs), then the
//!                        content by digest through the cache
//!   proxy/finish.rs      what the side asks done to a cache answer: its
//!                        rewrite (rewrite.rs), fallback, headers
//!   proxy/rewrite.rs     the side's rewrite of an answer, for this client
//!   proxy/tunnel.rs      CONNECT, through the one dialer
//!   proxy/answer.rs      answers from entries (body.rs), downloads, upstreams, each
//!                        an `Answer`: the response and, typed beside it,
//!                        how it was served, why, and who answered
//!   proxy/plan.rs        RFC 9110 ranges and conditionals, pure
//!   proxy/outcome.rs     one typed outcome per request, mapped to HTTP once,
//!                        in the side's words, with the access log's note
//!   proxy/reason.rs      why an answer is not a plain hit (X-Pkgproxy-Reason)
//! ```
//!
//! For pkgproxy's own requests, through the same path: `proxy/explain.rs`
//! (what a request would get now, without fetching), `proxy/readiness.rs`
//! (whether it would be served offline; warming it), `proxy/needs.rs`
//! (what a build needs, found in what the cache holds), `proxy/for_sides.rs`
//! (the cache as a side reads it: what would be served offline),
//! `proxy/supplied.rs` (an item taken in from handed bytes) and
//! `bundle/` (export and import of bundles for air gaps), whose authors
//! `signing.rs` names (the keys that sign bundles, and their signatures).
//!
//! Beside it: `control/` (the stats and admin sockets, speaking
//! `pkgproxy_control`'s messages), `config/` (the file as written, validated
//! into [`Settings`]), `reload.rs` (the file read again while serving),
//! `state.rs` (what every handler shares), `kept/` (what the kinds of
//! request only some sides make keep between requests: tokens, pointers
//! and holds, grants, generations) and `stats.rs` (each side's counters).
//!
//! The server takes each side's roles (`pkgproxy_sides::role`), never a
//! side by name: each module above asks the side it serves for the one
//! role it uses.

#![forbid(unsafe_code)]

pub mod access_log;
mod admission;
mod ahead;
mod body;
mod browse;
mod browsing;
pub mod bundle;
mod cluster;
pub mod config;
mod context;
pub mod control;
mod failed;
pub mod gate;
mod gateway;
mod headers;
mod health;
mod history;
mod html;
mod kept;
mod proxy;
mod redact;
pub mod reload;
mod report;
mod sendfile;
pub mod shadow;
pub mod signing;
mod single_flight;
mod state;
mod stats;
mod status;
mod tls;
mod trouble;
mod upkeep;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use pkgproxy_cache::{Cache, StoreError};
use pkgproxy_sides::{OpenError, Sides};
use pkgproxy_upstream::offline::auto::{self, AutoOffline, SystemProbe, Trigger};
use pkgproxy_upstream::Upstream;
use tokio::net::{TcpListener, UnixListener};
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::Settings;
use state::State;

/// The sockets the server serves.
#[derive(Debug)]
pub struct Listeners {
    /// The proxy listener (`-addr`), non-blocking. Every proxy thread accepts
    /// on its own handle of it.
    pub proxy: std::net::TcpListener,
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
    /// What a side has learnt could not be opened.
    #[error("{0}")]
    Sides(#[from] OpenError),
    /// Start-up failed otherwise.
    #[error("cannot start: {0}")]
    Start(String),
    /// The listener's address could not be read.
    #[error("proxy listener: {0}")]
    Listener(std::io::Error),
    /// A proxy thread could not be started.
    #[error("cannot start a proxy thread: {0}")]
    Runtime(std::io::Error),
}

/// Starts one proxy thread: a single-threaded runtime that serves the
/// connections handed to it until shutdown and then until they end.
///
/// A connection stays on one thread, as in nginx's worker processes: a
/// cache hit then costs no cross-thread wake-up, which on a work-stealing
/// runtime took a fifth of the CPU time of small hits.
fn proxy_thread(number: usize, token: CancellationToken, tracker: TaskTracker) -> Result<Handle, ServerError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServerError::Runtime)?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name(format!("pkgproxy-proxy-{number}"))
        .spawn(move || {
            runtime.block_on(async move {
                token.cancelled().await;
                tracker.wait().await;
            });
        })
        .map_err(ServerError::Runtime)?;
    Ok(handle)
}

/// Runs the server until `shutdown` completes, then lets requests in flight
/// finish (for up to the settings' grace period). `ready` is called with a one-line
/// summary once the cache is open and the listeners serve.
pub async fn run(
    settings: Settings,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
    ready: impl FnOnce(&str),
) -> Result<(), ServerError> {
    let listen = listeners.proxy.local_addr().map_err(ServerError::Listener)?;
    let state = Arc::new(State::open(settings, listen).await?);
    let (entries, bytes) = state.cache.totals();
    tracing::info!(%listen, cache_dir = %state.cache.dir().display(), entries, bytes, "pkgproxy is serving");

    let token = CancellationToken::new();
    // Whoever drops this future (a test's runtime ending) stops the proxy
    // threads too, rather than leaving them waiting for a shutdown.
    let _stop_on_drop = token.clone().drop_guard();
    let tracker = TaskTracker::new();
    let threads = (0..state.settings.proxy_threads.max(1))
        .map(|number| proxy_thread(number, token.clone(), tracker.clone()))
        .collect::<Result<Vec<Handle>, ServerError>>()?;
    let listener = TcpListener::from_std(listeners.proxy).map_err(ServerError::Listener)?;
    tracker.spawn(gateway::serve_proxy(listener, Arc::clone(&state), token.clone(), tracker.clone(), threads));
    if state.auto_offline.trigger() != Trigger::Off {
        let (auto, token) = (Arc::clone(&state.auto_offline), token.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = auto::watch(auto, SystemProbe::default()) => {}
                _ = token.cancelled() => {}
            }
        });
    }
    tracker.spawn(upkeep::run(Arc::clone(&state), token.clone()));
    tokio::spawn({
        let (state, token) = (Arc::clone(&state), token.clone());
        async move {
            tokio::select! {
                _ = reload::on_hangup(Arc::clone(&state)) => {}
                _ = reload::on_reopen(state) => {}
                _ = token.cancelled() => {}
            }
        }
    });
    for (listener, role) in [(listeners.stats, control::Role::Stats), (listeners.admin, control::Role::Admin)] {
        tracker.spawn(gateway::serve_control(listener, Arc::clone(&state), role, token.clone(), tracker.clone()));
    }
    // The listeners are listening and the cache is open: connections
    // already wait in the backlog.
    ready(&format!("serving on {listen}: {entries} cached entries, {} MB", bytes / 1_000_000));
    shutdown.await;
    tracing::info!("shutting down");
    token.cancel();
    tracker.close();
    let grace = state.settings.shutdown_grace;
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!("requests still in flight after {}; stopping anyway", humantime::format_duration(grace));
    }
    // What clients were served whole is kept: their commits end first.
    if tokio::time::timeout(grace, state.cache.settled()).await.is_err() {
        tracing::warn!(
            "bodies served still not committed after {}; stopping anyway",
            humantime::format_duration(grace)
        );
    }
    let access_log = state.access_log.clone();
    let _ = tokio::task::spawn_blocking(move || access_log.flush()).await;
    Ok(())
}

/// `config`, with the proxy listener's address as where peers reach this
/// node when it names none and the listener is on one address (on every
/// address, which one the others can reach is not known: none is given,
/// and the others fetch for themselves rather than stream from this node).
fn with_peer_url(mut config: pkgproxy_cluster::ClusterConfig, listen: SocketAddr) -> pkgproxy_cluster::ClusterConfig {
    if config.peer_url.is_none() {
        if listen.ip().is_unspecified() {
            tracing::warn!(%listen, "cluster: peer_url is not set: the other nodes cannot stream this node's fetches");
        } else {
            config.peer_url = Some(format!("http://{listen}"));
        }
    }
    config
}

/// What is read from disk at a start: the cache, each side's learnt
/// state, the listener's TLS and the traffic history.
type Opened = (Cache, Sides, tls::ListenerTls, history::Kept);

impl State {
    /// Opens what the server runs with: the cache and each side's learnt
    /// state (blocking work, on a blocking thread), the way out and the
    /// shadows, for a proxy listening on `listen`.
    pub(crate) async fn open(settings: Settings, listen: SocketAddr) -> Result<State, ServerError> {
        let (cache_dir, sides, clock) = (settings.cache_dir.clone(), settings.sides.clone(), settings.clock.clone());
        let (tls_source, quota, state_dir) = (settings.tls.clone(), settings.quota, settings.state_dir.clone());
        let opened = tokio::task::spawn_blocking(move || -> Result<Opened, ServerError> {
            let cache = Cache::open(&cache_dir, clock)?;
            cache.set_quota(quota);
            let sides = Sides::open(&sides, &cache)?;
            let tls = tls::ListenerTls::open(&tls_source).map_err(|error| ServerError::Start(error.to_string()))?;
            Ok((cache, sides, tls, history::load(&state_dir)))
        });
        let (cache, sides, tls, history) = opened.await.map_err(|e| ServerError::Start(e.to_string()))??;
        let start_mode = settings.upstream.switch.mode();
        let (status_page, status_metrics) = (settings.status_page, settings.status_metrics);
        let browse_page = settings.browse_page;
        let (auto_trigger, switch) = (settings.auto_offline, settings.upstream.switch.clone());
        let upstream = Upstream::new(settings.upstream.clone());
        let shadows = shadow::Shadows::new(&settings.shadows, &upstream.shadow_client)
            .map_err(|error| ServerError::Start(format!("mirror: {error}")))?;
        let admission = admission::Admission::new(settings.clients.clone());
        let access_log = access_log::AccessLog::open(settings.access_log.as_ref())
            .map_err(|error| ServerError::Start(error.to_string()))?;
        let cluster = match settings.cluster.clone().map(|config| with_peer_url(config, listen)) {
            Some(config) => Some(
                cluster::Cluster::start(config, &cache, settings.upstream.switch.clone(), upstream.peers.clone())
                    .await
                    .map_err(|error| ServerError::Start(error.to_string()))?,
            ),
            None => None,
        };
        Ok(State {
            clock: Arc::clone(&settings.clock),
            trusted_keys: arc_swap::ArcSwap::from_pointee(settings.trusted_keys.clone()),
            revalidate_floor: config::Floor::new(settings.revalidate_floor),
            gate: gate::Gate::new(settings.policy_options.clone(), settings.policy.clone()),
            trouble: Default::default(),
            history: history::History::with(history, pkgproxy_cache::unix_secs(settings.clock.now())),
            ahead: Default::default(),
            settings,
            cache,
            sides,
            upstream,
            stats: stats::Stats::default(),
            started: Instant::now(),
            listen,
            restart_mode: parking_lot::Mutex::new(start_mode),
            auto_offline: Arc::new(AutoOffline::new(auto_trigger, switch)),
            loop_mark: headers::LoopMark::new(),
            shadows: arc_swap::ArcSwap::from_pointee(shadows),
            status_page: std::sync::atomic::AtomicBool::new(status_page),
            browsing: browsing::Browsing::new(browse_page),
            status_metrics: std::sync::atomic::AtomicBool::new(status_metrics),
            reloading: Default::default(),
            request_ids: Default::default(),
            kept: Default::default(),
            tls,
            access_log,
            admission,
            cluster,
        })
    }
}
