//! The gateway: accepts connections on the proxy listener and the control
//! sockets and serves HTTP/1.1 on them (keep-alive, pipelined requests
//! answered in order, CONNECT upgrades), on the proxy listener in clear or
//! over TLS, told apart by a connection's first byte (see `tls.rs`), and
//! HTTP/2 there too (see [`http2`]). Requests go to `proxy` or `control`;
//! nothing here decides anything about caching.
//!
//! Before hyper sees a connection, [`crate::admission`] decides whether its
//! client is served at all; its reads and writes keep to the deadlines of
//! [`deadline`], and each request's framing is checked ([`framing`])
//! before the request path reads it.
//!
//! hyper's `pipeline_flush` is deliberately off: it makes the connection
//! buffer a body without bound (a whole 100 MiB file per client), and
//! pipelined requests are answered in order without it.

pub mod deadline;
mod framing;
mod http2;
mod parking;
mod rewind;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::access_log::{Begun, CacheUse, LoggedBody};
use crate::admission::StreamBudget;
use crate::context::ClientInfo;
use crate::proxy::outcome::Finished;
use crate::sendfile::{KernelSent, Ranges};
use crate::state::State;
use crate::trouble::Asked;
use crate::{control, proxy};
use deadline::{Answering, ConnectionClock, Expired, Watched};
use pkgproxy_metrics::ClientCounter;
use std::net::SocketAddr;

/// Accepts on the proxy listener until `shutdown`, handing each connection
/// to the next of `threads` in turn, so they share the load evenly (two
/// threads accepting on one socket split 64 connections as unevenly as
/// 50 to 14, and the busy one bounds the throughput).
pub async fn serve_proxy(
    listener: TcpListener,
    state: Arc<State>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    threads: Vec<Handle>,
) {
    let mut next = 0;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let ticket = match state.admission.admit(peer.ip()) {
                    Ok(ticket) => ticket,
                    Err(refusal) => {
                        tracing::debug!(%peer, ?refusal, "connection refused");
                        tokio::spawn(crate::admission::refuse(stream, refusal));
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let Ok(stream) = stream.into_std() else { continue };
                let state = Arc::clone(&state);
                let shutdown = shutdown.clone();
                let thread = &threads[next % threads.len()];
                next = next.wrapping_add(1);
                let span = tracing::debug_span!("connection", %peer);
                let connection = async move {
                    // Registered with the reactor of the thread that serves it.
                    let Ok(stream) = tokio::net::TcpStream::from_std(stream) else { return };
                    serve_client(stream, peer, state, ticket.streams(), shutdown).await;
                    drop(ticket);
                };
                tracker.spawn_on(connection.instrument(span), thread);
            }
            Err(error) => accept_failed(error).await,
        }
    }
}

/// Serves one admitted client connection, in clear or over TLS, until it
/// ends, its deadlines pass or the server stops; its HTTP/2 streams take
/// their places in `streams`.
async fn serve_client(
    stream: TcpStream,
    peer: SocketAddr,
    state: Arc<State>,
    streams: StreamBudget,
    shutdown: CancellationToken,
) {
    let limits = state.admission.limits();
    let clock = ConnectionClock::new(limits.header_read_timeout, limits.idle_timeout, limits.send_timeout);
    let first = tokio::time::timeout(limits.header_read_timeout, first_byte(&stream)).await;
    let secure = matches!(first, Ok(Some(crate::tls::HANDSHAKE)));
    let ranges = Arc::new(Ranges::default());
    // Only plain HTTP/1.1 answers are sent by the kernel: TLS encrypts in
    // user space, and HTTP/2 frames what it sends.
    let kernel = (!secure).then(|| Arc::clone(&ranges));
    let handler = {
        let (state, clock) = (Arc::clone(&state), Arc::clone(&clock));
        move |request: Request<Incoming>| {
            let over_http2 = request.version() == http::Version::HTTP_2;
            let way = match kernel.clone().filter(|_| !over_http2) {
                Some(ranges) => Way::Kernel(ranges),
                None if over_http2 => Way::Frames,
                None => Way::Plain,
            };
            let id = state.request_ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            let client = ClientInfo { addr: peer, id, secure };
            clock.request_read();
            if framing::wants_close(&request) {
                clock.close_after_answer();
            }
            let (state, clock) = (Arc::clone(&state), Arc::clone(&clock));
            async move {
                let begun = state.access_log.begin(&request, peer);
                let asked = Asked::of(request.uri(), request.headers());
                let finished = match framing::refused(&request) {
                    Some(refused) => {
                        state.admission.counters.increment(ClientCounter::Malformed);
                        Finished::own(refused, CacheUse::Refused)
                    }
                    None => proxy::handle(Arc::clone(&state), request, client).await,
                };
                send(&state, &asked, begun, finished, way, clock)
            }
        }
    };
    let kernel_sent = KernelSent::new(stream, ranges, Arc::clone(&state.admission.counters));
    let stream = Watched::new(kernel_sent, Arc::clone(&clock));
    let crowded = {
        let admission = Arc::clone(&state.admission);
        move || admission.open() > parking::CROWDED
    };
    let h2 = http2::Limits { clock: Arc::clone(&clock), budget: streams };
    match first {
        Ok(Some(crate::tls::HANDSHAKE)) => {
            // Boxed: a TLS session's state is kilobytes, and a plain
            // connection's task would carry room for it otherwise.
            let acceptor = state.tls.acceptor.clone();
            let clock = Arc::clone(&clock);
            let serving = async move {
                match acceptor.accept(stream).await {
                    Ok(stream) if stream.get_ref().1.alpn_protocol() == Some(http2::ALPN) => {
                        let span = tracing::debug_span!("tls", protocol = "h2");
                        http2::serve(stream, Arc::new(handler), h2, shutdown).instrument(span).await;
                    }
                    Ok(stream) => {
                        // HTTP/2 over TLS is ALPN's to choose: no h2c here.
                        let span = tracing::debug_span!("tls");
                        let serving = parking::serve(stream, handler, clock, crowded, None, shutdown);
                        let runs = serving.instrument(span).await;
                        tracing::debug!(runs, "connection ended");
                    }
                    Err(error) => tracing::debug!(%error, "TLS handshake failed"),
                }
            };
            Box::pin(serving).await;
        }
        Ok(Some(_)) => {
            let span = tracing::debug_span!("plain");
            let serving = parking::serve(stream, handler, Arc::clone(&clock), crowded, Some(h2), shutdown);
            let runs = serving.instrument(span).await;
            tracing::debug!(runs, "connection ended");
        }
        Ok(None) => {}
        Err(_) => _ = state.admission.counters.increment(ClientCounter::HeaderTimeouts),
    }
    match clock.expired() {
        Some(Expired::Head) => _ = state.admission.counters.increment(ClientCounter::HeaderTimeouts),
        Some(Expired::Idle) => _ = state.admission.counters.increment(ClientCounter::IdleTimeouts),
        Some(Expired::Send) => _ = state.admission.counters.increment(ClientCounter::SendTimeouts),
        None => {}
    }
}

