//! A shadow target for mirror tests, on `127.0.0.1:0`, in clear or over TLS
//! with a self-signed certificate: it records every request it gets
//! (method, request target as received, headers, body), answers with a
//! chosen status or never (a black hole that holds each request until the
//! sender gives up), and counts the requests it holds at one time.

use parking_lot::Mutex;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How the target answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowMode {
    /// With this status and a short body.
    Answer(u16),
    /// Never: the request is held until the sender closes the connection.
    BlackHole,
}

/// A request the target got.
#[derive(Debug, Clone)]
pub struct ShadowHit {
    /// The method.
    pub method: String,
    /// The request target as sent: an absolute URI for a proxy request,
    /// else the path and query.
    pub target: String,
    /// The headers, names lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl ShadowHit {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug)]
struct Shared {
    mode: ShadowMode,
    hits: Mutex<Vec<ShadowHit>>,
    held: AtomicUsize,
    max_held: AtomicUsize,
}

/// Counts a request as held while its answer is pending.
struct Held(Arc<Shared>);

impl Held {
    fn new(shared: &Arc<Shared>) -> Self {
        let now = shared.held.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_held.fetch_max(now, Ordering::SeqCst);
        Held(Arc::clone(shared))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running recording target. Dropping it stops it.
pub struct ShadowRecorder {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
    /// For a TLS target: its certificate.
    certificate: Option<crate::tls::SelfSigned>,
}

impl ShadowRecorder {
    /// Starts a target that behaves as `mode`.
    pub async fn start(mode: ShadowMode) -> ShadowRecorder {
        Self::serve(mode, None).await
    }

    /// Starts an `https://` target with a new self-signed certificate for
    /// 127.0.0.1 (see [`ShadowRecorder::certificate`]).
    pub async fn start_tls(mode: ShadowMode) -> ShadowRecorder {
        let certificate = crate::tls::SelfSigned::new();
        let mut recorder = Self::serve(mode, Some(certificate.acceptor.clone())).await;
        recorder.certificate = Some(certificate);
        recorder
    }

    /// The PEM file of a TLS target's certificate, to trust it (e.g. with
    /// `SSL_CERT_FILE`).
    pub fn certificate(&self) -> Option<std::path::PathBuf> {
        self.certificate.as_ref().map(crate::tls::SelfSigned::pem)
    }

    async fn serve(mode: ShadowMode, tls: Option<tokio_rustls::TlsAcceptor>) -> ShadowRecorder {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let shared =
            Arc::new(Shared { mode, hits: Mutex::default(), held: AtomicUsize::new(0), max_held: AtomicUsize::new(0) });
        let serving = Arc::clone(&shared);
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = Arc::clone(&serving);
                let tls = tls.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| answer(Arc::clone(&shared), request));
                    let builder = http1::Builder::new();
                    match tls {
                        None => drop(builder.serve_connection(TokioIo::new(stream), service).await),
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                            }
                        }
                    }
                });
            }
        });
        ShadowRecorder { addr, shared, accept, certificate: None }
    }

    /// `http://127.0.0.1:PORT`, or `https://` for a TLS target.
    pub fn url(&self) -> String {
        let scheme = if self.certificate.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The requests so far.
    pub fn hits(&self) -> Vec<ShadowHit> {
        self.shared.hits.lock().clone()
    }

    /// How many requests so far.
    pub fn count(&self) -> usize {
        self.shared.hits.lock().len()
    }

    /// Requests held (received, not answered) now.
    pub fn held(&self) -> usize {
        self.shared.held.load(Ordering::SeqCst)
    }

    /// The most requests held at one time.
    pub fn max_held(&self) -> usize {
        self.shared.max_held.load(Ordering::SeqCst)
    }

    /// Waits until `n` requests have arrived; fails the test if they do
    /// not come.
    pub async fn wait_for(&self, n: usize) {
        let arrived = || async { (self.count() >= n).then_some(()) };
        crate::wait::eventually(&format!("{n} requests at the shadow target"), arrived).await;
    }
}

impl Drop for ShadowRecorder {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn answer(
    shared: Arc<Shared>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let held = Held::new(&shared);
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| (name.as_str().to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    let hit = ShadowHit { method: parts.method.to_string(), target: parts.uri.to_string(), headers, body };
    shared.hits.lock().push(hit);
    match shared.mode {
        ShadowMode::Answer(status) => {
            drop(held);
            let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"shadow\n")));
            *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
            Ok(response)
        }
        ShadowMode::BlackHole => {
            let _held = held;
            std::future::pending().await
        }
    }
}
