//! A misbehaving HTTP/1.1 upstream on `127.0.0.1:0`, for testing how a proxy
//! manages its upstream connections.
//!
//! [`ChaosUpstream`] owns the wire. It is a small hand-rolled HTTP/1.1 server
//! on raw tokio sockets rather than hyper, so every fault is exact: which
//! bytes go out, when the socket closes and whether with FIN or RST, and
//! whether a kept-alive connection is ever answered again. It serves
//! in-memory bodies with `Content-Length`, fixed validators and single byte
//! ranges (so a client can resume), switches its [`Behaviour`] at run time
//! for every path or for one path, and counts accepted, open and requesting
//! connections so a test can see what the proxy's pool did.
//!
//! What it does not do: chunked request bodies, multiple ranges, conditional
//! requests other than `If-Range`, or listen on anything but loopback. It is
//! test support, so a malformed request just gets its connection closed.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::StatusCode;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Longest request head accepted; a longer one gets the connection closed.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// How the upstream answers a request (see [`ChaosUpstream::set_behaviour`]).
///
/// "Body bytes" below are those of the response actually chosen: the range for
/// a 206, nothing for a `HEAD` or a 404.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Behaviour {
    /// Answer normally and keep the connection alive.
    #[default]
    Ok,
    /// Answer with an empty body and this status, keeping the connection alive.
    Status {
        /// The status code, e.g. 503.
        code: u16,
        /// A `Retry-After` value to send, e.g. `"7"`.
        retry_after: Option<String>,
    },
    /// Wait this long after reading the request head, then answer normally.
    Delay(Duration),
    /// Read the request head, then close the connection (FIN) without a byte.
    CloseBeforeHeaders,
    /// Read the request head, then reset the connection (RST) without a byte.
    ResetBeforeHeaders,
    /// Send the head (with the full `Content-Length`) and this many body bytes,
    /// wait until the peer has them, then reset the connection (`SO_LINGER` 0).
    ResetMidBody {
        /// Body bytes sent before the reset.
        after_bytes: u64,
    },
    /// Read the request, never answer, keep the socket open until the peer closes.
    BlackHole,
    /// Send the head at once, then the body in pieces of `bytes_per_chunk`
    /// with `interval` before each piece; the body is complete in the end.
    SlowBody {
        /// Size of each piece (0 counts as 1).
        bytes_per_chunk: usize,
        /// Pause before each piece.
        interval: Duration,
    },
    /// Send the head and this many body bytes, then nothing, keeping the socket
    /// open until the peer closes.
    StallBody {
        /// Body bytes sent before the stall.
        after_bytes: u64,
    },
    /// Answer the first request on a connection normally; on any later request
    /// on it, read the head (it is counted) and close without answering.
    DropReusedConnections,
}

/// One served body and its fixed validators.
struct Entry {
    body: Bytes,
    /// A strong, quoted tag from the body's SHA-256.
    etag: String,
    /// The time of [`ChaosUpstream::put`], as an HTTP date.
    last_modified: String,
}

/// State shared between the [`ChaosUpstream`] handle and its connection tasks.
#[derive(Default)]
struct Shared {
    /// Bodies by exact path (no query).
    entries: Mutex<HashMap<String, Entry>>,
    /// Behaviour for paths without their own.
    behaviour: Mutex<Behaviour>,
    /// Behaviours by exact path (no query).
    path_behaviours: Mutex<HashMap<String, Behaviour>>,
    /// Request heads received.
    requests: AtomicU64,
    /// Request heads received, by path (no query).
    per_path: Mutex<HashMap<String, u64>>,
    /// TCP connections accepted.
    accepted: AtomicU64,
    /// TCP connections accepted and not yet closed by either side.
    open: AtomicU64,
}

impl Shared {
    fn behaviour_for(&self, path: &str) -> Behaviour {
        let per_path = self.path_behaviours.lock().unwrap().get(path).cloned();
        per_path.unwrap_or_else(|| self.behaviour.lock().unwrap().clone())
    }
}

