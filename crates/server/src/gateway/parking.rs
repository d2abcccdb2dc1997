//! A client connection that holds no HTTP buffers while it waits for its
//! next request, as nginx frees its request buffers between keep-alive
//! requests. hyper gives each connection an 8 KiB write buffer and an
//! 8 KiB read buffer and keeps both for the connection's life: at 10,000
//! keep-alive connections, hundreds of MiB. So once a connection has
//! answered everything it was asked, its hyper connection is let go
//! without closing the socket (hyper's `graceful_shutdown` and
//! `poll_without_shutdown`), and the socket waits alone for the next
//! request's first bytes, which get a new one. A connection that is busy
//! all the time (a load generator's) thus holds buffers only while a
//! request is read and answered, not while it waits on the network.
//!
//! A new hyper connection for each request costs a few hundredths of the
//! small hits a second, and holding buffers costs nothing worth saving
//! while few connections are open: a connection parks only when the
//! listener is crowded (more than [`CROWDED`] connections open), which
//! bounds what unparked connections hold to a few MiB.
//!
//! The answers keep saying keep-alive: hyper is told to stop only once
//! nothing is being answered, after the last answer's head went out. Bytes
//! hyper read but did not parse (a pipelined request's start) are handed to
//! the next connection. A `CONNECT` is served by a connection that can be
//! upgraded to a tunnel, which then owns the socket.
//!
//! A plain connection may switch to HTTP/2 in clear (`h2c`: prior
//! knowledge or an upgrade); inside TLS, where ALPN chose HTTP/1.1 or
//! nothing, it stays HTTP/1.1 (RFC 9113 §3).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::deadline::ConnectionClock;
use super::rewind::Rewind;
use super::{framing, http2};

/// What one read takes of a request's start: a whole head, most often, so
/// hyper parses it without reading again. It lives on the stack only while
/// the read runs.
const START_READ: usize = 4096;

/// Open connections above which a connection parks after each answer.
pub const CROWDED: usize = 256;

/// Bytes read to tell a `CONNECT` from other methods.
const METHOD_PREFIX: usize = 8;

/// A boxed answer: hyper lets a connection go without closing its socket
/// only if the answer's future can move.
type Answering<B> = Pin<Box<dyn Future<Output = Result<Response<B>, Infallible>> + Send>>;

/// Serves `stream` until the client closes it, its deadlines pass (its
/// reads or writes fail) or `shutdown`, switching to HTTP/2 in clear under
/// `h2c`'s limits when it is offered; returns how many hyper connections
/// served it.
pub async fn serve<S, H, F, B>(
    mut stream: S,
    handler: H,
    clock: Arc<ConnectionClock>,
    crowded: impl Fn() -> bool,
    h2c: Option<http2::Limits>,
    shutdown: CancellationToken,
) -> usize
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let handler = Arc::new(handler);
    let mut unread = Bytes::new();
    let mut runs = 0;
    loop {
        let start = tokio::select! {
            start = next_request_start(&mut stream, unread) => start,
            _ = shutdown.cancelled() => return runs,
        };
        let start = match start {
            Ok(Some(start)) => start,
            Ok(None) => return runs,
            Err(error) => {
                tracing::debug!(%error, "connection ended");
                return runs;
            }
        };
        let service = {
            let handler = Arc::clone(&handler);
            service_fn(move |request| {
                let answer = handler(request);
                Box::pin(async move { Ok::<_, Infallible>(answer.await) }) as Answering<B>
            })
        };
        runs += 1;
        // HTTP/2 boxed, as the tunnel below: its connection's state is
        // kilobytes, and every connection's task would carry room for it.
        if let Some(limits) = h2c.as_ref() {
            if http2::is_preface(&start) {
                let io = Rewind { unread: start, inner: stream };
                Box::pin(http2::serve(io, handler, limits.clone(), shutdown)).await;
                return runs;
            }
            if let Some(upgrade) = asks_for_h2c(&start).then(|| http2::upgrade::upgrade_asked(&start)).flatten() {
                Box::pin(http2::upgrade::upgrade(stream, start, upgrade, handler, limits.clone(), shutdown)).await;
                return runs;
            }
        }
        let io = TokioIo::new(Rewind { unread: start.clone(), inner: stream });
        if start.starts_with(b"CONNECT ") {
            // Boxed, as below: a connection's task stays small.
            let connection = Box::pin(builder().serve_connection(io, service).with_upgrades());
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            return runs;
        }
        let mut connection = Box::new(builder().serve_connection(io, service));
        let answered_before = clock.answered();
        let mut stopping = false;
        let mut cancelled = Box::pin(shutdown.cancelled());
        let served = std::future::poll_fn(|cx| {
            if !stopping && cancelled.as_mut().poll(cx).is_ready() {
                stopping = true;
                Pin::new(&mut *connection).graceful_shutdown();
            }
            loop {
                let polled = connection.poll_without_shutdown(cx);
                if polled.is_ready() || stopping {
                    return polled;
                }
                // Answers are sent within that poll, so this is where the
                // last one ends. Once nothing is being answered, the heads
                // went out saying keep-alive, and hyper stops reading and
                // hands the socket back once its last answer is flushed.
                // Deciding here, not on a later wake-up, lets the buffers go
                // before the next connection's turn: at 10,000 busy
                // connections, most would hold theirs otherwise.
                if clock.is_idle() && clock.answered() > answered_before && crowded() {
                    stopping = true;
                    Pin::new(&mut *connection).graceful_shutdown();
                    continue;
                }
                return Poll::Pending;
            }
        })
        .await;
        drop(cancelled);
        if let Err(error) = served {
            tracing::debug!(%error, "connection ended with an error");
            return runs;
        }
        if !stopping || shutdown.is_cancelled() || clock.is_closing() {
            // hyper ended the connection itself (the client asked to close,
            // spoke HTTP/1.0, or sent a head hyper refused), or pkgproxy
            // stops: it ends here.
            let mut io = connection.into_parts().io.into_inner().inner;
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut io).await;
            return runs;
        }
        let parts = connection.into_parts();
        let rewind = parts.io.into_inner();
        unread = [rewind.unread, parts.read_buf].concat().into();
        stream = rewind.inner;
    }
}

