//! A misbehaving HTTP/1.1 upstream, for testing how a proxy manages its
//! upstream connections: on `127.0.0.1:0`, or on byte streams handed to it
//! (the connections of an in-memory network).
//!
//! [`ChaosUpstream`] owns the wire. It is a small hand-rolled HTTP/1.1 server
//! on raw tokio streams rather than hyper, so every fault is exact: which
//! bytes go out, when the connection closes and whether with FIN or RST, and
//! whether a kept-alive connection is ever answered again. It serves
//! in-memory bodies with `Content-Length`, fixed validators and single byte
//! ranges (so a client can resume), switches its [`Behaviour`] at run time
//! for every path or for one path, and counts accepted, open and requesting
//! connections so a test can see what the proxy's pool did.
//!
//! Its connection handling is generic over the stream, so the behaviours
//! mean the same over TCP and over any `AsyncRead + AsyncWrite` stream; only
//! a reset needs TCP (`SO_LINGER` 0). On a handed stream, which has no
//! resets, a reset is an abrupt drop: the client reads end of file in the
//! middle of the message, which an HTTP client reports as an incomplete
//! message, as it does a reset. The streams come over a plain tokio channel,
//! so the testkit needs nothing of the crate whose network makes them.
//!
//! What it does not do: chunked request bodies, multiple ranges, conditional
//! requests other than `If-Range`, or listen on anything but loopback. It is
//! test support, so a malformed request just gets its connection closed.

mod message;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use message::{Entry, Reply, RequestHead};

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
    /// Read the request head, then reset the connection (RST) without a byte;
    /// a handed stream is dropped instead.
    ResetBeforeHeaders,
    /// Send the head (with the full `Content-Length`) and this many body bytes,
    /// wait until the peer has them, then reset the connection (`SO_LINGER` 0);
    /// a handed stream is dropped instead.
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
    /// Answer normally with one more header holding this many bytes.
    HugeHeaders {
        /// The extra header's length.
        bytes: usize,
    },
    /// Declare this `Content-Length` (less than the body) and send the whole
    /// body: what follows the declared length is left on the connection.
    ShortLength {
        /// The declared length.
        declared: u64,
    },
    /// A whole-body answer is reset after `after_bytes`; a range answer (the
    /// resume) names a representation one byte longer in its `Content-Range`.
    CutThenOtherLength {
        /// Body bytes sent before the reset.
        after_bytes: u64,
    },
    /// A whole-body answer is reset after `after_bytes`; a range answer (the
    /// resume) names a range one byte later than the one asked for, and
    /// sends those bytes.
    CutThenWrongRange {
        /// Body bytes sent before the reset.
        after_bytes: u64,
    },
    /// Send the body chunked: `after_bytes` of it in one chunk, then a chunk
    /// size that is not hexadecimal.
    BadChunks {
        /// Body bytes sent before the garbage.
        after_bytes: u64,
    },
    /// Send the body chunked, again and again, without end (until the peer
    /// closes or a gibibyte went out).
    Endless,
    /// Answer with the right length and every byte of the body flipped.
    WrongBytes,
    /// As [`Behaviour::WrongBytes`], all but the last byte at once and the
    /// last one after `delay`: a client of a proxy sees the answer begin
    /// before anything could know it is wrong.
    LateWrongBytes {
        /// The pause before the last byte.
        delay: Duration,
    },
    /// Answer with the body gzipped and `Content-Encoding: gzip`, whatever
    /// the request accepts.
    Gzipped,
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
    /// Connections accepted.
    accepted: AtomicU64,
    /// Connections accepted and not yet closed by either side.
    open: AtomicU64,
}

impl Shared {
    fn behaviour_for(&self, path: &str) -> Behaviour {
        let per_path = self.path_behaviours.lock().get(path).cloned();
        per_path.unwrap_or_else(|| self.behaviour.lock().clone())
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
    /// Where it listens (always 127.0.0.1), or where the network that hands
    /// it streams routes to it.
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
        let accept = tokio::spawn(accept_tcp(listener, Arc::clone(&shared)));
        ChaosUpstream { addr, shared, accept }
    }