/// Decrements the open-connection gauge when its connection task ends.
struct OpenGuard(Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running misbehaving upstream serving in-memory bodies.
///
/// Dropping it stops accepting and closes every open connection.
pub struct ChaosUpstream {
    /// Where it listens (always 127.0.0.1).
    addr: SocketAddr,
    /// State shared with the connection tasks.
    shared: Arc<Shared>,
    /// The accept loop; it owns the connection tasks.
    accept: JoinHandle<()>,
}

impl ChaosUpstream {
    /// Starts on a fresh port of 127.0.0.1, serving nothing, behaving [`Behaviour::Ok`].
    ///
    /// Must be called inside a tokio runtime, which then runs the server.
    pub async fn start() -> ChaosUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0 for the chaos upstream");
        let addr = listener.local_addr().expect("local_addr of the chaos upstream");
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        ChaosUpstream { addr, shared, accept }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL without a trailing slash, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves `body` at exactly `path` (e.g. `/pool/a.deb`; queries are ignored
    /// when matching), replacing any earlier body there. Its `ETag` comes from
    /// the content and its `Last-Modified` is now, both fixed from here on.
    pub fn put(&self, path: &str, body: impl Into<Bytes>) {
        let body = body.into();
        let digest = Sha256::digest(&body);
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let entry = Entry {
            etag: format!("\"{}\"", hex::encode(&digest[..12])),
            last_modified: httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs)),
            body,
        };
        self.shared.entries.lock().unwrap().insert(path.to_owned(), entry);
    }

    /// Sets the behaviour for every path without one of its own, from the
    /// next request head on (a response already under way is not changed).
    pub fn set_behaviour(&self, behaviour: Behaviour) {
        *self.shared.behaviour.lock().unwrap() = behaviour;
    }

    /// Sets the behaviour for requests to exactly `path` (query ignored),
    /// overriding [`ChaosUpstream::set_behaviour`] there.
    pub fn set_path_behaviour(&self, path: &str, behaviour: Behaviour) {
        self.shared.path_behaviours.lock().unwrap().insert(path.to_owned(), behaviour);
    }

    /// Removes the behaviour of `path`, which then follows the global one.
    pub fn clear_path_behaviour(&self, path: &str) {
        self.shared.path_behaviours.lock().unwrap().remove(path);
    }

    /// Request heads received (whether answered or not).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Request heads received for exactly `path` (query ignored).
    pub fn requests_for(&self, path: &str) -> u64 {
        self.shared.per_path.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// TCP connections accepted.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// TCP connections currently open: accepted and closed by neither side.
    ///
    /// The server notices a peer's close by reading EOF (or an error) on every
    /// connection it keeps, including black-holed and stalled ones, so this
    /// drops when a client closes its idle pooled sockets.
    pub fn open_connections(&self) -> u64 {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// Zeroes [`requests`](Self::requests), [`requests_for`](Self::requests_for)
    /// and [`accepted`](Self::accepted); [`open_connections`](Self::open_connections)
    /// is a gauge and is kept.
    pub fn reset_counters(&self) {
        self.shared.requests.store(0, Ordering::SeqCst);
        self.shared.accepted.store(0, Ordering::SeqCst);
        self.shared.per_path.lock().unwrap().clear();
    }
}

impl Drop for ChaosUpstream {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Accepts connections until aborted; aborting it drops the `JoinSet` and
/// with it every connection task and socket.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok((stream, _peer)) = listener.accept().await else {
            // Out of descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        shared.open.fetch_add(1, Ordering::SeqCst);
        // Made here, not in the task, so a task aborted before its first poll
        // still gives its count back.
        let open = OpenGuard(Arc::clone(&shared));
        connections.spawn(async move { serve_connection(stream, &open.0).await });
    }
}

/// Answers requests on one connection, each as its behaviour says, until
/// either side closes it.
async fn serve_connection(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    let mut reused = false;
    while let Some(req) = read_head(&mut stream, &mut buf).await {
        shared.requests.fetch_add(1, Ordering::SeqCst);
        *shared.per_path.lock().unwrap().entry(req.path.clone()).or_default() += 1;
        let behaviour = shared.behaviour_for(&req.path);
        let reply = match &behaviour {
            Behaviour::Status { code, retry_after } => {
                let headers = retry_after.iter().map(|v| ("Retry-After", v.clone())).collect();
                Reply { status: *code, headers, body: Bytes::new() }
            }
            _ => respond(shared, &req),
        };
        let head = reply.head(req.keep_alive);
        let body = if req.method == "HEAD" { Bytes::new() } else { reply.body };
        let drop_reused = reused && behaviour == Behaviour::DropReusedConnections;
        if drop_reused || !matches!(deliver(&mut stream, behaviour, &head, body).await, Ok(true)) || !req.keep_alive {
            return;
        }
        reused = true;
    }
}

/// Sends one answer as `behaviour` says; `Ok(true)` if the connection may
/// carry another request.
async fn deliver(stream: &mut TcpStream, behaviour: Behaviour, head: &[u8], body: Bytes) -> io::Result<bool> {
    let prefix = |n: u64| body.slice(..body.len().min(usize::try_from(n).unwrap_or(usize::MAX)));
    match behaviour {
        Behaviour::CloseBeforeHeaders => return Ok(false),
        Behaviour::ResetBeforeHeaders => {
            stream.set_zero_linger()?;
            return Ok(false);
        }
        Behaviour::Delay(pause) => {
            tokio::time::sleep(pause).await;
            send(stream, head, &body).await?;
        }
        Behaviour::ResetMidBody { after_bytes } => {
            send(stream, head, &prefix(after_bytes)).await?;
            #[cfg(target_os = "linux")]
            wait_until_sent(stream).await;
            stream.set_zero_linger()?;
            return Ok(false);
        }
        Behaviour::BlackHole => {
            drain(stream).await;
            return Ok(false);
        }
        Behaviour::SlowBody { bytes_per_chunk, interval } => {
            stream.write_all(head).await?;
            for piece in body.chunks(bytes_per_chunk.max(1)) {
                tokio::time::sleep(interval).await;
                stream.write_all(piece).await?;
            }
        }
        Behaviour::StallBody { after_bytes } => {
            send(stream, head, &prefix(after_bytes)).await?;
            drain(stream).await;
            return Ok(false);
        }
        Behaviour::Ok | Behaviour::Status { .. } | Behaviour::DropReusedConnections => {
            send(stream, head, &body).await?;
        }
    }
    Ok(true)
}

async fn send(stream: &mut TcpStream, head: &[u8], body: &[u8]) -> io::Result<()> {
    stream.write_all(head).await?;
    stream.write_all(body).await
}

/// Reads and discards until the peer closes (or errors).
async fn drain(stream: &mut TcpStream) {
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// Waits (up to 5 s) until the kernel holds no unsent or unacknowledged
/// bytes, so the reset that follows discards none the peer was meant to get.
#[cfg(target_os = "linux")]
async fn wait_until_sent(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    for _ in 0..5000 {
        let mut queued: libc::c_int = 0;
        // SAFETY: TIOCOUTQ writes one c_int through a pointer to a live local.
        if unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) } != 0 || queued == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The parts of a request head the server acts on.
struct RequestHead {
    method: String,
    /// Path without query (for an absolute-form target, only its path).
    path: String,
    /// Header lines; names are lower case.
    headers: Vec<(String, String)>,
    keep_alive: bool,
}

impl RequestHead {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads the next request head and skips its `Content-Length` body, keeping
/// pipelined bytes in `buf`; `None` on EOF, a read error or a malformed head.
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<RequestHead> {
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if buf.len() > MAX_HEAD_BYTES || stream.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    };
    let (head, body_len) = parse_head(std::str::from_utf8(&buf[..end]).ok()?)?;
    buf.drain(..end + 4);
    while buf.len() < body_len {
        if stream.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
    buf.drain(..body_len);
    Some(head)
}

/// Parses a request head (without its blank line) into the head and its body length.
fn parse_head(text: &str) -> Option<(RequestHead, usize)> {
    let mut lines = text.trim_start_matches("\r\n").split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") {
        return None;
    }
    let headers = lines
        .map(|l| l.split_once(':').map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())))
        .collect::<Option<Vec<_>>>()?;
    let target = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let path = target.split('?').next().unwrap_or("/").to_owned();
    let mut head = RequestHead { method: method.to_owned(), path, headers, keep_alive: version != "HTTP/1.0" };
    if let Some(connection) = head.header("connection").map(str::to_ascii_lowercase) {
        head.keep_alive = connection.contains("keep-alive") || (head.keep_alive && !connection.contains("close"));
    }
    if head.header("transfer-encoding").is_some() {
        return None;
    }
    let body_len = match head.header("content-length") {
        Some(len) => len.parse().ok()?,
        None => 0,
    };
    Some((head, body_len))
}