/// Every connection's settings, made once.
static BUILDER: std::sync::LazyLock<http1::Builder> = std::sync::LazyLock::new(|| {
    let mut builder = http1::Builder::new();
    builder
        // The deadlines are kept by `deadline::Watched`.
        .header_read_timeout(None)
        .max_header_size(framing::MAX_HEAD_SIZE)
        // What waits for a slow reader: one chunk of a cached file, not two
        // (hyper's default takes about 400 KB before it stops asking).
        .max_buf_size(framing::MAX_HEAD_SIZE + 8 * 1024)
        // Vectored writes, never a flattened copy: a body's frames reach
        // the stream as they are, as `crate::sendfile` needs them to.
        .writev(true)
        .keep_alive(true);
    builder
});

fn builder() -> &'static http1::Builder {
    &BUILDER
}

/// The first bytes of the client's next request (after `unread`, what the
/// last connection read and did not parse), at least enough to tell its
/// method; `None` once the client closed. Nothing is allocated until bytes
/// arrive: a connection waiting here costs its socket and its task.
async fn next_request_start<S: AsyncRead + Unpin>(stream: &mut S, unread: Bytes) -> std::io::Result<Option<Bytes>> {
    let mut start = unread;
    while start.len() < METHOD_PREFIX {
        let read = std::future::poll_fn(|cx| {
            let mut buf = [0u8; START_READ];
            let mut read = ReadBuf::new(&mut buf);
            match Pin::new(&mut *stream).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(Bytes::copy_from_slice(read.filled()))),
                Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await?;
        if read.is_empty() {
            return Ok(None);
        }
        start = if start.is_empty() { read } else { [start, read].concat().into() };
    }
    Ok(Some(start))
}

/// Whether a request's first bytes may ask to switch to HTTP/2 (`h2c`
/// somewhere in them): only those are parsed for it.
fn asks_for_h2c(start: &[u8]) -> bool {
    start.windows(3).any(|window| window.eq_ignore_ascii_case(b"h2c"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    /// A connection served by `serve` on a crowded listener, answering every
    /// request `ok`.
    fn served() -> (DuplexStream, tokio::task::JoinHandle<usize>, CancellationToken) {
        served_when_crowded(true)
    }

    fn served_when_crowded(crowded: bool) -> (DuplexStream, tokio::task::JoinHandle<usize>, CancellationToken) {
        let (server, client) = tokio::io::duplex(64 * 1024);
        let clock = ConnectionClock::new(Duration::from_secs(10), Duration::from_secs(60), Duration::from_secs(60));
        let handler = {
            let clock = Arc::clone(&clock);
            move |request: Request<Incoming>| {
                clock.request_read();
                let clock = Arc::clone(&clock);
                async move {
                    let body = http_body_util::Full::new(Bytes::from(format!("ok {}", request.uri().path())));
                    Response::new(super::super::deadline::Answering::new(body, clock))
                }
            }
        };
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(serve(server, handler, clock, move || crowded, None, shutdown.clone()));
        (client, serving, shutdown)
    }

    /// Reads one answer, whose body ends with `ok PATH`.
    async fn answer(client: &mut DuplexStream, path: &str) -> String {
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        while !text.ends_with(&format!("ok {path}")) {
            let n = client.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before the answer to {path}: {text}");
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        text
    }

    #[tokio::test(start_paused = true)]
    async fn an_answered_connection_lets_its_hyper_connection_go_and_keeps_serving() {
        let (mut client, serving, _shutdown) = served();
        client.write_all(b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let first = answer(&mut client, "/one").await;
        assert!(!first.to_ascii_lowercase().contains("connection: close"), "{first}");
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Pipelined, after the park: both answered, in order.
        client.write_all(b"GET /two HTTP/1.1\r\nHost: x\r\n\r\nGET /three HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let rest = answer(&mut client, "/three").await;
        assert!(rest.find("ok /two").unwrap() < rest.find("ok /three").unwrap(), "{rest}");
        assert!(!rest.to_ascii_lowercase().contains("connection: close"), "{rest}");
        drop(client);
        assert!(serving.await.unwrap() >= 2, "a new hyper connection after the park");
    }

    #[tokio::test(start_paused = true)]
    async fn many_pipelined_requests_are_all_answered_in_order_on_one_socket() {
        let (mut client, serving, _shutdown) = served();
        let paths: Vec<String> = (0..50).map(|i| format!("/p{i:02}")).collect();
        let heads: String = paths.iter().map(|p| format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n")).collect();
        // Written in pieces that cut heads in two, as a network may.
        for piece in heads.as_bytes().chunks(37) {
            client.write_all(piece).await.unwrap();
            tokio::task::yield_now().await;
        }
        let text = answer(&mut client, "/p49").await;
        let mut last = 0;
        for path in &paths {
            let at = text.find(&format!("ok {path}")).unwrap_or_else(|| panic!("no answer to {path}: {text}"));
            assert!(at >= last, "{path} answered out of order");
            last = at;
        }
        assert!(!text.to_ascii_lowercase().contains("connection: close"), "{text}");
        client.write_all(b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        answer(&mut client, "/last").await;
        serving.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_close_is_honoured() {
        let (mut client, serving, _shutdown) = served();
        client.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        answer(&mut client, "/a").await;
        client.write_all(b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let last = answer(&mut client, "/last").await;
        assert!(last.to_ascii_lowercase().contains("connection: close"), "{last}");
        assert_eq!(serving.await.unwrap(), 2, "one hyper connection a request, and the socket ends");
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).await.unwrap(), 0, "closed after the last answer");
    }

    /// A connection's task holds this future for its whole life, parked or
    /// not: what only some connections need (HTTP/2's state, an upgraded
    /// tunnel) is boxed, so ten thousand connections cost kilobytes each,
    /// not tens of.
    #[test]
    fn a_connection_s_task_stays_small() {
        let (server, _client) = tokio::io::duplex(1024);
        let clock = ConnectionClock::new(Duration::from_secs(10), Duration::from_secs(60), Duration::from_secs(60));
        let handler = |_: Request<Incoming>| async { Response::new(http_body_util::Full::new(Bytes::new())) };
        let serving = serve(server, handler, clock, || true, None, CancellationToken::new());
        let size = std::mem::size_of_val(&serving);
        assert!(size <= 1024, "a connection's future is {size} bytes");
    }

    #[tokio::test(start_paused = true)]
    async fn on_an_uncrowded_listener_one_hyper_connection_serves_every_request() {
        let (mut client, serving, _shutdown) = served_when_crowded(false);
        for path in ["/a", "/b", "/c"] {
            client.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
            answer(&mut client, path).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        drop(client);
        assert_eq!(serving.await.unwrap(), 1);
    }
}
