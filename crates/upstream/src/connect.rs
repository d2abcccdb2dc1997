//! The one place a connection to an upstream is opened: resolve, apply the
//! address policy, connect with a timeout over the [`Network`] (a TCP
//! socket, tuned, or a pipe of the memory network), count it, and for an
//! `https://` upstream, shake hands. Private to the crate; the transport,
//! the dialer and the shadow targets reach it.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::TcpStream;

use crate::counters::{Counters, UpstreamCounter};
use crate::error::UpstreamError;
pub(crate) use crate::io::{ConnectionUses, Peer, Stream, UpstreamIo};
use crate::network::Network;
use crate::proxy::{ProxyAddress, UpstreamProxy};
use crate::resolve::{host_port, AddressPolicy, Resolver};
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

/// What every connection of a connector needs besides its target.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    resolver: Arc<Resolver>,
    policy: Arc<AddressPolicy>,
    /// The limit of a connect, and of a TLS handshake.
    timeout: Duration,
    keepalive: Keepalive,
    counters: Arc<Counters>,
    /// What each connection opened is counted as (upstream or shadow).
    counted_as: UpstreamCounter,
    tls: Tls,
    /// What connections are made of: sockets, or pipes of a memory network.
    network: Network,
    /// The proxy requests go through, if any.
    proxy: Arc<UpstreamProxy>,
}

impl Connector {
    pub(crate) fn new(
        resolver: Resolver,
        policy: AddressPolicy,
        timeout: Duration,
        keepalive: Keepalive,
        counters: Arc<Counters>,
        counted_as: UpstreamCounter,
        network: Network,
    ) -> Self {
        Connector {
            resolver: Arc::new(resolver),
            policy: Arc::new(policy),
            timeout,
            keepalive,
            counters,
            counted_as,
            tls: Tls::default(),
            network,
            proxy: Arc::default(),
        }
    }

    /// The same connector, with upstream requests through `proxy`.
    pub(crate) fn through(mut self, proxy: UpstreamProxy) -> Self {
        self.proxy = Arc::new(proxy);
        self
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
        let addresses = self.allowed_addresses(host, port).await?;
        let opening = self.connect_any(host, &addresses, |address| self.connect_to(address));
        let stream = self.within_timeout(host, opening).await?;
        let stream = match (security, stream) {
            (Security::Plain, stream) => stream,
            (Security::Tls, Stream::Plain(stream)) => {
                let handshake = self.tls.handshake(host, stream);
                Stream::Tls(Box::new(self.within_timeout(host, handshake).await?))
            }
            // A memory pipe: the network has no TLS to offer.
            (Security::Tls, _) => {
                let source = io::Error::new(io::ErrorKind::Unsupported, "the memory network carries plain HTTP only");
                return Err(UpstreamError::Tls { host: host.to_string(), source });
            }
        };
        Ok(UpstreamIo::new(stream, peer))
    }

    /// Whether `host:port` is the proxy in front of the upstreams.
    pub(crate) fn is_proxy(&self, host: &str, port: u16) -> bool {
        self.proxy.hosts_and_ports().any(|proxy| proxy.host.eq_ignore_ascii_case(host) && proxy.port == port)
    }

    /// Opens an HTTP connection for requests to `uri`: to the upstream, or
    /// to the proxy in front of it (in absolute form for `http://`, through
    /// a `CONNECT` tunnel for `https://`).
    pub(crate) async fn open_for(&self, uri: &http::Uri) -> Result<UpstreamIo, UpstreamError> {
        let (host, port) = host_port(uri)?;
        let security = Security::of(uri);
        match (self.proxy.for_host(&host, port, security == Security::Tls), security) {
            (None, _) => self.open(&host, port, security, Peer::Origin).await,
            (Some(proxy), Security::Plain) => {
                self.open(&proxy.host, proxy.port, Security::Plain, Peer::ForwardProxy).await
            }
            (Some(proxy), Security::Tls) => {
                let stream = self.tunnel_through(proxy, &host, port).await?;
                let handshake = self.tls.handshake(&host, stream);
                let stream = Stream::Tls(Box::new(self.within_timeout(&host, handshake).await?));
                Ok(UpstreamIo::new(stream, Peer::Origin))
            }
        }
    }

    /// A tunnel to `host:port` through `proxy`.
    async fn tunnel_through(&self, proxy: &ProxyAddress, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        if let Network::Memory(_) = self.network {
            let source = io::Error::new(io::ErrorKind::Unsupported, "a tunnel needs a TCP socket, not a memory pipe");
            return Err(UpstreamError::Connect { host: host.to_string(), source });
        }
        let addresses = self.allowed_addresses(&proxy.host, proxy.port).await?;
        let opening = async {
            let stream = self.connect_any(&proxy.host, &addresses, |address| self.connect_tcp(address)).await?;
            crate::proxy::tunnel(stream, host, port).await
        };
        self.within_timeout(host, opening).await
    }