    /// Starts serving the streams that arrive on `incoming`, each a
    /// connection (the listener of an in-memory network), instead of
    /// listening on TCP; `addr` is where that network routes to it, for
    /// [`addr`](Self::addr) and [`url`](Self::url). Serving nothing,
    /// behaving [`Behaviour::Ok`].
    ///
    /// Must be called inside a tokio runtime, which then runs the server.
    pub fn serve_streams<S>(addr: SocketAddr, incoming: mpsc::UnboundedReceiver<S>) -> ChaosUpstream
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept_streams(incoming, Arc::clone(&shared)));
        ChaosUpstream { addr, shared, accept }
    }

    /// The address it listens on (or is reached at, on handed streams).
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
        self.shared.entries.lock().insert(path.to_owned(), Entry::new(body.into()));
    }

    /// Sets the behaviour for every path without one of its own, from the
    /// next request head on (a response already under way is not changed).
    pub fn set_behaviour(&self, behaviour: Behaviour) {
        *self.shared.behaviour.lock() = behaviour;
    }

    /// Sets the behaviour for requests to exactly `path` (query ignored),
    /// overriding [`ChaosUpstream::set_behaviour`] there.
    pub fn set_path_behaviour(&self, path: &str, behaviour: Behaviour) {
        self.shared.path_behaviours.lock().insert(path.to_owned(), behaviour);
    }

    /// Removes the behaviour of `path`, which then follows the global one.
    pub fn clear_path_behaviour(&self, path: &str) {
        self.shared.path_behaviours.lock().remove(path);
    }

    /// Request heads received (whether answered or not).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Request heads received for exactly `path` (query ignored).
    pub fn requests_for(&self, path: &str) -> u64 {
        self.shared.per_path.lock().get(path).copied().unwrap_or(0)
    }

    /// Connections accepted.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections currently open: accepted and closed by neither side.
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
        self.shared.per_path.lock().clear();
    }
}

impl Drop for ChaosUpstream {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Accepts TCP connections until aborted; aborting it drops the `JoinSet`
/// and with it every connection task and socket.
async fn accept_tcp(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok((stream, _peer)) = listener.accept().await else {
            // Out of descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        admit(&mut connections, &shared, |shared| serve_tcp(stream, shared));
    }
}

/// Takes the streams of `incoming` as connections until aborted, like
/// [`accept_tcp`]. When the sending network is gone, the connections
/// already taken are still served.
async fn accept_streams<S>(mut incoming: mpsc::UnboundedReceiver<S>, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut connections = JoinSet::new();
    while let Some(stream) = incoming.recv().await {
        while connections.try_join_next().is_some() {}
        admit(&mut connections, &shared, |shared| serve_stream(stream, shared));
    }
    std::future::pending::<()>().await;
}

/// Counts a new connection and spawns `serve` for it.
fn admit<Serving>(connections: &mut JoinSet<()>, shared: &Arc<Shared>, serve: impl FnOnce(Arc<Shared>) -> Serving)
where
    Serving: Future<Output = ()> + Send + 'static,
{
    shared.accepted.fetch_add(1, Ordering::SeqCst);
    shared.open.fetch_add(1, Ordering::SeqCst);
    // Made here, not in the task, so a task aborted before its first poll
    // still gives its count back.
    let open = OpenGuard(Arc::clone(shared));
    let serving = serve(Arc::clone(shared));
    connections.spawn(async move {
        serving.await;
        drop(open);
    });
}

/// How a connection ends once the server stops answering on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// A clean close: the peer reads end of file.
    Close,
    /// An abrupt end, a TCP reset where the stream has one.
    Reset,
}

/// What becomes of a connection after one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// It may carry another request.
    KeepOpen,
    /// The server ends it.
    End(Ending),
}

/// Serves a TCP connection, ending a reset with `SO_LINGER` 0 once the
/// kernel has delivered what was sent.
async fn serve_tcp(mut stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    if serve_connection(&mut stream, &shared).await == Ending::Reset {
        #[cfg(target_os = "linux")]
        wait_until_sent(&stream).await;
        let _ = stream.set_zero_linger();
    }
}

/// Serves a handed stream: a reset is dropping it at once, which is as
/// abrupt as a stream without resets gets.
async fn serve_stream<S>(mut stream: S, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    serve_connection(&mut stream, &shared).await;
}

/// Answers requests on one connection, each as its behaviour says, until
/// either side closes it; says how the server's side ends.
async fn serve_connection<S>(stream: &mut S, shared: &Shared) -> Ending
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = Vec::new();
    let mut reused = false;
    while let Some(req) = read_head(stream, &mut buf).await {
        shared.requests.fetch_add(1, Ordering::SeqCst);
        *shared.per_path.lock().entry(req.path.clone()).or_default() += 1;
        let behaviour = shared.behaviour_for(&req.path);
        if reused && behaviour == Behaviour::DropReusedConnections {
            return Ending::Close;
        }
        let reply = match &behaviour {
            Behaviour::Status { code, retry_after } => Reply::status(*code, retry_after.as_deref()),
            _ => message::respond(&shared.entries.lock(), &req),
        };
        let reply = lie_in_the_head(&behaviour, reply, &shared.entries.lock(), &req);
        let head = reply.head(req.keep_alive);
        let body = if req.method == "HEAD" { Bytes::new() } else { reply.body };
        match deliver(stream, behaviour, &head, body).await {
            Ok(After::KeepOpen) if req.keep_alive => reused = true,
            Ok(After::End(ending)) => return ending,
            Ok(After::KeepOpen) | Err(_) => return Ending::Close,
        }
    }
    Ending::Close
}

