//! A client connection that holds no HTTP buffers while it waits for its
//! next request, as nginx frees its request buffers between keep-alive
//! requests. hyper gives each connection an 8 KiB write buffer and an
//! 8 KiB read buffer and keeps both for the connection's life: at 10,000
//! keep-alive connections, hundreds of MiB. So once a connection has
//! answered everything it was asked and idled for [`PARK_AFTER`], its
//! hyper connection is let go without closing the socket (hyper's
//! `graceful_shutdown` and `poll_without_shutdown`), and the socket waits
//! alone for the next request's first bytes, which get a new one.
//!
//! The answers keep saying keep-alive: hyper is told to stop only once
//! nothing is being answered, after the last answer's head went out. Bytes
//! hyper read but did not parse (a pipelined request's start) are handed to
//! the next connection. A `CONNECT` is served by a connection that can be
//! upgraded to a tunnel, which then owns the socket.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::deadline::ConnectionClock;
use super::framing;

/// How long a connection idles before its hyper connection is let go: a
/// client's next request usually comes at once (apt's, a busy CI's), and
/// making a hyper connection for each costs a tenth of the hits a second.
const PARK_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Bytes read to tell a `CONNECT` from other methods.
const METHOD_PREFIX: usize = 8;

/// A boxed answer: hyper lets a connection go without closing its socket
/// only if the answer's future can move.
type Answering<B> = Pin<Box<dyn Future<Output = Result<Response<B>, Infallible>> + Send>>;

/// Serves `stream` until the client closes it, its deadlines pass (its
/// reads fail) or `shutdown`; returns how many hyper connections served it.
pub async fn serve<S, H, F, B>(
    mut stream: S,
    handler: H,
    clock: Arc<ConnectionClock>,
    shutdown: CancellationToken,
) -> usize
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
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
        let io = TokioIo::new(Rewind { unread: start.clone(), inner: stream });
        if start.starts_with(b"CONNECT ") {
            // Boxed, as below: a parked connection's task stays small.
            let connection = Box::pin(builder().serve_connection(io, service).with_upgrades());
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            return runs;
        }
        let mut connection = Box::new(builder().serve_connection(io, service));
        let answered_before = clock.answered();
        let mut stopping = false;
        let mut idled = Box::pin(clock.idled());
        let mut cancelled = Box::pin(shutdown.cancelled());
        let mut parking: Option<Pin<Box<tokio::time::Sleep>>> = None;
        let served = std::future::poll_fn(|cx| {
            while !stopping {
                if cancelled.as_mut().poll(cx).is_ready() {
                    stopping = true;
                } else if idled.as_mut().poll(cx).is_ready() {
                    // An answer of this connection was sent and nothing is
                    // being answered: it is let go if it stays so.
                    if clock.is_idle() && clock.answered() > answered_before {
                        parking = Some(Box::pin(tokio::time::sleep(PARK_AFTER)));
                    }
                    idled.set(clock.idled());
                    continue;
                } else if let Some(timer) = parking.as_mut() {
                    if timer.as_mut().poll(cx).is_ready() {
                        // The heads went out saying keep-alive: hyper stops
                        // reading and hands the socket back once its last
                        // answer is flushed.
                        stopping = clock.is_idle();
                        parking = None;
                        continue;
                    }
                }
                break;
            }
            if stopping {
                Pin::new(&mut *connection).graceful_shutdown();
            }
            connection.poll_without_shutdown(cx)
        })
        .await;
        drop((idled, cancelled));
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

fn builder() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The deadlines are kept by `deadline::Watched`.
        .header_read_timeout(None)
        .max_header_size(framing::MAX_HEAD_SIZE)
        // What waits for a slow reader: one chunk of a cached file, not two
        // (hyper's default takes about 400 KB before it stops asking).
        .max_buf_size(framing::MAX_HEAD_SIZE + 8 * 1024)
        .keep_alive(true);
    builder
}

/// The first bytes of the client's next request (after `unread`, what the
/// last connection read and did not parse), enough to tell its method;
/// `None` once the client closed.
async fn next_request_start<S: AsyncRead + Unpin>(stream: &mut S, unread: Bytes) -> std::io::Result<Option<Bytes>> {
    let mut start = unread.to_vec();
    let mut buf = [0u8; METHOD_PREFIX];
    while start.len() < METHOD_PREFIX {
        let read = stream.read(&mut buf[..METHOD_PREFIX - start.len()]).await?;
        if read == 0 {
            return Ok(None);
        }
        start.extend_from_slice(&buf[..read]);
    }
    Ok(Some(start.into()))
}

/// A stream whose first bytes were read already: they are read again first.
struct Rewind<S> {
    unread: Bytes,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.unread.has_remaining() {
            let n = this.unread.len().min(buf.remaining());
            buf.put_slice(&this.unread[..n]);
            this.unread.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    /// A connection served by `serve`, answering every request `ok`.
    fn served() -> (DuplexStream, tokio::task::JoinHandle<usize>, CancellationToken) {
        let (server, client) = tokio::io::duplex(64 * 1024);
        let clock = ConnectionClock::new(Duration::from_secs(10), Duration::from_secs(60));
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
        let serving = tokio::spawn(serve(server, handler, clock, shutdown.clone()));
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
    async fn an_idle_connection_lets_its_hyper_connection_go_and_keeps_serving() {
        let (mut client, serving, _shutdown) = served();
        client.write_all(b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let first = answer(&mut client, "/one").await;
        assert!(!first.to_ascii_lowercase().contains("connection: close"), "{first}");
        tokio::time::sleep(PARK_AFTER * 2).await;
        // Pipelined, after the park: both answered, in order.
        client.write_all(b"GET /two HTTP/1.1\r\nHost: x\r\n\r\nGET /three HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let rest = answer(&mut client, "/three").await;
        assert!(rest.find("ok /two").unwrap() < rest.find("ok /three").unwrap(), "{rest}");
        drop(client);
        assert!(serving.await.unwrap() >= 2, "a new hyper connection after the park");
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_keeps_one_hyper_connection_and_a_close_is_honoured() {
        let (mut client, serving, _shutdown) = served();
        for path in ["/a", "/b", "/c"] {
            client.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
            answer(&mut client, path).await;
            tokio::time::sleep(PARK_AFTER / 4).await;
        }
        client.write_all(b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        answer(&mut client, "/last").await;
        assert_eq!(serving.await.unwrap(), 1, "one hyper connection for requests that came in time");
    }
}
