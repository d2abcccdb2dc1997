//! A fake upstream origin: a static HTTP/1.1 file server on `127.0.0.1:0`.
//!
//! It owns everything a test needs to stand in for `deb.debian.org` and its
//! kin: serving files from one directory with the validators and ranges real
//! mirrors send (`Last-Modified`, `ETag`, 304, 206, 416), recording every
//! request and every accepted TCP connection so tests can assert on what the
//! proxy asked for, and a few run-time fault switches (a bandwidth cap, a
//! forced status per path, a CDN's habit of compressing text unless asked
//! for the identity).
//!
//! What it must not do: read whole files into memory (bodies are streamed in
//! chunks), let a request path escape the served directory, or listen on
//! anything but loopback. It is test support, so it answers errors with bare
//! status codes and never logs.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use files::{resolve, serve_file};

mod files;

/// The body type of every response the origin sends.
type Body = BoxBody<Bytes, io::Error>;

/// One request as the origin received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The method, e.g. `GET`.
    pub method: String,
    /// Path and query exactly as received, e.g. `/debian/dists/testing/InRelease`
    /// (for an absolute-form request line, only its path and query).
    pub path: String,
    /// Every header in the order received; names are lower case.
    pub headers: Vec<(String, String)>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive), if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn of<B>(req: &Request<B>) -> Self {
        let (method, uri, headers) = (req.method(), req.uri(), req.headers());
        Self::of_head(method, uri, headers)
    }

    /// The request whose head is `parts`.
    pub fn of_parts(parts: &http::request::Parts) -> Self {
        Self::of_head(&parts.method, &parts.uri, &parts.headers)
    }

    fn of_head(method: &Method, uri: &http::Uri, headers: &http::HeaderMap) -> Self {
        let headers = headers
            .iter()
            .map(|(n, v)| {
                let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (n.as_str().to_owned(), value)
            })
            .collect();
        let path = uri.path_and_query().map_or("/", |pq| pq.as_str()).to_owned();
        RecordedRequest { method: method.as_str().to_owned(), path, headers }
    }
}

/// State shared between the [`Origin`] handle and its connection tasks.
struct Shared {
    /// The directory whose files are served.
    root: PathBuf,
    /// Every request received, in arrival order.
    requests: Mutex<Vec<RecordedRequest>>,
    /// TCP connections accepted since start.
    connections: AtomicU64,
    /// Bandwidth cap per response body, in bytes per second.
    rate_limit: Mutex<Option<u64>>,
    /// Forced answers, keyed by exact request path (no query).
    status_overrides: Mutex<HashMap<String, u16>>,
    /// A `Retry-After` value added to forced answers.
    retry_after: Mutex<Option<String>>,
    /// Whether text files are sent gzipped to every request that does not
    /// ask for `Accept-Encoding: identity`.
    compress_text: std::sync::atomic::AtomicBool,
    /// Paths redirected: a request under the first prefix gets a `302` to
    /// the same path under the second (relative or absolute).
    redirect: Mutex<Option<(String, String)>>,
}

impl Shared {
    fn rate_limit(&self) -> Option<u64> {
        *self.rate_limit.lock()
    }

    fn status_override(&self, path: &str) -> Option<u16> {
        self.status_overrides.lock().get(path).copied()
    }
}

/// A running fake upstream serving the files under one directory.
///
/// Dropping it stops accepting and aborts every open connection.
pub struct Origin {
    /// Where it listens (always 127.0.0.1).
    addr: SocketAddr,
    /// State shared with the connection tasks.
    shared: Arc<Shared>,
    /// The accept loop; it owns the connection tasks.
    accept: JoinHandle<()>,
    /// For an origin that speaks TLS: its certificate.
    certificate: Option<crate::tls::SelfSigned>,
}

