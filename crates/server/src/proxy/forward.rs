//! Forwarding: a request its side passes to the upstream uncached (an
//! authentication `POST`, an npm publish). Its body goes to the upstream as
//! the client sends it, cut off at the side's limit ([`super::upload`]),
//! through the side's pool, which never sends it twice when its method is
//! not idempotent or its body was streamed; the answer streams back as the
//! upstream sends it. Nothing is shared with another client, nothing is
//! cached.
//!
//! A side may ask for the answer to be recorded (the snap store's refresh
//! results): the request's body, which the record is keyed by, is then
//! read whole first (such a side's limit is small), a successful answer is
//! read whole and kept before the client gets it, and when the upstream
//! cannot be asked or fails, the side answers from what it kept instead.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH};
use http::{Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use pkgproxy_metrics::{SideCounter, Timing};
use pkgproxy_sides::{ForwardRequest, Record, SideId};
use pkgproxy_upstream::{Payload, PoolRequest};
use tokio::time::Instant;

use super::fetching::{copy_upstream_request, counted};
use super::outcome::{self, Answer, Failed, Outcome, Served};
use super::rewrite::rewritten;
use super::upload;
use crate::access_log::CacheUse;
use crate::body::ResponseBody;
use crate::context::Exchange;
use crate::headers::{add_via, strip_hop_by_hop};
use crate::state::State;

/// Forwards `request` with the client's `body`.
pub async fn forward<B>(state: &Arc<State>, exchange: &Exchange<'_>, request: ForwardRequest, body: B) -> Outcome
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let (record, rewrite, side, limit) =
        (request.record.clone(), request.rewrite.clone(), request.side, request.body_limit);
    let outcome = match record {
        Some(record) => {
            let body = match upload::whole(body, limit).await {
                Ok(body) => body,
                Err(refusal) => return Failed::Refused(refusal).into(),
            };
            let outcome = send(state, exchange, request, Payload::from(body.clone())).await;
            recorded(state, side, record, body, outcome).await
        }
        None => {
            let (payload, cut) = match upload::passed_on(body, limit).await {
                Ok(passed) => passed,
                Err(refusal) => return Failed::Refused(refusal).into(),
            };
            cut.over(send(state, exchange, request, payload).await)
        }
    };
    match rewrite {
        Some(rewrite) => rewritten(state.sides.get(side), &rewrite, exchange, outcome).await,
        None => outcome,
    }
}

/// The largest answer read whole to be recorded, in bytes.
const RECORD_LIMIT: usize = 32 * 1024 * 1024;

/// `outcome` of a request whose answer `record` asks to keep: a successful
/// answer is kept (before the client gets it, so what a client just did
/// is there the moment the upstream goes away); a failure, or an upstream
/// too busy or broken to answer, is answered from what was kept, if the
/// side can.
async fn recorded(state: &Arc<State>, side: SideId, record: Record, sent: Bytes, outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Answered(Answer { response, served, reason, answered_by, stored, cache_use })
            if response.status() == StatusCode::OK =>
        {
            let (mut parts, body) = response.into_parts();
            let body = match Limited::new(body, RECORD_LIMIT).collect().await {
                Ok(body) => body.to_bytes(),
                Err(error) => return Failed::Upstream(format!("the answer broke off: {error}")).into(),
            };
            let (kept_state, kept_body) = (Arc::clone(state), body.clone());
            let keep = move || {
                if let Some(recording) = kept_state.sides.get(side).roles().recording {
                    recording.record(&record, &sent, &kept_body);
                }
            };
            if tokio::task::spawn_blocking(keep).await.is_err() {
                tracing::warn!(%side, "recording an answer failed");
            }
            parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
            let response = Response::from_parts(parts, ResponseBody::full(body));
            Outcome::Answered(Answer { response, served, reason, answered_by, stored, cache_use })
        }
        Outcome::Answered(answer) if is_busy_or_broken(answer.status()) => {
            let reason = format!("the upstream answered {}", answer.status());
            let failure = pkgproxy_sides::Failure::UpstreamFailed { reason: &reason };
            replayed(state, side, &record, &sent, &failure).unwrap_or(Outcome::Answered(answer))
        }
        Outcome::Failed(failed) => {
            let failure = failed.failure(state.upstream.switch.mode());
            replayed(state, side, &record, &sent, &failure).unwrap_or(Outcome::Failed(failed))
        }
        other => other,
    }
}

