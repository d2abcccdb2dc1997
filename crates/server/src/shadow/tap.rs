//! The tap: which mirrors copy a request, the copies' bodies, and the
//! copies' own tasks (sending, counting, comparing, logging).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method};
use http_body::{Body, Frame, SizeHint};
use pkgproxy_upstream::shadow::ShadowRequest;
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tokio::time::Instant;

use pkgproxy_metrics::ShadowCounter;
use pkgproxy_sides::SideId;

use super::copy::{copy_headers, is_copy};
use super::throttle::logs_failure;
use super::{Shadow, Shadows};
use crate::config::Step;
use crate::context::{ClientInfo, UpstreamAnswer};

/// A request as the mirrors see it.
#[derive(Debug, Clone, Copy)]
pub struct Original<'a> {
    /// Whether it arrives from a client or goes to the upstream.
    pub step: Step,
    /// The side it belongs to.
    pub side: SideId,
    /// Its method (a shadow copies only the methods it lists).
    pub method: &'a Method,
    /// The absolute URI for a forward-proxy side, else the path and query.
    pub uri: &'a str,
    /// Its headers, as the client sent them (or pkgproxy, upstream).
    pub headers: &'a HeaderMap,
    /// Who sent it.
    pub client: Option<ClientInfo>,
    /// Whether offline mode is in effect.
    pub offline: bool,
}

/// One copy to be sent.
#[derive(Debug)]
struct PendingCopy {
    shadow: Arc<Shadow>,
    request: ShadowRequest,
    /// The upstream's status, for a mirror that compares.
    compare: Option<oneshot::Receiver<u16>>,
    /// The request's path without the query, for logs.
    path: String,
    request_id: String,
}

/// The copies a request makes.
#[derive(Debug, Default)]
pub struct Tapped {
    copies: Vec<PendingCopy>,
    answer: UpstreamAnswer,
}

/// What the headers say of a request's body.
fn declared_body(headers: &HeaderMap) -> Option<Option<u64>> {
    let length = headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    match length {
        Some(0) => None,
        Some(length) => Some(Some(length)),
        None if headers.contains_key(http::header::TRANSFER_ENCODING) => Some(None),
        None => None,
    }
}

impl Shadows {
    /// The copies `original` makes: the mirrors whose step, sides and
    /// methods take it and whose sample it falls in, less those that must
    /// skip it now (offline, a body too large, too many copies under way),
    /// which count it.
    pub fn tap(&self, original: &Original<'_>) -> Tapped {
        let mut tapped = Tapped::default();
        if self.all.is_empty() || is_copy(original.headers) {
            return tapped;
        }
        let body = declared_body(original.headers);
        for shadow in &self.all {
            let config = &shadow.config;
            let wanted = config.step == original.step
                && config.sides.contains(&original.side)
                && config.methods.contains(original.method);
            if !wanted || !shadow.sampled() {
                continue;
            }
            let counters = &shadow.counters;
            if original.offline {
                counters.increment(ShadowCounter::SkippedOffline);
                continue;
            }
            if let Some(length) = body {
                if config.max_body_size == 0 || length.is_some_and(|length| length > config.max_body_size) {
                    counters.increment(ShadowCounter::SkippedSize);
                    continue;
                }
                if shadow.inflight.available_permits() == 0 {
                    counters.increment(ShadowCounter::SkippedInflight);
                    continue;
                }
            }
            let client = original.client;
            let request = ShadowRequest {
                method: original.method.clone(),
                uri: original.uri.to_string(),
                headers: copy_headers(original.headers, client.map(|c| c.addr.ip()), config.host.as_ref()),
                body: Bytes::new(),
            };
            let path = original.uri.split('?').next().unwrap_or_default();
            let path = match path.find("://") {
                Some(scheme_end) => path[scheme_end + 3..].find('/').map_or("/", |at| &path[scheme_end + 3 + at..]),
                None => path,
            };
            let request_id = original
                .headers
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .unwrap_or_else(|| client.map(|c| c.id.to_string()).unwrap_or_default());
            tapped.copies.push(PendingCopy {
                shadow: Arc::clone(shadow),
                request,
                compare: config.compare.then(|| tapped.answer.wait()),
                path: path.to_string(),
                request_id,
            });
        }
        tapped
    }
}

