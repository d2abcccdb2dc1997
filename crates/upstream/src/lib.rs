//! The one way out: every byte pkgproxy sends upstream leaves through here.
//!
//! [`Transport`] carries all upstream HTTP and [`Dialer`] opens every CONNECT
//! tunnel; both resolve names and open sockets through the private
//! [`connect`] step, which applies the address policy (no loopback, private
//! or link-local targets unless the host is trusted) and counts what it does.
//! Nothing else in the program opens a network connection (clippy's
//! `disallowed-methods` enforces it outside this crate), so the offline
//! switch, the per-host breakers and the upstream pools of later work have
//! exactly two places to live.

mod connect;
mod counters;
mod dialer;
mod error;
pub mod offline;
pub mod pool;
mod resolve;
mod transport;

pub use counters::{Counters, CountersSnapshot};
pub use dialer::Dialer;
pub use error::UpstreamError;
pub use resolve::{local_kind, AddressPolicy, Resolver};
pub use transport::{Transport, TransportBody};

use std::sync::Arc;
use std::time::Duration;

/// Settings of the way out.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Fixed addresses for some hosts (`host:port` → addresses), consulted
    /// before DNS, like curl's `--resolve`.
    pub resolver: Resolver,
    /// Which hosts may resolve to loopback, private or link-local addresses.
    pub policy: AddressPolicy,
    /// How long a TCP connect may take.
    pub connect_timeout: Duration,
    /// How long an idle pooled connection is kept.
    pub pool_idle_timeout: Duration,
    /// How long an upstream may take to send an answer's head.
    pub head_timeout: Duration,
    /// The offline switch (shared with whoever changes the mode).
    pub switch: offline::Switch,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            resolver: Resolver::default(),
            policy: AddressPolicy::default(),
            connect_timeout: Duration::from_secs(10),
            pool_idle_timeout: Duration::from_secs(60),
            head_timeout: Duration::from_secs(60),
            switch: offline::Switch::default(),
        }
    }
}

/// The transport and the dialer, built together so they share one policy
/// and one set of counters.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// All upstream HTTP.
    pub transport: Transport,
    /// All CONNECT tunnels.
    pub dialer: Dialer,
    /// What both have done.
    pub counters: Arc<Counters>,
    /// The offline switch both consult.
    pub switch: offline::Switch,
}

impl Upstream {
    /// Builds the way out.
    pub fn new(config: UpstreamConfig) -> Self {
        let counters = Arc::new(Counters::default());
        let connector =
            connect::Connector::new(config.resolver, config.policy, config.connect_timeout, Arc::clone(&counters));
        let transport = Transport::new(
            connector.clone(),
            config.pool_idle_timeout,
            config.head_timeout,
            config.switch.clone(),
            Arc::clone(&counters),
        );
        let dialer = Dialer::new(connector, config.switch.clone(), Arc::clone(&counters));
        Upstream { transport, dialer, counters, switch: config.switch }
    }
}