impl Origin {
    /// As [`Origin::serve`], over TLS with a new self-signed certificate
    /// for 127.0.0.1 (see [`Origin::certificate`]).
    pub async fn serve_tls(root: impl Into<PathBuf>) -> Origin {
        let certificate = crate::tls::SelfSigned::new();
        let mut origin = Self::serve_with(root.into(), Some(certificate.acceptor.clone())).await;
        origin.certificate = Some(certificate);
        origin
    }

    /// The PEM file of a TLS origin's certificate.
    pub fn certificate(&self) -> Option<PathBuf> {
        self.certificate.as_ref().map(crate::tls::SelfSigned::pem)
    }

    /// Starts serving `root` on a fresh port of 127.0.0.1.
    ///
    /// Must be called inside a tokio runtime, which then runs the server.
    pub async fn serve(root: impl Into<PathBuf>) -> Origin {
        Self::serve_with(root.into(), None).await
    }

    async fn serve_with(root: PathBuf, tls: Option<tokio_rustls::TlsAcceptor>) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0 for the fake origin");
        let addr = listener.local_addr().expect("local_addr of the origin");
        let shared = Arc::new(Shared {
            root,
            requests: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
            rate_limit: Mutex::new(None),
            status_overrides: Mutex::new(HashMap::new()),
            retry_after: Mutex::new(None),
            compress_text: Default::default(),
            redirect: Mutex::new(None),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared), tls));
        Origin { addr, shared, accept, certificate: None }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL without a trailing slash, e.g. `http://127.0.0.1:40123`
    /// (`https://` for a TLS origin).
    pub fn url(&self) -> String {
        let scheme = if self.certificate.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The directory it serves.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// Every request received so far (since the last [`Origin::clear_requests`]).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().clone()
    }

    /// The requests whose path contains `needle`.
    pub fn requests_matching(&self, needle: &str) -> Vec<RecordedRequest> {
        let requests = self.shared.requests.lock();
        requests.iter().filter(|r| r.path.contains(needle)).cloned().collect()
    }

    /// How many requests satisfy `pred`.
    pub fn count(&self, pred: impl Fn(&RecordedRequest) -> bool) -> usize {
        self.shared.requests.lock().iter().filter(|r| pred(r)).count()
    }

    /// How many requests had a path containing `needle`.
    pub fn count_path(&self, needle: &str) -> usize {
        self.count(|r| r.path.contains(needle))
    }

    /// Forgets the recorded requests (the connection count is kept).
    pub fn clear_requests(&self) {
        self.shared.requests.lock().clear();
    }

    /// How many TCP connections were accepted since start.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Caps every response body at `bytes_per_second` (`None`: unlimited).
    ///
    /// Takes effect from the next chunk of bodies already being sent. This is
    /// real-time pacing, meant to make downloads take a visible time.
    pub fn set_rate_limit(&self, bytes_per_second: Option<u64>) {
        *self.shared.rate_limit.lock() = bytes_per_second.map(|r| r.max(1));
    }

    /// Adds `Retry-After: value` to every forced answer (`None`: none).
    pub fn set_retry_after(&self, value: Option<&str>) {
        *self.shared.retry_after.lock() = value.map(str::to_owned);
    }

    /// From now on text files (any but archives, packages and images:
    /// `Packages`, `InRelease`, a go module's `.info`) are sent gzipped, with
    /// `Content-Encoding: gzip`, to every request that does not ask for
    /// `Accept-Encoding: identity`, as many CDNs do when nothing is asked.
    pub fn set_compress_text(&self, compress: bool) {
        self.shared.compress_text.store(compress, Ordering::SeqCst);
    }

    /// From now on a request whose path starts with `from` gets a `302`
    /// to the same path with `from` replaced by `to` (`/files/`, or
    /// `http://elsewhere/files/`), as a module proxy sends its clients to
    /// its storage; `None` stops it.
    pub fn set_redirect(&self, prefixes: Option<(&str, &str)>) {
        *self.shared.redirect.lock() = prefixes.map(|(from, to)| (from.to_owned(), to.to_owned()));
    }

    /// Answers requests for exactly `path` (e.g. `/debian/dists/testing/InRelease`,
    /// query ignored) with `status` and an empty body instead of the file;
    /// `None` removes the override. Forced answers carry the `Retry-After` set with
    /// [`Origin::set_retry_after`].
    pub fn set_status_override(&self, path: &str, status: Option<u16>) {
        let mut overrides = self.shared.status_overrides.lock();
        match status {
            Some(code) => overrides.insert(path.to_owned(), code),
            None => overrides.remove(path),
        };
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Accepts connections until aborted; aborting it drops the `JoinSet` and
/// with it every connection task.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, tls: Option<tokio_rustls::TlsAcceptor>) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            Err(_) => {
                // Out of descriptors or similar: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::clone(&shared);
        let _ = stream.set_nodelay(true);
        match tls.clone() {
            None => connections.spawn(serve_connection(stream, shared)),
            Some(tls) => connections.spawn(async move {
                if let Ok(stream) = tls.accept(stream).await {
                    serve_connection(stream, shared).await;
                }
            }),
        };
    }
}