impl Tapped {
    /// True when no mirror copies the request.
    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// Where the upstream's status is to be reported.
    pub fn answer(&self) -> UpstreamAnswer {
        self.answer.clone()
    }

    /// Sends the copies of a request without a body, each from a task of
    /// its own.
    pub fn send(self) {
        for copy in self.copies {
            copy.launch(Bytes::new());
        }
    }

    /// Wraps a request body so the copies are sent, with what passed
    /// through, once it is complete; a body larger than a mirror's limit is
    /// not copied to it, and one that fails is not copied at all.
    pub fn tee<B>(self, body: B) -> TeeBody<B> {
        let limit = self.copies.iter().map(|c| c.shadow.config.max_body_size).max().unwrap_or(0);
        TeeBody { body, copies: self.copies, kept: BytesMut::new(), seen: 0, limit }
    }
}

impl PendingCopy {
    /// Sends the copy with `body` from a task of its own, unless
    /// `max_inflight` copies are under way. Decided and counted here, on
    /// the request's path: once a client has its answer, the counters say
    /// what became of its copies.
    fn launch(self, body: Bytes) {
        let shadow = Arc::clone(&self.shadow);
        let Ok(permit) = Arc::clone(&shadow.inflight).try_acquire_owned() else {
            shadow.counters.increment(ShadowCounter::SkippedInflight);
            return;
        };
        shadow.counters.increment(ShadowCounter::Sent);
        tokio::spawn(self.run(body, permit));
    }

    /// Sends the copy and reads its answer, counting and logging; then, for
    /// a shadow that compares, waits for the upstream's status.
    async fn run(mut self, body: Bytes, permit: OwnedSemaphorePermit) {
        let shadow = Arc::clone(&self.shadow);
        self.request.body = body;
        let method = self.request.method.clone();
        let timeout = shadow.config.timeout;
        let sent = tokio::time::timeout(timeout, shadow.target.send(self.request)).await;
        drop(permit);
        let status = match sent {
            Ok(Ok(status)) => status.as_u16(),
            Ok(Err(error)) => return shadow.failed(&error.to_string()),
            Err(_) => return shadow.failed(&format!("no answer within {timeout:?}")),
        };
        shadow.counters.increment(ShadowCounter::Answered);
        let Some(upstream) = self.compare.take() else { return };
        let Ok(upstream) = upstream.await else { return };
        shadow.counters.increment(ShadowCounter::Compared);
        if upstream == status {
            return;
        }
        shadow.counters.increment(ShadowCounter::Differing);
        let admitted = shadow.compare_log.lock().admit(Instant::now());
        if let Some(skipped) = admitted {
            tracing::warn!(
                mirror = shadow.config.name,
                %method,
                path = self.path,
                status = upstream,
                mirror_status = status,
                request_id = self.request_id,
                skipped,
                "the mirror answered with another status"
            );
        }
    }
}

impl Shadow {
    fn failed(&self, error: &str) {
        let count = self.counters.increment(ShadowCounter::Failed);
        if logs_failure(count) {
            tracing::warn!(mirror = self.config.name, failures = count, error, "a copy to the mirror failed");
        }
    }
}

/// A request body that keeps what passes through for the copies.
#[derive(Debug)]
pub struct TeeBody<B> {
    body: B,
    copies: Vec<PendingCopy>,
    kept: BytesMut,
    /// Bytes that passed, kept or not.
    seen: u64,
    /// The most any copy takes.
    limit: u64,
}

impl<B> TeeBody<B> {
    /// True once more has passed than any copy takes.
    pub fn is_over_limit(&self) -> bool {
        self.seen > self.limit
    }

    /// The body ended: send each copy that takes its size.
    fn complete(&mut self) {
        let body = std::mem::take(&mut self.kept).freeze();
        for copy in self.copies.drain(..) {
            if self.seen > copy.shadow.config.max_body_size {
                copy.shadow.counters.increment(ShadowCounter::SkippedSize);
                continue;
            }
            copy.launch(body.clone());
        }
    }
}

impl<B> Body for TeeBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.seen += data.len() as u64;
                    if this.seen <= this.limit {
                        this.kept.extend_from_slice(data);
                    } else {
                        this.kept = BytesMut::new();
                    }
                }
                if this.body.is_end_stream() {
                    this.complete();
                }
            }
            Poll::Ready(None) => this.complete(),
            Poll::Ready(Some(Err(_))) => this.copies.clear(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