    /// Opens a TCP connection to `host:port` for a tunnel, trying each
    /// allowed address, or through the proxy in front of the upstreams. A
    /// tunnel hands its client a socket, so over the memory network it
    /// fails after the policy, with nothing opened.
    pub(crate) async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        if let Some(proxy) = self.proxy.for_host(host, port, true) {
            return self.tunnel_through(proxy, host, port).await;
        }
        let addresses = self.allowed_addresses(host, port).await?;
        if let Network::Memory(_) = self.network {
            let source = io::Error::new(io::ErrorKind::Unsupported, "a tunnel needs a TCP socket, not a memory pipe");
            return Err(UpstreamError::Connect { host: host.to_string(), source });
        }
        let opening = self.connect_any(host, &addresses, |address| self.connect_tcp(address));
        self.within_timeout(host, opening).await
    }

    /// The addresses of `host:port` the policy lets a connection go to;
    /// a refusal is counted.
    async fn allowed_addresses(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, UpstreamError> {
        let addresses = self.resolver.resolve(host, port).await?;
        self.policy.allowed(host, port, addresses).inspect_err(|_| {
            self.counters.increment(UpstreamCounter::Refused);
        })
    }

    /// `step`, failed with [`UpstreamError::ConnectTimeout`] when it takes
    /// longer than the connect timeout.
    async fn within_timeout<T>(
        &self,
        host: &str,
        step: impl Future<Output = Result<T, UpstreamError>>,
    ) -> Result<T, UpstreamError> {
        match tokio::time::timeout(self.timeout, step).await {
            Ok(result) => result,
            Err(_) => Err(UpstreamError::ConnectTimeout { host: host.to_string(), after: self.timeout }),
        }
    }

    /// The first connection `connect` makes to one of `addresses`, tried
    /// in order; counted.
    async fn connect_any<S, Connecting>(
        &self,
        host: &str,
        addresses: &[SocketAddr],
        connect: impl Fn(SocketAddr) -> Connecting,
    ) -> Result<S, UpstreamError>
    where
        Connecting: Future<Output = io::Result<S>>,
    {
        let mut last = None;
        for &address in addresses {
            match connect(address).await {
                Ok(stream) => {
                    self.counters.increment(self.counted_as);
                    return Ok(stream);
                }
                Err(e) => last = Some(e),
            }
        }
        let source = last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no addresses"));
        Err(UpstreamError::Connect { host: host.to_string(), source })
    }

    /// One connection to `address` over the network: a TCP socket, or a
    /// memory pipe.
    async fn connect_to(&self, address: SocketAddr) -> io::Result<Stream> {
        match &self.network {
            Network::System => self.connect_tcp(address).await.map(Stream::Plain),
            Network::Memory(memory) => memory.connect(address).map(Stream::Memory),
        }
    }

    /// A tuned TCP socket to `address`.
    async fn connect_tcp(&self, address: SocketAddr) -> io::Result<TcpStream> {
        #[allow(clippy::disallowed_methods)] // the one place upstream sockets are opened
        let stream = TcpStream::connect(address).await?;
        tune(&stream, self.keepalive);
        Ok(stream)
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
        Box::pin(async move { connector.open_for(&uri).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::MemoryNetwork;

    /// A proxy that answers one `CONNECT` with `answer`, then echoes; what
    /// it was asked comes out of the channel.
    async fn fake_proxy(answer: &'static str) -> (u16, tokio::sync::oneshot::Receiver<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (asked, heard) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap() == 1 {
                head.push(byte[0]);
            }
            let _ = asked.send(String::from_utf8_lossy(&head).into_owned());
            stream.write_all(answer.as_bytes()).await.unwrap();
            let mut buf = [0u8; 64];
            while let Ok(n @ 1..) = stream.read(&mut buf).await {
                stream.write_all(&buf[..n]).await.unwrap();
            }
        });
        (port, heard)
    }

    fn through_proxy(port: u16) -> Connector {
        let mut policy = AddressPolicy::default();
        policy.trust("127.0.0.1", port);
        let proxy = UpstreamProxy::all(ProxyAddress { host: "127.0.0.1".into(), port });
        Connector::new(
            Resolver::default(),
            policy,
            Duration::from_secs(2),
            Keepalive::default(),
            Arc::new(Counters::default()),
            UpstreamCounter::Connections,
            Network::System,
        )
        .through(proxy)
    }

    #[tokio::test]
    async fn a_tunnel_goes_through_the_upstream_proxy_with_connect_and_a_refusal_is_an_error() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (port, heard) = fake_proxy("HTTP/1.1 200 Connection established\r\n\r\n").await;
        let mut tunnel = through_proxy(port).connect("deb.example.org", 443).await.unwrap();
        assert!(heard.await.unwrap().starts_with("CONNECT deb.example.org:443 HTTP/1.1\r\n"));
        tunnel.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        tunnel.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping", "the stream is the tunnel");

        let (port, _) = fake_proxy("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n").await;
        let error = through_proxy(port).connect("deb.example.org", 443).await.unwrap_err();
        assert!(error.to_string().contains("403") || format!("{error:?}").contains("403"), "{error:?}");
    }

    #[tokio::test]
    async fn upstream_sockets_have_keepalive_and_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut policy = AddressPolicy::default();
        policy.trust("127.0.0.1", port);
        let keepalive = Keepalive { time: Duration::from_secs(17), interval: Duration::from_secs(3) };
        let connector = Connector::new(
            Resolver::default(),
            policy,
            Duration::from_secs(2),
            keepalive,
            Arc::new(Counters::default()),
            UpstreamCounter::Connections,
            Network::System,
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
            Network::System,
        );
        let error = connector.connect("127.0.0.1", 9).await.unwrap_err();
        assert!(error.is_forbidden(), "{error}");
    }

    fn memory_connector(network: &MemoryNetwork, policy: AddressPolicy, counters: &Arc<Counters>) -> Connector {
        Connector::new(
            Resolver::default(),
            policy,
            Duration::from_secs(2),
            Keepalive::default(),
            Arc::clone(counters),
            UpstreamCounter::Connections,
            Network::Memory(network.clone()),
        )
    }

    #[tokio::test]
    async fn over_the_memory_network_connections_are_counted_and_judged_like_sockets() {
        let network = MemoryNetwork::new();
        let mut listener = network.listen("127.0.0.1:80".parse().unwrap()).unwrap();
        let counters = Arc::new(Counters::default());
        let mut policy = AddressPolicy::default();
        policy.trust("127.0.0.1", 80);
        let trusting = memory_connector(&network, policy, &counters);
        trusting.open("127.0.0.1", 80, Security::Plain, Peer::Origin).await.unwrap();
        assert!(listener.accept().await.is_some(), "the listener got the connection");
        assert_eq!(counters.get(UpstreamCounter::Connections), 1);

        let strict = memory_connector(&network, AddressPolicy::default(), &counters);
        let error = strict.open("127.0.0.1", 80, Security::Plain, Peer::Origin).await.err().unwrap();
        assert!(error.is_forbidden(), "{error}");
        assert_eq!(counters.get(UpstreamCounter::Refused), 1);
        assert_eq!(counters.get(UpstreamCounter::Connections), 1, "the refused target was not connected to");
    }

    #[tokio::test]
    async fn over_the_memory_network_an_address_nobody_listens_on_refuses_the_connection() {
        let network = MemoryNetwork::new();
        let counters = Arc::new(Counters::default());
        let mut policy = AddressPolicy::default();
        policy.trust("127.0.0.1", 80);
        let connector = memory_connector(&network, policy, &counters);
        let error = connector.open("127.0.0.1", 80, Security::Plain, Peer::Origin).await.err().unwrap();
        let UpstreamError::Connect { source, .. } = &error else { panic!("not a connect error: {error}") };
        assert_eq!(source.kind(), io::ErrorKind::ConnectionRefused);
        assert_eq!(counters.get(UpstreamCounter::Connections), 0);
    }

    #[tokio::test]
    async fn the_memory_network_carries_neither_tls_nor_tunnels() {
        let network = MemoryNetwork::new();
        let _listener = network.listen("127.0.0.1:443".parse().unwrap()).unwrap();
        let mut policy = AddressPolicy::default();
        policy.trust("127.0.0.1", 443);
        let connector = memory_connector(&network, policy, &Arc::new(Counters::default()));
        let error = connector.open("127.0.0.1", 443, Security::Tls, Peer::Origin).await.err().unwrap();
        assert!(matches!(&error, UpstreamError::Tls { source, .. } if source.kind() == io::ErrorKind::Unsupported));
        let error = connector.connect("127.0.0.1", 443).await.unwrap_err();
        assert!(matches!(&error, UpstreamError::Connect { source, .. } if source.kind() == io::ErrorKind::Unsupported));
    }
}
