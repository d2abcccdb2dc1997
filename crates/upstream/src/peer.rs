//! Requests to the other nodes of a cluster. Each goes to the peer's own
//! address (its `peer_url`), whatever its target names: a request through
//! a peer as a forward proxy carries an absolute URI that the peer goes to,
//! never this node. Every connection is the one connector's: the address
//! policy (a peer is trusted on its own origin, and only it), the connect
//! timeout and keepalive, counted as peer traffic.
//!
//! The offline switch does not apply: a peer is no upstream, and a node
//! offline on its own asks its peers precisely because it is.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::connect::{Connector, Keepalive, Security};
use crate::counters::{Counters, UpstreamCounter};
use crate::error::UpstreamError;
use crate::network::Network;
use crate::resolve::{host_port, AddressPolicy, Resolver};
use crate::target::FixedTarget;

/// A client of one peer.
type PeerConnection = legacy::Client<FixedTarget, Full<Bytes>>;

/// Makes and keeps a client per peer, sharing the resolver and counters.
#[derive(Debug, Clone)]
pub struct PeerClient {
    resolver: Resolver,
    network: Network,
    connect: Duration,
    keepalive: Keepalive,
    pool_idle: Duration,
    counters: Arc<Counters>,
    peers: Arc<Mutex<HashMap<String, (String, PeerConnection)>>>,
}

impl PeerClient {
    pub(crate) fn new(
        resolver: Resolver,
        network: Network,
        timeouts: crate::Timeouts,
        keepalive: Keepalive,
        counters: Arc<Counters>,
    ) -> Self {
        PeerClient {
            resolver,
            network,
            connect: timeouts.connect,
            keepalive,
            pool_idle: timeouts.pool_idle,
            counters,
            peers: Arc::default(),
        }
    }

    /// Sends `request` to the peer at `peer_url` (`http://host:port`): an
    /// origin-form target (`/path?query`) on the peer, an absolute one
    /// through it as a forward proxy. The answer's head; its body still
    /// to be read.
    pub async fn send(
        &self,
        peer_url: &str,
        mut request: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<Incoming>, UpstreamError> {
        let (base, client) = self.client_of(peer_url)?;
        if request.uri().scheme().is_none() {
            let target = format!("{base}{}", request.uri().path_and_query().map_or("/", |p| p.as_str()));
            *request.uri_mut() = target
                .parse()
                .map_err(|_| UpstreamError::BadTarget { uri: target.clone(), reason: "not a valid URL" })?;
        }
        self.counters.increment(UpstreamCounter::PeerRequests);
        let host = base.clone();
        client.request(request).await.map_err(|error| crate::error::from_client(host, error))
    }

    /// The client of the peer at `peer_url`, and the peer's base URL
    /// (`scheme://host:port`), made on first use.
    fn client_of(&self, peer_url: &str) -> Result<(String, PeerConnection), UpstreamError> {
        let mut peers = self.peers.lock();
        if let Some(found) = peers.get(peer_url) {
            return Ok(found.clone());
        }
        let uri: http::Uri = peer_url
            .parse()
            .map_err(|_| UpstreamError::BadTarget { uri: peer_url.to_string(), reason: "not a URL" })?;
        let (host, port) = host_port(&uri)?;
        let security = Security::of(&uri);
        let mut policy = AddressPolicy::default();
        policy.trust(&host, port);
        let connector = Connector::new(
            self.resolver.clone(),
            policy,
            self.connect,
            self.keepalive,
            Arc::clone(&self.counters),
            UpstreamCounter::PeerConnections,
            self.network.clone(),
        );
        let scheme = if security == Security::Tls { "https" } else { "http" };
        let base = match host.contains(':') {
            true => format!("{scheme}://[{host}]:{port}"),
            false => format!("{scheme}://{host}:{port}"),
        };
        let target = FixedTarget { connector, host, port, security };
        #[allow(clippy::disallowed_methods)] // the client of the cluster's peers, inside the one way out
        let mut builder = legacy::Client::builder(TokioExecutor::new());
        let client = builder.pool_idle_timeout(self.pool_idle).pool_timer(TokioTimer::new()).build(target);
        peers.insert(peer_url.to_string(), (base.clone(), client.clone()));
        Ok((base, client))
    }
}