/// The head's lies of `behaviour`, told in `reply`.
fn lie_in_the_head(
    behaviour: &Behaviour,
    mut reply: Reply,
    entries: &HashMap<String, Entry>,
    req: &RequestHead,
) -> Reply {
    match behaviour {
        Behaviour::HugeHeaders { bytes } => reply.add_header("X-Padding", "a".repeat(*bytes)),
        Behaviour::ShortLength { declared } => reply.declare_length(*declared),
        Behaviour::CutThenOtherLength { .. } => reply.misstate_total(),
        Behaviour::CutThenWrongRange { .. } => reply.shift_range(entries, req),
        Behaviour::BadChunks { .. } | Behaviour::Endless => reply.chunked(),
        Behaviour::WrongBytes | Behaviour::LateWrongBytes { .. } => reply.flip_bytes(),
        Behaviour::Gzipped => reply.gzip(),
        _ => {}
    }
    reply
}

/// Sends one answer as `behaviour` says.
async fn deliver<S>(stream: &mut S, behaviour: Behaviour, head: &[u8], body: Bytes) -> io::Result<After>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let prefix = |n: u64| body.slice(..body.len().min(usize::try_from(n).unwrap_or(usize::MAX)));
    match behaviour {
        Behaviour::CloseBeforeHeaders => return Ok(After::End(Ending::Close)),
        Behaviour::ResetBeforeHeaders => return Ok(After::End(Ending::Reset)),
        Behaviour::Delay(pause) => {
            tokio::time::sleep(pause).await;
            send(stream, head, &body).await?;
        }
        Behaviour::ResetMidBody { after_bytes } => {
            send(stream, head, &prefix(after_bytes)).await?;
            return Ok(After::End(Ending::Reset));
        }
        Behaviour::BlackHole => {
            drain(stream).await;
            return Ok(After::End(Ending::Close));
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
            return Ok(After::End(Ending::Close));
        }
        Behaviour::CutThenOtherLength { after_bytes } | Behaviour::CutThenWrongRange { after_bytes }
            if !is_partial(head) =>
        {
            send(stream, head, &prefix(after_bytes)).await?;
            return Ok(After::End(Ending::Reset));
        }
        Behaviour::LateWrongBytes { delay } => {
            let last = body.len().saturating_sub(1);
            send(stream, head, &body.slice(..last)).await?;
            tokio::time::sleep(delay).await;
            stream.write_all(&body[last..]).await?;
        }
        Behaviour::BadChunks { after_bytes } => {
            stream.write_all(head).await?;
            let piece = prefix(after_bytes);
            stream.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await?;
            stream.write_all(&piece).await?;
            stream.write_all(b"\r\nzz-not-a-size\r\n").await?;
            return Ok(After::End(Ending::Close));
        }
        Behaviour::Endless => {
            stream.write_all(head).await?;
            let piece = if body.is_empty() { Bytes::from_static(b"endless") } else { body };
            let mut sent = 0u64;
            while sent < 1 << 30 {
                stream.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await?;
                stream.write_all(&piece).await?;
                stream.write_all(b"\r\n").await?;
                sent += piece.len() as u64;
            }
            return Ok(After::End(Ending::Close));
        }
        Behaviour::Ok
        | Behaviour::Status { .. }
        | Behaviour::DropReusedConnections
        | Behaviour::HugeHeaders { .. }
        | Behaviour::ShortLength { .. }
        | Behaviour::CutThenOtherLength { .. }
        | Behaviour::CutThenWrongRange { .. }
        | Behaviour::WrongBytes
        | Behaviour::Gzipped => {
            send(stream, head, &body).await?;
        }
    }
    Ok(After::KeepOpen)
}

/// Whether `head` is a `206`'s.
fn is_partial(head: &[u8]) -> bool {
    head.starts_with(b"HTTP/1.1 206")
}

async fn send<S: AsyncWrite + Unpin>(stream: &mut S, head: &[u8], body: &[u8]) -> io::Result<()> {
    stream.write_all(head).await?;
    stream.write_all(body).await
}

/// Reads and discards until the peer closes (or errors).
async fn drain<S: AsyncRead + Unpin>(stream: &mut S) {
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

/// Reads the next request head and skips its `Content-Length` body, keeping
/// pipelined bytes in `buf`; `None` on EOF, a read error or a malformed head.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> Option<RequestHead> {
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if buf.len() > MAX_HEAD_BYTES || stream.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    };
    let (head, body_len) = message::parse_head(std::str::from_utf8(&buf[..end]).ok()?)?;
    buf.drain(..end + 4);
    while buf.len() < body_len {
        if stream.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
    buf.drain(..body_len);
    Some(head)
}
