//! The one place a socket to an upstream is opened: resolve, apply the
//! address policy, connect with a timeout, tune the socket, count it.
//! Private to the crate; the transport and the dialer reach it.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use std::sync::atomic::{AtomicU32, Ordering};

use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::counters::Counters;
use crate::error::UpstreamError;
use crate::resolve::{AddressPolicy, Resolver};

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

#[derive(Debug, Clone)]
pub(crate) struct Connector {
    resolver: Arc<Resolver>,
    policy: Arc<AddressPolicy>,
    timeout: Duration,
    keepalive: Keepalive,
    counters: Arc<Counters>,
}

impl Connector {
    pub(crate) fn new(
        resolver: Resolver,
        policy: AddressPolicy,
        timeout: Duration,
        keepalive: Keepalive,
        counters: Arc<Counters>,
    ) -> Self {
        Connector { resolver: Arc::new(resolver), policy: Arc::new(policy), timeout, keepalive, counters }
    }

    /// Opens a TCP connection to `host:port`, trying each allowed address.
    pub(crate) async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        let addresses = self.resolver.resolve(host, port).await?;
        let addresses = self.policy.allowed(host, addresses).inspect_err(|_| self.counters.refusal())?;
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
                    self.counters.connection();
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

/// How many answer heads a pooled connection has carried. hyper-util hands
/// it to every request on the connection (as a connection "extra"), so a
/// request that fails can tell a reused connection, which the upstream may
/// have closed while it sat idle, from a fresh one, which failing says
/// something about the upstream.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnectionUses(Arc<AtomicU32>);

impl ConnectionUses {
    pub(crate) fn answered(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn reused(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

/// An upstream HTTP connection: the socket and its use count.
pub(crate) struct UpstreamIo {
    io: TokioIo<TcpStream>,
    uses: ConnectionUses,
    /// True for a connection to a forward proxy: requests on it are sent
    /// with absolute URIs.
    proxied: bool,
}

impl UpstreamIo {
    pub(crate) fn new(stream: TcpStream, proxied: bool) -> Self {
        UpstreamIo { io: TokioIo::new(stream), uses: ConnectionUses::default(), proxied }
    }
}

impl Connection for UpstreamIo {
    fn connected(&self) -> Connected {
        Connected::new().extra(self.uses.clone()).proxy(self.proxied)
    }
}

impl hyper::rt::Read for UpstreamIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for UpstreamIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// The connector as hyper-util's pooled client calls it.
impl tower_service::Service<http::Uri> for Connector {
    type Response = UpstreamIo;
    type Error = UpstreamError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connector = self.clone();
        Box::pin(async move {
            let (host, port) = host_port(&uri)?;
            let stream = connector.connect(&host, port).await?;
            Ok(UpstreamIo::new(stream, false))
        })
    }
}

/// The host and port a URI names (port defaulting by scheme).
pub(crate) fn host_port(uri: &http::Uri) -> Result<(String, u16), UpstreamError> {
    let bad = |reason| UpstreamError::BadTarget { uri: uri.to_string(), reason };
    let host = uri.host().ok_or_else(|| bad("no host"))?;
    let port = match (uri.port_u16(), uri.scheme_str()) {
        (Some(port), _) => port,
        (None, Some("http")) => 80,
        (None, _) => return Err(bad("only http:// upstreams are supported")),
    };
    if uri.scheme_str() != Some("http") {
        return Err(bad("only http:// upstreams are supported"));
    }
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
        );
        let error = connector.connect("127.0.0.1", 9).await.unwrap_err();
        assert!(error.is_forbidden(), "{error}");
    }
}
