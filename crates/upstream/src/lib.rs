//! The one way out: every byte pkgproxy sends upstream leaves through here.
//!
//! [`Transport`] carries all upstream HTTP and [`Dialer`] opens every CONNECT
//! tunnel; both resolve names and open sockets through the private
//! [`connect`] step, which applies the address policy (no loopback, private
//! or link-local targets unless the host is trusted) and counts what it does.
//! The sockets are the system's, unless a test hands in a [`Network`] of
//! its own (an in-memory one), which swaps the byte pipe and nothing else.
//! Nothing else in the program opens a network connection to an upstream
//! (clippy's `disallowed-methods` enforces it outside this crate): the one
//! other, named way out is the cluster's bucket client, to the endpoint
//! `[cluster]` names. So the offline switch, the per-host breakers and the
//! upstream pools live in exactly two places.

// One call is unsafe by its nature: handing the route watch's netlink
// socket to tokio's reactor (`offline::auto::watch`), allowed there with its
// SAFETY comment; nothing else may be.
#![deny(unsafe_code)]

mod connect;
mod counters;
mod dialer;
mod error;
mod io;
mod network;
pub mod offline;
pub mod peer;
pub mod pool;
pub mod proxy;
mod resolve;
pub mod shadow;
mod target;
mod tls;
mod transport;
pub mod userinfo;

pub use connect::Keepalive;
pub use counters::{Counters, UpstreamCounter};
pub use dialer::Dialer;
pub use error::UpstreamError;
pub use network::{ListenError, MemoryListener, MemoryNetwork, Network};
pub use peer::PeerClient;
pub use pool::{Payload, Penalties, Pool, PoolAnswer, PoolBody, PoolReport, PoolRequest, Streamed};
pub use resolve::{AddressPolicy, Resolver};
pub use transport::Transport;

use std::sync::Arc;
use std::time::Duration;

/// The time limits of upstream requests (see [`pool`] for how they apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening a connection; its TLS handshake, if any, gets as long again.
    pub connect: Duration,
    /// An attempt on a healthy instance, from its start to the answer head.
    pub first_byte: Duration,
    /// An attempt on a penalised instance (the failing state).
    pub retry: Duration,
    /// All attempts of one request together (its body excepted).
    pub deadline: Duration,
    /// A body sending nothing.
    pub body_idle: Duration,
    /// An idle pooled connection before it is closed.
    pub pool_idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(2),
            first_byte: Duration::from_secs(2),
            retry: Duration::from_secs(10),
            deadline: Duration::from_secs(30),
            body_idle: Duration::from_secs(60),
            pool_idle: Duration::from_secs(60),
        }
    }
}

/// How pools behave.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PoolSettings {
    /// Time limits.
    pub timeouts: Timeouts,
    /// How long a failed instance stays out.
    pub penalties: Penalties,
    /// Seeds the pools' randomness (tests); `None`: seeded from the system.
    pub seed: Option<u64>,
}

/// Settings of the way out.
#[derive(Debug, Clone, Default)]
pub struct UpstreamConfig {
    /// Fixed addresses for some hosts (`host:port` → addresses), consulted
    /// before DNS, like curl's `--resolve`.
    pub resolver: Resolver,
    /// Which hosts may resolve to loopback, private or link-local addresses.
    pub policy: AddressPolicy,
    /// How pools behave.
    pub pools: PoolSettings,
    /// TCP keepalive of upstream connections.
    pub keepalive: Keepalive,
    /// The offline switch (shared with whoever changes the mode).
    pub switch: offline::Switch,
    /// The HTTP proxy upstream requests go through, if any (a parent
    /// pkgproxy, a corporate proxy).
    pub proxy: proxy::UpstreamProxy,
}

/// The transport and the dialer, built together so they share one policy
/// and one set of counters.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// All upstream HTTP.
    pub transport: Transport,
    /// All CONNECT tunnels.
    pub dialer: Dialer,
    /// What the transport, the dialer and the shadow client have done.
    pub counters: Arc<Counters>,
    /// The offline switch both consult.
    pub switch: offline::Switch,
    /// Where copies of requests go (the mirror feature), counted apart.
    pub shadow_client: shadow::ShadowClient,
    /// The other nodes of a cluster, each on its own address only.
    pub peers: peer::PeerClient,
    /// The pins every connector resolves with (shared with theirs).
    resolver: Resolver,
    /// What every connector may reach (shared with theirs).
    policy: AddressPolicy,
}

impl Upstream {
    /// Builds the way out over the system's network.
    pub fn new(config: UpstreamConfig) -> Self {
        Upstream::with_network(config, Network::System)
    }

    /// Builds the way out over `network`: a test's memory network, so that
    /// nothing waits on a socket. It is an argument rather than a field of
    /// [`UpstreamConfig`] because a daemon has no choice to make: only tests
    /// ever pass anything but [`Network::System`].
    pub fn with_network(config: UpstreamConfig, network: Network) -> Self {
        let counters = Arc::new(Counters::default());
        let timeouts = config.pools.timeouts;
        let shadow_connector = connect::Connector::new(
            config.resolver.clone(),
            config.policy.clone(),
            timeouts.connect,
            config.keepalive,
            Arc::clone(&counters),
            UpstreamCounter::ShadowConnections,
            network.clone(),
        );
        let shadow_client = shadow::ShadowClient::new(shadow_connector, timeouts.pool_idle, Arc::clone(&counters));
        let peers = peer::PeerClient::new(
            config.resolver.clone(),
            network.clone(),
            timeouts,
            config.keepalive,
            Arc::clone(&counters),
        );
        let (resolver, policy) = (config.resolver.clone(), config.policy.clone());
        let connector = connect::Connector::new(
            config.resolver,
            config.policy,
            timeouts.connect,
            config.keepalive,
            Arc::clone(&counters),
            UpstreamCounter::Connections,
            network,
        )
        .through(config.proxy);
        let transport = Transport::new(connector.clone(), config.pools, config.switch.clone(), Arc::clone(&counters));
        let dialer = Dialer::new(connector, config.switch.clone(), Arc::clone(&counters));
        Upstream { transport, dialer, counters, switch: config.switch, shadow_client, peers, resolver, policy }
    }

    /// Takes `config`'s pinned addresses and trusted hosts, from the next
    /// connection on (a reload). Its timeouts and keepalive are kept: they
    /// are read once, at start.
    pub fn reconfigure(&self, config: &UpstreamConfig) {
        self.resolver.adopt(&config.resolver);
        self.policy.adopt(&config.policy);
    }
}