async fn serve_connection<S>(stream: S, shared: Arc<Shared>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(respond(shared, req).await) }
    });
    // Errors here are clients hanging up mid-body, which fault tests do on purpose.
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
}

async fn respond(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    shared.requests.lock().push(RecordedRequest::of(&req));
    let path = req.uri().path();
    if let Some(code) = shared.status_override(path) {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = bare(status);
        if let Some(value) = shared.retry_after.lock().as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let redirected = shared.redirect.lock().as_ref().and_then(|(from, to)| {
        let rest = req.uri().path_and_query()?.as_str().strip_prefix(from.as_str())?;
        Some(format!("{to}{rest}"))
    });
    if let Some(location) = redirected.and_then(|location| HeaderValue::from_str(&location).ok()) {
        let mut response = bare(StatusCode::FOUND);
        response.headers_mut().insert(header::LOCATION, location);
        return response;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = bare(StatusCode::METHOD_NOT_ALLOWED);
        let allow = HeaderValue::from_static("GET, HEAD");
        response.headers_mut().insert(header::ALLOW, allow);
        return response;
    }
    let Some(file_path) = resolve(&shared.root, path) else {
        return bare(StatusCode::NOT_FOUND);
    };
    let head_only = req.method() == Method::HEAD;
    if shared.compress_text.load(Ordering::SeqCst) && files::is_text(&file_path) && !asks_identity(req.headers()) {
        return match tokio::fs::read(&file_path).await {
            Ok(bytes) => gzipped(head_only, &bytes),
            Err(_) => bare(StatusCode::NOT_FOUND),
        };
    }
    match serve_file(&shared, head_only, req.headers(), &file_path).await {
        Ok(response) => response,
        Err(e) if e.kind() == io::ErrorKind::NotFound => bare(StatusCode::NOT_FOUND),
        Err(_) => bare(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

/// Whether a request asks for the identity: `Accept-Encoding: identity`,
/// nothing else.
fn asks_identity(headers: &http::HeaderMap) -> bool {
    let asked = headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok());
    let mut codings = asked.flat_map(|v| v.split(',')).map(|coding| coding.split(';').next().unwrap_or("").trim());
    codings.next().is_some_and(|first| first.eq_ignore_ascii_case("identity")) && codings.next().is_none()
}

/// `bytes` gzipped, as a CDN sends text.
fn gzipped(head_only: bool, bytes: &[u8]) -> Response<Body> {
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gzip, bytes).expect("gzip in memory");
    let compressed = gzip.finish().expect("gzip in memory");
    let length = compressed.len();
    let body = match head_only {
        true => empty_body(),
        false => http_body_util::Full::new(Bytes::from(compressed)).map_err(|never| match never {}).boxed(),
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}

fn empty_body() -> Body {
    Empty::<Bytes>::new().map_err(|never| match never {}).boxed()
}

fn bare(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(empty_body());
    *response.status_mut() = status;
    response
}
