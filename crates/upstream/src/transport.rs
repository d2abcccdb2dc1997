//! The upstream HTTP transport: the pools of every upstream, built over one
//! [`Connector`](crate::connect::Connector). Every upstream request of every
//! side goes through a [`Pool`] from [`Transport::pool`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::connect::Connector;
use crate::counters::Counters;
use crate::error::UpstreamError;
use crate::offline::Switch;
use crate::pool::{Pool, PoolReport};
use crate::PoolSettings;

/// The body type of upstream requests (pkgproxy only sends `GET` and `HEAD`).
pub type TransportBody = Empty<Bytes>;

/// A pooled HTTP/1.1 client over the connector.
pub(crate) type Client = legacy::Client<Connector, TransportBody>;

/// What every pool shares: the way to open connections, the switch, the
/// counters, the settings and a source of randomness.
#[derive(Debug)]
pub(crate) struct Shared {
    connector: Connector,
    pub(crate) switch: Switch,
    pub(crate) counters: Arc<Counters>,
    pub(crate) settings: PoolSettings,
    random: Mutex<fastrand::Rng>,
}

impl Shared {
    /// A client that keeps idle connections for reuse.
    pub(crate) fn pooled_client(&self) -> Client {
        self.client(32)
    }

    /// A client that opens a new connection for every request.
    pub(crate) fn fresh_client(&self) -> Client {
        self.client(0)
    }

    fn client(&self, max_idle: usize) -> Client {
        #[allow(clippy::disallowed_methods)] // the clients of the one way out
        let mut builder = legacy::Client::builder(TokioExecutor::new());
        builder
            .pool_idle_timeout(self.settings.timeouts.pool_idle)
            .pool_timer(TokioTimer::new())
            .pool_max_idle_per_host(max_idle)
            .build(self.connector.clone())
    }

    /// Two random numbers, for the power of two choices.
    pub(crate) fn random_pair(&self) -> (u64, u64) {
        let mut random = self.random.lock().unwrap_or_else(|p| p.into_inner());
        (random.u64(..), random.u64(..))
    }

    /// A number in [-1, 1] scaling a penalty's jitter.
    pub(crate) fn random_jitter(&self) -> f64 {
        let mut random = self.random.lock().unwrap_or_else(|p| p.into_inner());
        random.f64() * 2.0 - 1.0
    }
}

/// A pool's name and instance URLs: what makes it the same pool.
type PoolKey = (String, Vec<String>);

/// The pools of every upstream.
#[derive(Debug, Clone)]
pub struct Transport {
    shared: Arc<Shared>,
    pools: Arc<Mutex<HashMap<PoolKey, Arc<Pool>>>>,
}

impl Transport {
    pub(crate) fn new(connector: Connector, settings: PoolSettings, switch: Switch, counters: Arc<Counters>) -> Self {
        let random = Mutex::new(settings.seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed));
        let shared = Arc::new(Shared { connector, switch, counters, settings, random });
        Transport { shared, pools: Arc::default() }
    }

    /// The pool named `name` over the instances `urls` (base URLs, in the
    /// configured order), made on first use. One pool per name and instance
    /// list lives as long as the transport, keeping its instances' state.
    pub fn pool(&self, name: &str, urls: &[String]) -> Result<Arc<Pool>, UpstreamError> {
        let key = (name.to_string(), urls.to_vec());
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pool) = pools.get(&key) {
            return Ok(Arc::clone(pool));
        }
        let pool = Arc::new(Pool::new(name, urls, Arc::clone(&self.shared))?);
        pools.insert(key, Arc::clone(&pool));
        Ok(pool)
    }

    /// Every pool's state, by name.
    pub fn report(&self) -> Vec<PoolReport> {
        let pools: Vec<Arc<Pool>> = self.pools.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        let mut reports: Vec<PoolReport> = pools.iter().map(|pool| pool.report()).collect();
        reports.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.instances.len().cmp(&b.instances.len())));
        reports
    }
}

/// Unwraps hyper-util's error to the connector's own, when that is the cause.
pub(crate) fn request_error(host: String, error: legacy::Error) -> UpstreamError {
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        if let Some(upstream) = cause.downcast_ref::<UpstreamError>() {
            return clone_connect_error(upstream, &host);
        }
        source = cause.source();
    }
    let message = match std::error::Error::source(&error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    };
    UpstreamError::Request { host, message }
}

/// The connector's error, taken out from behind hyper-util's (which owns
/// it): the same variant, with the I/O cause's kind and text.
fn clone_connect_error(error: &UpstreamError, host: &str) -> UpstreamError {
    let io = |source: &std::io::Error| std::io::Error::new(source.kind(), source.to_string());
    match error {
        UpstreamError::Forbidden { host, address, kind } => {
            UpstreamError::Forbidden { host: host.clone(), address: *address, kind: *kind }
        }
        UpstreamError::ConnectTimeout { host, after } => {
            UpstreamError::ConnectTimeout { host: host.clone(), after: *after }
        }
        UpstreamError::Connect { host, source } => UpstreamError::Connect { host: host.clone(), source: io(source) },
        UpstreamError::Resolve { host, source } => UpstreamError::Resolve { host: host.clone(), source: io(source) },
        UpstreamError::Tls { host, source } => UpstreamError::Tls { host: host.clone(), source: io(source) },
        other => UpstreamError::Request { host: host.to_string(), message: other.to_string() },
    }
}
