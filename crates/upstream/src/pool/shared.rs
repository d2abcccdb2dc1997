//! What every pool shares: the way to open connections, the offline switch,
//! the counters, the settings and a source of randomness; and the HTTP
//! clients a pool's instances send with.

use std::sync::Arc;

use parking_lot::Mutex;

use hyper_util::client::legacy;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::payload::AttemptBody;
use crate::connect::Connector;
use crate::counters::Counters;
use crate::offline::Switch;
use crate::PoolSettings;

/// A pooled HTTP/1.1 client over the connector.
pub(crate) type Client = legacy::Client<Connector, AttemptBody>;

/// What every pool shares.
#[derive(Debug)]
pub(crate) struct Shared {
    connector: Connector,
    pub(crate) switch: Switch,
    pub(crate) counters: Arc<Counters>,
    pub(crate) settings: PoolSettings,
    random: Mutex<fastrand::Rng>,
}

impl Shared {
    pub(crate) fn new(connector: Connector, settings: PoolSettings, switch: Switch, counters: Arc<Counters>) -> Self {
        let random = Mutex::new(settings.seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed));
        Shared { connector, switch, counters, settings, random }
    }

    /// What the breakers call the instance at `uri`: its host, except on
    /// a parent pkgproxy (the proxy in front of the upstreams), whose
    /// endpoints stand for different upstreams (`/v2/docker.io`, `/go`):
    /// there the host, port and path, so that a registry the parent says
    /// is busy leaves the module proxy behind the same parent alone.
    pub(crate) fn breaker_key(&self, uri: &http::Uri) -> Result<String, crate::UpstreamError> {
        let (host, port) = crate::resolve::host_port(uri)?;
        let path = uri.path().trim_end_matches('/');
        Ok(match self.connector.is_proxy(&host, port) && !path.is_empty() {
            true => format!("{host}:{port}{path}"),
            false => host,
        })
    }

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
        let mut random = self.random.lock();
        (random.u64(..), random.u64(..))
    }

    /// A number in [-1, 1] scaling a penalty's jitter.
    pub(crate) fn random_jitter(&self) -> f64 {
        let mut random = self.random.lock();
        random.f64() * 2.0 - 1.0
    }
}
