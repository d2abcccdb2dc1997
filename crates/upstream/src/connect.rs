//! The one place a socket to an upstream is opened: resolve, apply the
//! address policy, connect with a timeout, tune the socket, count it, and
//! for an `https://` upstream, shake hands. Private to the crate; the
//! transport, the dialer and the shadow targets reach it.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::TcpStream;

use crate::counters::{Counters, UpstreamCounter};
use crate::error::UpstreamError;
pub(crate) use crate::io::{ConnectionUses, Peer, Stream, UpstreamIo};
use crate::resolve::{AddressPolicy, Resolver};
use crate::tls::Tls;

/// TCP keepalive on upstream connections, so a peer or middlebox that
/// vanished is noticed on an idle pooled connection, and a firewall sees
/// traffic on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub time: Duration,
    /// Time between probes.
    pub interval: Duration,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive { time: Duration::from_secs(30), interval: Duration::from_secs(10) }
    }
}

/// Whether a connection speaks TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Security {
    /// `http://`.
    Plain,
    /// `https://`, verified against the system's roots.
    Tls,
}

impl Security {
    /// TLS for `https://`, plain for anything else.
    pub(crate) fn of(uri: &http::Uri) -> Self {
        match uri.scheme_str() == Some("https") {
            true => Security::Tls,
            false => Security::Plain,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Connector {
    resolver: Arc<Resolver>,
    policy: Arc<AddressPolicy>,
    timeout: Duration,
    keepalive: Keepalive,
    counters: Arc<Counters>,
    /// What each connection opened is counted as (upstream or shadow).
    counted_as: UpstreamCounter,
    tls: Tls,
}

impl Connector {
    pub(crate) fn new(
        resolver: Resolver,
        policy: AddressPolicy,
        timeout: Duration,
        keepalive: Keepalive,
        counters: Arc<Counters>,
        counted_as: UpstreamCounter,
    ) -> Self {
        Connector {
            resolver: Arc::new(resolver),
            policy: Arc::new(policy),
            timeout,
            keepalive,
            counters,
            counted_as,
            tls: Tls::default(),
        }
    }

    /// Opens an HTTP connection to `host:port` for requests addressed to
    /// `peer`.
    pub(crate) async fn open(
        &self,
        host: &str,
        port: u16,
        security: Security,
        peer: Peer,
    ) -> Result<UpstreamIo, UpstreamError> {
        let stream = self.connect(host, port).await?;
        let stream = match security {
            Security::Plain => Stream::Plain(stream),
            Security::Tls => {
                let handshake = self.tls.handshake(host, stream);
                match tokio::time::timeout(self.timeout, handshake).await {
                    Ok(result) => Stream::Tls(Box::new(result?)),
                    Err(_) => {
                        return Err(UpstreamError::ConnectTimeout { host: host.to_string(), after: self.timeout })
                    }
                }
            }
        };
        Ok(UpstreamIo::new(stream, peer))
    }

    /// Opens a TCP connection to `host:port`, trying each allowed address.
    pub(crate) async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        let addresses = self.resolver.resolve(host, port).await?;
        let addresses = self.policy.allowed(host, addresses).inspect_err(|_| {
            self.counters.increment(UpstreamCounter::Refused);
        })?;
        let attempt = self.connect_any(host, &addresses);
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(UpstreamError::ConnectTimeout { host: host.to_string(), after: self.timeout }),
        }
    }

    async fn connect_any(&self, host: &str, addresses: &[SocketAddr]) -> Result<TcpStream, UpstreamError> {
        let mut last = None;
        for address in addresses {
            #[allow(clippy::disallowed_methods)] // the one place upstream sockets are opened
            let attempt = TcpStream::connect(address).await;
            match attempt {
                Ok(stream) => {
                    self.counters.increment(self.counted_as);
                    tune(&stream, self.keepalive);
                    return Ok(stream);
                }
                Err(e) => last = Some(e),
            }
        }
        let source = last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses"));
        Err(UpstreamError::Connect { host: host.to_string(), source })
    }
}

fn tune(stream: &TcpStream, keepalive: Keepalive) {
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new().with_time(keepalive.time).with_interval(keepalive.interval);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive);
}

/// A connection being opened, as hyper-util's clients wait for it.
pub(crate) type Opening = Pin<Box<dyn Future<Output = Result<UpstreamIo, UpstreamError>> + Send>>;

/// The connector as hyper-util's pooled client calls it.
impl tower_service::Service<http::Uri> for Connector {
    type Response = UpstreamIo;
    type Error = UpstreamError;
    type Future = Opening;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connector = self.clone();
        Box::pin(async move {
            let (host, port) = host_port(&uri)?;
            connector.open(&host, port, Security::of(&uri), Peer::Origin).await
        })
    }
}

/// The host and port a URI names (port defaulting by scheme).
pub(crate) fn host_port(uri: &http::Uri) -> Result<(String, u16), UpstreamError> {
    let bad = |reason| UpstreamError::BadTarget { uri: uri.to_string(), reason };
    let host = uri.host().ok_or_else(|| bad("no host"))?;
    let default_port = match uri.scheme_str() {
        Some("http") => 80,
        Some("https") => 443,
        _ => return Err(bad("only http:// and https:// upstreams are supported")),
    };
    let port = uri.port_u16().unwrap_or(default_port);
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn upstream_sockets_have_keepalive_and_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut policy = AddressPolicy::default();
        policy.trust("127.0.0.1");
        let keepalive = Keepalive { time: Duration::from_secs(17), interval: Duration::from_secs(3) };
        let connector = Connector::new(
            Resolver::default(),
            policy,
            Duration::from_secs(2),
            keepalive,
            Arc::new(Counters::default()),
            UpstreamCounter::Connections,
        );
        let stream = connector.connect("127.0.0.1", port).await.unwrap();
        let socket = socket2::SockRef::from(&stream);
        assert!(socket.keepalive().unwrap());
        assert_eq!(socket.keepalive_time().unwrap(), keepalive.time);
        assert_eq!(socket.keepalive_interval().unwrap(), keepalive.interval);
        assert!(stream.nodelay().unwrap());
    }

    #[tokio::test]
    async fn a_refused_local_target_opens_no_socket() {
        let connector = Connector::new(
            Resolver::default(),
            AddressPolicy::default(),
            Duration::from_secs(2),
            Keepalive::default(),
            Arc::new(Counters::default()),
            UpstreamCounter::Connections,
        );
        let error = connector.connect("127.0.0.1", 9).await.unwrap_err();
        assert!(error.is_forbidden(), "{error}");
    }
}