/// The side's answer from what `record` kept, when it has one for `sent`.
fn replayed(
    state: &State,
    side: SideId,
    record: &Record,
    sent: &[u8],
    failure: &pkgproxy_sides::Failure<'_>,
) -> Option<Outcome> {
    let answer = state.sides.get(side).roles().recording?.replay(record, sent, failure)?;
    state.stats.side(side).increment(SideCounter::StaleServed);
    // Served from what was kept: a stale answer, as a client sees it.
    Some(Outcome::Answered(Answer::served(outcome::local(answer), Served::Stale)))
}

/// An upstream answer that says it could not serve the request now.
fn is_busy_or_broken(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// Sends `request` with `body` and passes the upstream's answer on.
async fn send(state: &Arc<State>, exchange: &Exchange<'_>, request: ForwardRequest, body: Payload) -> Outcome {
    let origin = &request.origin;
    let pool = match state.upstream.transport.pool(&origin.pool, &origin.instances) {
        Ok(pool) => pool,
        Err(error) => return Failed::of_upstream(&error).into(),
    };
    let agent = exchange.headers.get(http::header::USER_AGENT).cloned();
    let headers = super::outgoing::headers(request.headers, agent, &state.loop_mark, None);
    let upstream_answer = copy_upstream_request(state, request.side, origin, exchange, &request.method, &headers);
    let sent = PoolRequest { method: request.method, path: origin.path.clone(), headers, body, avoid: None };
    let started = Instant::now();
    let answer = match pool.send(sent).await {
        Ok(answer) => answer,
        Err(error) => return Failed::of_upstream(&error).into(),
    };
    state.stats.time(request.side, Timing::Upstream, started.elapsed());
    let status = answer.response.status();
    upstream_answer.report(status.as_u16());
    exchange.upstream_answer.report(status.as_u16());
    let (parts, body) = answer.response.into_parts();
    let mut response =
        Response::new(ResponseBody::Upstream(counted(body, Arc::clone(state), request.side, exchange.requester())));
    *response.status_mut() = parts.status;
    *response.headers_mut() = parts.headers;
    let headers = response.headers_mut();
    strip_hop_by_hop(headers);
    add_via(headers);
    if *exchange.method == http::Method::HEAD {
        *response.body_mut() = ResponseBody::Empty;
    }
    let answered_by = origin.instances.get(answer.instance).map(|base| crate::redact::without_user(base).into());
    let cache_use = Some(CacheUse::Passed);
    Outcome::Answered(Answer { answered_by, cache_use, ..Answer::served(response, Served::Miss) })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use http::{HeaderMap, Method};
    use http_body_util::Full;
    use pkgproxy_sides::{Mount, Origin, SideId};
    use pkgproxy_testkit::{ShadowMode, ShadowRecorder};

    use pkgproxy_upstream::offline::Mode;

    use super::*;
    use crate::config::{ConfigFile, Overrides, Settings};
    use crate::context::UpstreamAnswer;
    use crate::proxy::outcome::respond;
    use crate::proxy::outcome::CACHE_STATUS;

    /// The server's state, with `upstream` trusted (it is on 127.0.0.1).
    async fn state(dir: &Path, upstream: &str) -> Arc<State> {
        let file = ConfigFile::parse(&format!("[go]\nproxies = [{upstream:?}]\n")).unwrap();
        let overrides = Overrides::default();
        let settings = Settings::new(dir.to_path_buf(), &file, &overrides).unwrap();
        Arc::new(State::open(settings, "127.0.0.1:3142".parse().unwrap()).await.unwrap())
    }

    fn request(upstream: &str, body_limit: u64) -> ForwardRequest {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        ForwardRequest {
            side: SideId::Go,
            origin: Origin {
                pool: "test".into(),
                instances: vec![upstream.to_string()],
                path: "/v2/refresh?x=1".into(),
            },
            method: Method::POST,
            headers,
            body_limit,
            record: None,
            rewrite: None,
        }
    }

    /// Forwards `request` with `body` for a client that sent a `POST`.
    async fn forwarded(state: &Arc<State>, request: ForwardRequest, body: &'static [u8]) -> Outcome {
        forwarded_with(state, request, Full::new(Bytes::from_static(body))).await
    }

    /// Forwards `request` with `body` for a client that sent a `POST`.
    async fn forwarded_with<B>(state: &Arc<State>, request: ForwardRequest, body: B) -> Outcome
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (headers, answer) = (HeaderMap::new(), UpstreamAnswer::default());
        let exchange = Exchange {
            method: &Method::POST,
            headers: &headers,
            mount: Mount::Prefix("/x"),
            upstream_answer: &answer,
            client: None,
            target: None,
            supply: None,
        };
        forward(state, &exchange, request, body).await
    }

    /// A body of `frames` frames of `size` bytes whose length is not
    /// announced (an HTTP/2 upload without `content-length`).
    fn unannounced(frames: usize, size: usize) -> impl Body<Data = Bytes, Error = std::io::Error> + Send + Unpin {
        let frames = (0..frames).map(move |_| Ok(http_body::Frame::data(Bytes::from(vec![b'x'; size]))));
        http_body_util::StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_body_of_unknown_length_goes_upstream_as_it_comes() {
        let upstream = ShadowRecorder::start(ShadowMode::Answer(201)).await;
        let dir = tempfile::tempdir().unwrap();
        let state = state(dir.path(), &upstream.url()).await;
        let outcome = forwarded_with(&state, request(&upstream.url(), 1 << 20), unannounced(8, 64 * 1024)).await;
        let response = respond(None, Mode::Never, outcome);
        assert_eq!(response.status(), 201);
        let hits = upstream.hits();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].body.len(), 8 * 64 * 1024, "the whole body");
    }

    #[tokio::test]
    async fn a_body_of_unknown_length_past_the_limit_is_cut_off_and_the_client_told_why() {
        let upstream = ShadowRecorder::start(ShadowMode::Answer(201)).await;
        let dir = tempfile::tempdir().unwrap();
        let state = state(dir.path(), &upstream.url()).await;
        let outcome = forwarded_with(&state, request(&upstream.url(), 100 * 1024), unannounced(8, 64 * 1024)).await;
        match outcome {
            Outcome::Failed(Failed::Refused(refusal)) => {
                assert_eq!(refusal.status, StatusCode::PAYLOAD_TOO_LARGE);
                assert!(refusal.reason.contains("larger than the 102400 bytes"), "{}", refusal.reason);
            }
            other => panic!("not refused: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_forwarded_request_carries_its_body_and_gets_the_upstream_s_own_answer() {
        let upstream = ShadowRecorder::start(ShadowMode::Answer(201)).await;
        let dir = tempfile::tempdir().unwrap();
        let state = state(dir.path(), &upstream.url()).await;
        let outcome = forwarded(&state, request(&upstream.url(), 1024), b"{\"actions\": []}").await;
        assert!(matches!(outcome, Outcome::Answered(_)), "not answered: {outcome:?}");
        assert_eq!(outcome.ending(Mode::Never), Some(crate::stats::Ending::Miss));
        let response = respond(None, Mode::Never, outcome);
        assert_eq!(response.status(), 201);
        assert_eq!(response.headers()[CACHE_STATUS], "miss");
        assert!(response.headers()[http::header::VIA].to_str().unwrap().contains("pkgproxy"));
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert!(!body.is_empty(), "the upstream's body");
        let hits = upstream.hits();
        assert_eq!(hits.len(), 1, "sent once");
        assert_eq!((hits[0].method.as_str(), hits[0].target.as_str()), ("POST", "/v2/refresh?x=1"));
        assert_eq!(hits[0].body, b"{\"actions\": []}");
        assert_eq!(hits[0].header("content-type"), Some("application/json"));
        assert!(hits[0].header("via").is_some_and(|via| via.contains("pkgproxy-")), "our loop mark");
        assert_eq!(state.cache.totals().0, 0, "nothing is cached");
    }

    #[tokio::test]
    async fn a_body_over_the_side_s_limit_is_refused_and_nothing_is_sent() {
        let upstream = ShadowRecorder::start(ShadowMode::Answer(200)).await;
        let dir = tempfile::tempdir().unwrap();
        let state = state(dir.path(), &upstream.url()).await;
        match forwarded(&state, request(&upstream.url(), 10), b"0123456789abcdef").await {
            Outcome::Failed(Failed::Refused(refusal)) => assert_eq!(refusal.status, StatusCode::PAYLOAD_TOO_LARGE),
            other => panic!("not refused: {other:?}"),
        }
        assert_eq!(upstream.count(), 0);
    }
}
