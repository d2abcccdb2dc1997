//! A fake upstream origin: a static HTTP/1.1 file server on `127.0.0.1:0`.
//!
//! It owns everything a test needs to stand in for `deb.debian.org` and its
//! kin: serving files from one directory with the validators and ranges real
//! mirrors send (`Last-Modified`, `ETag`, 304, 206, 416), recording every
//! request and every accepted TCP connection so tests can assert on what the
//! proxy asked for, and a few run-time fault switches (a bandwidth cap, a
//! forced status per path).
//!
//! What it must not do: read whole files into memory (bodies are streamed in
//! chunks), let a request path escape the served directory, or listen on
//! anything but loopback. It is test support, so it answers errors with bare
//! status codes and never logs.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fs::Metadata;
use std::io::{self, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use percent_encoding::percent_decode_str;
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The body type of every response the origin sends.
type Body = BoxBody<Bytes, io::Error>;

/// Largest piece of a file read and sent at once.
const CHUNK_BYTES: u64 = 64 * 1024;

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
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn of<B>(req: &Request<B>) -> Self {
        let headers = req
            .headers()
            .iter()
            .map(|(n, v)| {
                let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (n.as_str().to_owned(), value)
            })
            .collect();
        let path = req
            .uri()
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_owned();
        RecordedRequest {
            method: req.method().as_str().to_owned(),
            path,
            headers,
        }
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
}

impl Shared {
    fn rate_limit(&self) -> Option<u64> {
        *self.rate_limit.lock().unwrap()
    }

    fn status_override(&self, path: &str) -> Option<u16> {
        self.status_overrides.lock().unwrap().get(path).copied()
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
}

impl Origin {
    /// Starts serving `root` on a fresh port of 127.0.0.1.
    ///
    /// Must be called inside a tokio runtime, which then runs the server.
    pub async fn serve(root: impl Into<PathBuf>) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0 for the fake origin");
        let addr = listener.local_addr().expect("local_addr of the origin");
        let shared = Arc::new(Shared {
            root: root.into(),
            requests: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
            rate_limit: Mutex::new(None),
            status_overrides: Mutex::new(HashMap::new()),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Origin {
            addr,
            shared,
            accept,
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL without a trailing slash, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The directory it serves.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// Every request received so far (since the last [`Origin::clear_requests`]).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The requests whose path contains `needle`.
    pub fn requests_matching(&self, needle: &str) -> Vec<RecordedRequest> {
        let requests = self.shared.requests.lock().unwrap();
        requests
            .iter()
            .filter(|r| r.path.contains(needle))
            .cloned()
            .collect()
    }

    /// How many requests satisfy `pred`.
    pub fn count(&self, pred: impl Fn(&RecordedRequest) -> bool) -> usize {
        self.shared
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| pred(r))
            .count()
    }

    /// How many requests had a path containing `needle`.
    pub fn count_path(&self, needle: &str) -> usize {
        self.count(|r| r.path.contains(needle))
    }

    /// Forgets the recorded requests (the connection count is kept).
    pub fn clear_requests(&self) {
        self.shared.requests.lock().unwrap().clear();
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
        *self.shared.rate_limit.lock().unwrap() = bytes_per_second.map(|r| r.max(1));
    }

    /// Answers requests for exactly `path` (e.g. `/debian/dists/testing/InRelease`,
    /// query ignored) with `status` and an empty body instead of the file;
    /// `None` removes the override.
    pub fn set_status_override(&self, path: &str, status: Option<u16>) {
        let mut overrides = self.shared.status_overrides.lock().unwrap();
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
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
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
        connections.spawn(serve_connection(stream, Arc::clone(&shared)));
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(respond(shared, req).await) }
    });
    // Errors here are clients hanging up mid-body, which fault tests do on purpose.
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn respond(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    shared.requests.lock().unwrap().push(RecordedRequest::of(&req));
    let path = req.uri().path();
    if let Some(code) = shared.status_override(path) {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return bare(status);
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
    match serve_file(&shared, head_only, req.headers(), &file_path).await {
        Ok(response) => response,
        Err(e) if e.kind() == io::ErrorKind::NotFound => bare(StatusCode::NOT_FOUND),
        Err(_) => bare(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

/// Maps a request path onto a file under `root`; `None` if it tries to
/// climb out with `..` or is not valid percent-encoded UTF-8.
fn resolve(root: &Path, uri_path: &str) -> Option<PathBuf> {
    let decoded = percent_decode_str(uri_path).decode_utf8().ok()?;
    let mut path = root.to_path_buf();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => return None,
            s if s.contains('\0') || s.contains('\\') => return None,
            s => path.push(s),
        }
    }
    Some(path)
}

/// The validators of one file version.
struct Validators {
    /// File length in bytes.
    size: u64,
    /// Modification time truncated to whole seconds, as HTTP dates carry it.
    modified: SystemTime,
    /// A strong entity tag from size and the full-precision mtime, quoted.
    etag: String,
}

impl Validators {
    fn of(meta: &Metadata) -> Self {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .unwrap_or_default();
        Validators {
            size: meta.len(),
            modified: UNIX_EPOCH + Duration::from_secs(mtime.as_secs()),
            etag: format!(
                "\"{:x}-{:x}.{:x}\"",
                meta.len(),
                mtime.as_secs(),
                mtime.subsec_nanos()
            ),
        }
    }

    fn last_modified(&self) -> String {
        httpdate::fmt_http_date(self.modified)
    }
}

async fn serve_file(
    shared: &Arc<Shared>,
    head_only: bool,
    headers: &HeaderMap,
    path: &Path,
) -> io::Result<Response<Body>> {
    let mut file = File::open(path).await?;
    let meta = file.metadata().await?;
    if !meta.is_file() {
        return Ok(bare(StatusCode::NOT_FOUND));
    }
    let v = Validators::of(&meta);
    if is_not_modified(headers, &v) {
        let mut response = bare(StatusCode::NOT_MODIFIED);
        add_validators(response.headers_mut(), &v);
        return Ok(response);
    }
    let range = match header_str(headers, header::RANGE) {
        Some(value) if if_range_allows(headers, &v) => parse_range(value, v.size),
        _ => RangeRequest::Whole,
    };
    let (status, start, len) = match range {
        RangeRequest::Whole => (StatusCode::OK, 0, v.size),
        RangeRequest::Part { first, last } => (StatusCode::PARTIAL_CONTENT, first, last - first + 1),
        RangeRequest::Unsatisfiable => {
            let mut response = bare(StatusCode::RANGE_NOT_SATISFIABLE);
            let value = format!("bytes */{}", v.size);
            response
                .headers_mut()
                .insert(header::CONTENT_RANGE, value.parse().unwrap());
            return Ok(response);
        }
    };
    let body = if head_only || len == 0 {
        empty_body()
    } else {
        file.seek(SeekFrom::Start(start)).await?;
        file_body(Arc::clone(shared), file, len)
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let h = response.headers_mut();
    add_validators(h, &v);
    h.insert(header::CONTENT_LENGTH, len.into());
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let octets = HeaderValue::from_static("application/octet-stream");
    h.insert(header::CONTENT_TYPE, octets);
    if status == StatusCode::PARTIAL_CONTENT {
        let value = format!("bytes {}-{}/{}", start, start + len - 1, v.size);
        h.insert(header::CONTENT_RANGE, value.parse().unwrap());
    }
    Ok(response)
}

fn add_validators(h: &mut HeaderMap, v: &Validators) {
    h.insert(header::ETAG, v.etag.parse().unwrap());
    h.insert(header::LAST_MODIFIED, v.last_modified().parse().unwrap());
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// RFC 9110 13.1.2/13.1.3: `If-None-Match` wins over `If-Modified-Since`.
fn is_not_modified(headers: &HeaderMap, v: &Validators) -> bool {
    if let Some(tags) = header_str(headers, header::IF_NONE_MATCH) {
        return tags.split(',').map(str::trim).any(|tag| {
            // Weak comparison, as If-None-Match asks for.
            tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == v.etag
        });
    }
    match header_str(headers, header::IF_MODIFIED_SINCE).map(httpdate::parse_http_date) {
        Some(Ok(since)) => v.modified <= since,
        _ => false,
    }
}

/// `If-Range` (RFC 9110 13.1.5): the range applies only if the validator
/// still matches; an entity tag compares strongly, a date exactly.
fn if_range_allows(headers: &HeaderMap, v: &Validators) -> bool {
    match header_str(headers, header::IF_RANGE) {
        None => true,
        Some(tag) if tag.starts_with('"') || tag.starts_with("W/") => tag == v.etag,
        Some(date) => httpdate::parse_http_date(date).is_ok_and(|d| d == v.modified),
    }
}

/// What a `Range` header asks of a representation of a given size.
#[derive(Debug, PartialEq, Eq)]
enum RangeRequest {
    /// No usable single byte range: send the whole file with 200.
    Whole,
    /// Send bytes `first..=last` with 206.
    Part {
        /// First byte offset.
        first: u64,
        /// Last byte offset, inclusive, already clamped to the size.
        last: u64,
    },
    /// A valid range that lies beyond the end: 416.
    Unsatisfiable,
}

/// Parses a single `bytes=a-b`, `bytes=a-` or `bytes=-n`. Malformed headers
/// and multi-range requests are ignored (allowed by RFC 9110 14.2).
fn parse_range(value: &str, size: u64) -> RangeRequest {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return RangeRequest::Whole;
    };
    if spec.contains(',') {
        return RangeRequest::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeRequest::Whole;
    };
    let number = |s: &str| -> Option<Option<u64>> {
        let s = s.trim();
        if s.is_empty() {
            Some(None)
        } else if s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().ok().map(Some)
        } else {
            None
        }
    };
    match (number(first), number(last)) {
        (Some(Some(first)), Some(last)) => {
            if last.is_some_and(|last| last < first) {
                RangeRequest::Whole
            } else if first >= size {
                RangeRequest::Unsatisfiable
            } else {
                let last = last.map_or(size - 1, |l| l.min(size - 1));
                RangeRequest::Part { first, last }
            }
        }
        (Some(None), Some(Some(suffix))) => {
            if suffix == 0 || size == 0 {
                RangeRequest::Unsatisfiable
            } else {
                let first = size.saturating_sub(suffix);
                RangeRequest::Part {
                    first,
                    last: size - 1,
                }
            }
        }
        _ => RangeRequest::Whole,
    }
}

fn empty_body() -> Body {
    Empty::<Bytes>::new().map_err(|never| match never {}).boxed()
}

fn bare(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(empty_body());
    *response.status_mut() = status;
    response
}

/// Progress of one streamed body.
struct BodyState {
    /// The open file, positioned at the next byte to send.
    file: File,
    /// Bytes still to send.
    remaining: u64,
    /// Where the rate limit is read before each chunk.
    shared: Arc<Shared>,
}

/// Streams `len` bytes from `file` in chunks. Under a rate limit each chunk
/// is held back for its share of a second, so `n` bytes take `n / rate`.
fn file_body(shared: Arc<Shared>, file: File, len: u64) -> Body {
    let state = BodyState {
        file,
        remaining: len,
        shared,
    };
    let chunks = futures_util::stream::unfold(state, |mut st| async move {
        if st.remaining == 0 {
            return None;
        }
        let rate = st.shared.rate_limit();
        // Under a cap, send about four chunks a second so pacing looks smooth.
        let chunk = rate.map_or(CHUNK_BYTES, |r| (r / 4).clamp(1, CHUNK_BYTES));
        let mut buf = vec![0u8; st.remaining.min(chunk) as usize];
        let item = match st.file.read(&mut buf).await {
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being served",
            )),
            Ok(n) => {
                if let Some(rate) = rate {
                    let share = Duration::from_secs_f64(n as f64 / rate as f64);
                    tokio::time::sleep(share).await;
                }
                buf.truncate(n);
                st.remaining -= n as u64;
                Ok(Frame::data(Bytes::from(buf)))
            }
            Err(e) => Err(e),
        };
        if item.is_err() {
            st.remaining = 0;
        }
        Some((item, st))
    });
    StreamBody::new(chunks).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_range_covers_the_single_range_forms() {
        let part = |first, last| RangeRequest::Part { first, last };
        assert_eq!(parse_range("bytes=0-9", 100), part(0, 9));
        assert_eq!(parse_range("bytes=10-", 100), part(10, 99));
        assert_eq!(parse_range("bytes=-10", 100), part(90, 99));
        assert_eq!(parse_range("bytes=-1000", 100), part(0, 99));
        assert_eq!(parse_range("bytes=90-1000", 100), part(90, 99));
        assert_eq!(parse_range("bytes=100-", 100), RangeRequest::Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), RangeRequest::Unsatisfiable);
        assert_eq!(parse_range("bytes=0-", 0), RangeRequest::Unsatisfiable);
    }

    #[test]
    fn parse_range_ignores_what_it_does_not_support() {
        assert_eq!(parse_range("bytes=5-1", 100), RangeRequest::Whole);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), RangeRequest::Whole);
        assert_eq!(parse_range("items=0-1", 100), RangeRequest::Whole);
        assert_eq!(parse_range("bytes=a-b", 100), RangeRequest::Whole);
        assert_eq!(parse_range("bytes=-", 100), RangeRequest::Whole);
    }

    #[test]
    fn resolve_never_climbs_out_of_root() {
        let root = Path::new("/srv/root");
        assert_eq!(resolve(root, "/a/./b"), Some(root.join("a/b")));
        assert_eq!(resolve(root, "/a/%2e%2e/b"), None);
        assert_eq!(resolve(root, "/../etc/passwd"), None);
        assert_eq!(resolve(root, "/a%2f..%2f..%2fx"), None);
        assert_eq!(resolve(root, "/pkg_1.0%2b1.deb"), Some(root.join("pkg_1.0+1.deb")));
    }
}
