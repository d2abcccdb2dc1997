//! HTTP/2 on the proxy listener: on a plain connection with prior
//! knowledge (one that opens with HTTP/2's preface) or after an
//! `Upgrade: h2c` (what cargo's libcurl asks for over `http://`, see
//! [`upgrade`]), and over TLS when ALPN chose `h2`, by ALPN alone (RFC 9113
//! §3). A client that multiplexes (cargo resolving hundreds of index files
//! over at most two connections) then has every request in flight at once.
//!
//! What one client can make pkgproxy hold is bounded as over HTTP/1.1,
//! where a slow reader costs a socket's buffers: a connection carries at
//! most [`MAX_STREAMS`] streams at once (curl, cargo's HTTP library, opens
//! up to 100), more are refused with `REFUSED_STREAM`; each stream being
//! answered takes a place in its client's share of connections (`503`
//! beyond it); an answer is sent in frames of [`FRAME`] bytes and h2
//! buffers at most [`SEND_BUFFER`] of a stream's; and a connection whose
//! streams wait on windows its client keeps shut is closed after the send
//! timeout ([`streams`]).
//!
//! A request arrives in HTTP/2 in absolute form (`:scheme`,
//! `:authority`); the request path gets it in HTTP/1.1's origin form with
//! a `Host`, as every client of pkgproxy's own paths sends it.

mod streams;
pub mod upgrade;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, HOST, RETRY_AFTER};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use super::deadline::{ConnectionClock, Expired};
use crate::admission::StreamBudget;
use streams::{Flow, Streamed};

/// The ALPN name of HTTP/2 over TLS.
pub const ALPN: &[u8] = b"h2";

/// What an HTTP/2 connection opens with.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Streams a connection may have open at once (`MAX_CONCURRENT_STREAMS`).
pub const MAX_STREAMS: u32 = 100;

/// The most of a stream's answer h2 buffers beyond what was sent.
pub const SEND_BUFFER: usize = 32 * 1024;

/// The largest frame an answer's body gives at a time: what a stream whose
/// window stays shut holds.
pub const FRAME: u64 = 16 * 1024;

/// What a stream over its client's share is told.
const CROWDED: &str = "pkgproxy: too many connections and streams from this address; try again\n";

/// What an HTTP/2 connection keeps to beside HTTP's own rules.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The connection's clock: its deadlines, and the send timeout.
    pub clock: Arc<ConnectionClock>,
    /// Where its streams take their places.
    pub budget: StreamBudget,
}

/// Whether `start`, a connection's first bytes, opens HTTP/2 with prior
/// knowledge.
pub fn is_preface(start: &[u8]) -> bool {
    let n = start.len().min(PREFACE.len());
    n >= 8 && start[..n] == PREFACE[..n]
}

/// Serves HTTP/2 on `io` until the client ends it, it stalls or
/// `shutdown`, when the requests under way are answered first.
pub async fn serve<S, H, F, B>(io: S, handler: Arc<H>, limits: Limits, shutdown: CancellationToken)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let flow = Flow::new();
    let service = {
        let (flow, budget) = (Arc::clone(&flow), limits.budget.clone());
        service_fn(move |mut request: Request<Incoming>| {
            in_origin_form(&mut request);
            // Taken before the handler runs: a stream refused costs nothing.
            let answer = budget.take().map(|place| (handler(request), place));
            let flow = Arc::clone(&flow);
            async move {
                let response = match answer {
                    Some((answer, place)) => answer.await.map(|body| Answer::Served(Streamed::new(body, flow, place))),
                    None => crowded(),
                };
                Ok::<_, Infallible>(response)
            }
        })
    };
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder.timer(TokioTimer::new()).max_concurrent_streams(MAX_STREAMS).max_send_buf_size(SEND_BUFFER);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let stalled = flow.stalled(limits.clock.send_timeout());
    tokio::pin!(stalled);
    let ended = tokio::select! {
        ended = connection.as_mut() => Some(ended),
        () = stalled.as_mut() => None,
        _ = shutdown.cancelled() => {
            // The answers under way are finished, unless their client
            // keeps them waiting.
            connection.as_mut().graceful_shutdown();
            tokio::select! {
                ended = connection.as_mut() => Some(ended),
                () = stalled.as_mut() => None,
            }
        }
    };
    match ended {
        Some(Ok(())) => {}
        Some(Err(error)) => tracing::debug!(%error, "HTTP/2 connection ended with an error"),
        None => {
            limits.clock.expire(Expired::Send);
            tracing::debug!(timeout = ?limits.clock.send_timeout(), "HTTP/2 connection closed: its client took nothing");
        }
    }
}

/// The answer to a stream over its client's share.
fn crowded<B>() -> Response<Answer<B>> {
    let mut response = Response::new(Answer::Crowded(Full::new(Bytes::from_static(CROWDED.as_bytes()))));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// A stream's answer: the handler's, or the refusal of a stream over its
/// client's share.
#[derive(Debug)]
enum Answer<B> {
    Served(Streamed<B>),
    Crowded(Full<Bytes>),
}

impl<B> Body for Answer<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Answer::Served(body) => std::pin::Pin::new(body).poll_frame(cx),
            Answer::Crowded(body) => std::pin::Pin::new(body).poll_frame(cx).map_err(|never| match never {}),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Answer::Served(body) => body.is_end_stream(),
            Answer::Crowded(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Answer::Served(body) => body.size_hint(),
            Answer::Crowded(body) => body.size_hint(),
        }
    }
}

/// An HTTP/2 request as the request path takes one: its target in origin
/// form, its authority as `Host`.
fn in_origin_form(request: &mut Request<Incoming>) {
    if request.version() != Version::HTTP_2 {
        return;
    }
    let authority = request.uri().authority().map(|authority| authority.as_str().to_owned());
    if let Some(authority) = authority {
        if !request.headers().contains_key(HOST) {
            if let Ok(value) = HeaderValue::from_str(&authority) {
                request.headers_mut().insert(HOST, value);
            }
        }
    }
    let path = request.uri().path_and_query().map_or("/", |path| path.as_str()).to_owned();
    if let Ok(uri) = path.parse::<Uri>() {
        *request.uri_mut() = uri;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preface_is_told_from_its_first_eight_bytes() {
        assert!(is_preface(b"PRI * HTTP/2.0\r\n") && is_preface(b"PRI * HT"));
        assert!(!is_preface(b"PRI * H") && !is_preface(b"GET / HT"));
    }
}