/// A response before delivery.
struct Reply {
    status: u16,
    /// Headers besides `Content-Length` and `Connection`.
    headers: Vec<(&'static str, String)>,
    body: Bytes,
}

impl Reply {
    fn bare(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), body: Bytes::new() }
    }

    /// The status line and headers, through the blank line.
    fn head(&self, keep_alive: bool) -> Vec<u8> {
        let reason = StatusCode::from_u16(self.status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Unknown");
        let mut head = format!("HTTP/1.1 {} {reason}\r\n", self.status);
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        if !keep_alive {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

/// The normal answer to `req`: the body (or its range), 404 or 405.
fn respond(shared: &Shared, req: &RequestHead) -> Reply {
    if req.method != "GET" && req.method != "HEAD" {
        let mut reply = Reply::bare(405);
        reply.headers.push(("Allow", "GET, HEAD".to_owned()));
        return reply;
    }
    let entries = shared.entries.lock().unwrap();
    let Some(entry) = entries.get(&req.path) else {
        return Reply::bare(404);
    };
    let len = entry.body.len() as u64;
    let mut reply = Reply::bare(200);
    reply.headers.push(("Accept-Ranges", "bytes".to_owned()));
    reply.headers.push(("ETag", entry.etag.clone()));
    reply.headers.push(("Last-Modified", entry.last_modified.clone()));
    let if_range_ok = req.header("if-range").is_none_or(|v| v == entry.etag || v == entry.last_modified);
    match req.header("range").filter(|_| if_range_ok).and_then(|r| parse_range(r, len)) {
        None => reply.body = entry.body.clone(),
        Some(Some((first, last))) => {
            reply.status = 206;
            reply.headers.push(("Content-Range", format!("bytes {first}-{last}/{len}")));
            reply.body = entry.body.slice(first as usize..=last as usize);
        }
        Some(None) => {
            reply.status = 416;
            reply.headers.push(("Content-Range", format!("bytes */{len}")));
        }
    }
    reply
}

/// A single `bytes=` range over `len` bytes: `None` to ignore the header
/// (malformed or several ranges), `Some(None)` if unsatisfiable, else the
/// inclusive first and last byte.
fn parse_range(value: &str, len: u64) -> Option<Option<(u64, u64)>> {
    let spec = value.trim().strip_prefix("bytes=")?;
    let (first, last) = spec.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        let suffix: u64 = last.parse().ok()?;
        return Some((suffix > 0 && len > 0).then(|| (len.saturating_sub(suffix), len - 1)));
    }
    let first: u64 = first.parse().ok()?;
    let last = if last.is_empty() { u64::MAX } else { last.parse().ok()? };
    if last < first {
        return None;
    }
    Some((first < len).then(|| (first, last.min(len - 1))))
}
