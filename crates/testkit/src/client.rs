//! A minimal HTTP client for tests that talks to pkgproxy as a forward
//! proxy (absolute-form request targets), either through hyper or as raw
//! bytes on a socket when a test needs to send what a well-behaved client
//! would not (`..` segments, pipelined requests).

// Test clients connect to the daemon as apt does; the one-way-out rule is
// about the daemon's own traffic.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An answer read in full.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-case.
    pub headers: http::HeaderMap,
    /// Body (what arrived of it, when it broke off).
    pub body: Bytes,
    /// False when the body broke off (the connection was cut mid-body).
    pub complete: bool,
}

impl Answer {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends `GET url` (or another method) through the proxy at `proxy_addr`
/// with `headers`, returning the streaming answer.
pub async fn proxy_request(
    proxy_addr: &str,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
) -> http::Response<Incoming> {
    let stream = TcpStream::connect(proxy_addr).await.expect("connect to pkgproxy");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    let uri: http::Uri = url.parse().expect("URL");
    let mut request = http::Request::builder().method(method).uri(uri.clone());
    request = request.header("host", uri.authority().expect("absolute URL").as_str());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Empty::<Bytes>::new()).expect("request");
    sender.send_request(request).await.expect("answer")
}

/// Sends `GET path` (origin-form, as to a server, the way the go command
/// asks a module proxy) to `addr` and reads the whole answer.
pub async fn get(addr: &str, path: &str) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("connect to pkgproxy");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    let request = http::Request::get(path).header("host", addr).body(Empty::<Bytes>::new()).expect("request");
    read_answer(sender.send_request(request).await.expect("answer")).await
}

/// As [`get`], for a pkgproxy that may be gone (killed, restarting):
/// `None` when it could not be asked or did not answer.
pub async fn try_get(addr: &str, path: &str) -> Option<Answer> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(connection);
    let request = http::Request::get(path).header("host", addr).body(Empty::<Bytes>::new()).ok()?;
    Some(read_answer(sender.send_request(request).await.ok()?).await)
}

/// Sends `METHOD path` (origin-form) with `headers` and `body` to `addr`
/// and reads the whole answer.
pub async fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("connect to pkgproxy");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    let mut request = http::Request::builder().method(method).uri(path).header("host", addr);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(http_body_util::Full::new(Bytes::copy_from_slice(body))).expect("request");
    read_answer(sender.send_request(request).await.expect("answer")).await
}

/// Sends `GET path` to `addr` over TLS, trusting only the certificate
/// `pem` and asking for the name `server_name`, and reads the answer.
pub async fn tls_get(addr: &str, pem: &str, server_name: &str, path: &str) -> Answer {
    let stream = tls_connect(addr, pem, server_name, &[]).await;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    let request = http::Request::get(path).header("host", server_name).body(Empty::<Bytes>::new()).expect("request");
    read_answer(sender.send_request(request).await.expect("answer")).await
}

/// Writes `raw` to pkgproxy at `addr` over TLS (trusting only the
/// certificate `pem`, asking for `server_name`, offering the ALPN protocols
/// `alpn`) and reads until the connection closes or `timeout` passes: what
/// came back, and the protocol ALPN chose.
pub async fn tls_raw(
    addr: &str,
    pem: &str,
    server_name: &str,
    alpn: &[&str],
    raw: &[u8],
    timeout: Duration,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut stream = tls_connect(addr, pem, server_name, alpn).await;
    let chosen = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    stream.write_all(raw).await.expect("the request written");
    let mut received = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return (received, chosen),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// A TLS connection to pkgproxy at `addr`, trusting only the certificate
/// `pem`, asking for `server_name` and offering the ALPN protocols `alpn`.
async fn tls_connect(
    addr: &str,
    pem: &str,
    server_name: &str,
    alpn: &[&str],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(certificate.expect("a PEM certificate")).expect("a trusted certificate");
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.as_bytes().to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let stream = TcpStream::connect(addr).await.expect("connect to pkgproxy");
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).expect("a server name");
    connector.connect(name, stream).await.expect("a TLS handshake with pkgproxy")
}

/// Sends a request through the proxy and reads the whole answer.
pub async fn proxy_get(proxy_addr: &str, url: &str, headers: &[(&str, &str)]) -> Answer {
    proxy_fetch(proxy_addr, "GET", url, headers).await
}

/// As [`proxy_get`] with any method.
pub async fn proxy_fetch(proxy_addr: &str, method: &str, url: &str, headers: &[(&str, &str)]) -> Answer {
    read_answer(proxy_request(proxy_addr, method, url, headers).await).await
}

/// Reads a whole answer, noting whether its body broke off.
async fn read_answer(response: http::Response<Incoming>) -> Answer {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = response.into_body();
    let mut received = Vec::new();
    let mut complete = true;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => received.extend_from_slice(frame.data_ref().map_or(&[][..], |d| d.as_ref())),
            Err(_) => {
                complete = false;
                break;
            }
        }
    }
    Answer { status, headers, body: Bytes::from(received), complete }
}

/// Writes `raw` to the proxy and reads until the connection closes or
/// `timeout` passes; returns what came back.
pub async fn raw_exchange(proxy_addr: &str, raw: &[u8], timeout: Duration) -> Vec<u8> {
    raw_until_closed(connect(proxy_addr).await, raw, timeout).await.0
}

/// Writes `raw` on `stream` and reads until the connection closes or
/// `timeout` passes: what came back, and whether pkgproxy closed it.
pub async fn raw_until_closed(mut stream: TcpStream, raw: &[u8], timeout: Duration) -> (Vec<u8>, bool) {
    // pkgproxy may answer and close before it read all of `raw`.
    let _ = stream.write_all(raw).await;
    let mut received = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (received, true),
            Err(_) => return (received, false),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// A raw connection to pkgproxy at `addr` from the local address `from`
/// (another loopback address stands for another client).
pub async fn connect_from(from: std::net::IpAddr, addr: &str) -> TcpStream {
    let socket = match from {
        std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .expect("a socket");
    socket.bind(std::net::SocketAddr::new(from, 0)).expect("bind the client's address");
    socket.connect(addr.parse().expect("an address")).await.expect("connect to pkgproxy")
}

/// The status code of the first answer in raw bytes.
pub fn first_status(raw: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(raw);
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// A raw connection to pkgproxy at `addr`, for a test that reads the
/// answer at its own pace (a slow client).
pub async fn connect(addr: &str) -> TcpStream {
    TcpStream::connect(addr).await.expect("connect to pkgproxy")
}