/// How a connection sends an answer's body.
enum Way {
    /// Plain HTTP/1.1: a large file's bytes by the kernel, into `Ranges`.
    Kernel(Arc<Ranges>),
    /// HTTP/2, which holds a frame per stream a client keeps waiting: in
    /// frames of [`http2::FRAME`] at most.
    Frames,
    /// TLS: as the body gives it.
    Plain,
}

/// The one place an answer leaves for its client: noted in the trouble
/// table as the answer to `asked`, its body sent the connection's `way`
/// and within its send deadline (`clock`), which closes after it when it
/// says so, and its access-log line (`begun`) written once it is sent.
fn send(
    state: &State,
    asked: &Asked,
    begun: Option<Begun>,
    finished: Finished,
    way: Way,
    clock: Arc<ConnectionClock>,
) -> Response<Answering<LoggedBody>> {
    let Finished { response, note } = finished;
    state.trouble.observe(&state.sides, state.clock.now(), asked, &response, &note);
    let response = match way {
        Way::Kernel(ranges) => response.map(|body| body.sent_by_kernel(&ranges)),
        Way::Frames => response.map(|body| body.in_frames_of(http2::FRAME)),
        Way::Plain => response,
    };
    if framing::closes(&response) {
        clock.close_after_answer();
    }
    state.access_log.attach(begun, response, note).map(|body| Answering::new(body, clock))
}

/// The first byte a client sent, without taking it (`0x16` starts a TLS
/// handshake); `None` when it closed first.
async fn first_byte(stream: &TcpStream) -> Option<u8> {
    let mut byte = [0u8; 1];
    match stream.peek(&mut byte).await {
        Ok(1) => Some(byte[0]),
        _ => None,
    }
}

/// Serves a control socket until `shutdown`.
pub async fn serve_control(
    listener: UnixListener,
    state: Arc<State>,
    role: control::Role,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => return,
        };
        match accepted {
            Ok((stream, _)) => {
                let state = Arc::clone(&state);
                let handler = move |request| control::handle(Arc::clone(&state), role, request);
                tracker.spawn(serve_connection(stream, handler, shutdown.clone()));
            }
            Err(error) => accept_failed(error).await,
        }
    }
}

/// Running out of file descriptors must not spin the accept loop.
async fn accept_failed(error: std::io::Error) {
    tracing::warn!(%error, "accept failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Serves a control socket's connection until it ends or `shutdown`.
async fn serve_connection<S, H, F, B>(stream: S, handler: H, shutdown: CancellationToken)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let handler = Arc::new(handler);
    let service = service_fn(move |request| {
        let handler = Arc::clone(&handler);
        async move { Ok::<_, Infallible>(handler(request).await) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        // The control sockets' clients are local and trusted.
        .header_read_timeout(None)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}
