//! Serving a name that points at content by digest (a registry tag),
//! the way Docker Hub's quota and outages call for:
//!
//! - within its window (or offline), the content it pointed at last is
//!   served, asking nothing;
//! - after it, one `HEAD` per name however many clients ask (single
//!   flight; a `HEAD` is free against Docker Hub's pull quota) says which
//!   digest the name stands for now: the same one is served as it is and
//!   confirmed; a new one is fetched *by digest*, checked and kept, and
//!   only then does the name point at it (a name never points at content
//!   the cache does not hold, so the next outage cannot break it);
//! - when the upstream's pull quota is down to its reserve, a moved name
//!   that has content is not followed (the reserve is for names never
//!   pulled);
//! - when the upstream cannot say, or cannot give the new content
//!   (rate-limited, failing, unreachable, its breaker open), the last
//!   content is served with `Warning: 299 - "pkgproxy: served cached NAME
//!   (checked T ago): WHY"` and the name keeps pointing at it; with nothing
//!   cached, the client is told honestly (`429` with `Retry-After`, or
//!   `503`);
//! - an upstream that asked to be left alone (`Retry-After`) is not asked
//!   about the name again until then ([`crate::kept::holds`]): a client's retries cost
//!   it nothing.

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderValue, USER_AGENT, WARNING};
use http::{HeaderMap, StatusCode};
use pkgproxy_cache::{Entry, FetchError, PassedAnswer};
use pkgproxy_metrics::SideCounter;
use pkgproxy_sides::{CachedRequest, Pointer, PointerRequest, Side};

use super::cached;
use super::fetching;
use super::finish::Finish;
use super::lookup::{self, Held, Lookup, Moment};
use super::outcome::Served;
use super::outcome::{Failed, Outcome};
use super::reason::Reason;
use crate::context::Exchange;
use crate::state::State;

/// Serves `named`, a name that points at content by digest.
pub async fn serve(state: &Arc<State>, exchange: &Exchange<'_>, side: &dyn Side, named: PointerRequest) -> Outcome {
    let PointerRequest { name: request, pointer } = named;
    let as_it_is = request.clone();
    let cached = match lookup::look(&Held(state), &request, &Moment::of(state, exchange)) {
        Lookup::Fresh(entry) => {
            let outcome = cached::serve(state, exchange, side, as_it_is).await;
            return with_headers(outcome, &request, &pointer, &entry);
        }
        // A refusal remembered for this client: replayed, nothing asked.
        Lookup::Remembered(_) => return cached::serve(state, exchange, side, as_it_is).await,
        Lookup::Stale { entry, .. } => Some(entry),
        Lookup::Adoptable { .. } | Lookup::Missing(_) => None,
    };
    if let Some(held) = state.kept.pointers.holds.current(&request.key, state.clock.now()) {
        return unchecked(state, exchange, &request, &pointer, cached.as_deref(), held);
    }
    // With content to fall back on, the client waits for the registry no
    // longer than one healthy attempt may take: a stalled registry costs
    // it seconds, not the pool's retries.
    let timeouts = state.settings.upstream.pools.timeouts;
    let patience = match cached {
        Some(_) => timeouts.connect + timeouts.first_byte,
        None => timeouts.deadline,
    };
    let checked = match tokio::time::timeout(patience, check(state, exchange, &request)).await {
        Ok(checked) => checked,
        Err(_) => {
            let failed = Failed::Upstream(format!("the registry did not answer within {patience:?}"));
            return unchecked(state, exchange, &request, &pointer, cached.as_deref(), failed);
        }
    };
    let (status, headers) = match checked {
        Ok(answer) => answer,
        Err(error) => {
            return given_up(state, exchange, &request, &pointer, cached.as_deref(), Failed::of_fetch(&error))
        }
    };
    if let Some(failed) = failure_of(state.clock.as_ref(), status, &headers) {
        return given_up(state, exchange, &request, &pointer, cached.as_deref(), failed);
    }
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        // The name is not this client's to read: its refusal is the
        // answer, not a second request for the same refusal.
        let refusal = PassedAnswer { status, headers: super::access::listed(&headers), body: Default::default() };
        let now = tokio::time::Instant::now().into_std();
        let remembering = side.roles().remembering;
        if let Some(remembering) = remembering {
            remembering.remember(&request, &Arc::new(refusal), now);
        }
        if remembering.is_some_and(|remembering| remembering.remembered(&request, now, false).is_some()) {
            return cached::serve(state, exchange, side, as_it_is).await;
        }
    }
    let digest = headers.get(&pointer.digest_header).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (StatusCode::OK, Some(digest)) = (status, digest) else {
        // No digest to go by (or an answer the name's own fetch explains
        // better, a 404 or a 401): the name is fetched as it is.
        return cached::serve(state, exchange, side, as_it_is).await;
    };
    if let Some(entry) = cached.as_ref().filter(|entry| digest == format!("sha256:{}", entry.sha256)) {
        link(&state.cache, &request, &request.key).await;
        let outcome = cached::from_cache(state, exchange, &request, entry, Served::Revalidated);
        return with_headers(outcome, &request, &pointer, entry);
    }
    if let (Some(entry), Some(left)) = (cached.as_deref(), quota_left(&pointer, &headers)) {
        let failed = Failed::Upstream(format!("the pull quota is down to {left}"));
        return unchecked(state, exchange, &request, &pointer, Some(entry), failed);
    }
    let Some(by_digest) = side.roles().digests.and_then(|digests| digests.by_digest(&request, &digest)) else {
        return cached::serve(state, exchange, side, as_it_is).await;
    };
    let target = by_digest.key.clone();
    let outcome = cached::serve(state, exchange, side, by_digest).await;
    match (failure_of_fetch(state, &outcome), cached.as_deref()) {
        // The new content could not be had: the name stays where it was.
        (Some(failed), Some(entry)) => given_up(state, exchange, &request, &pointer, Some(entry), failed),
        (Some(failed), None) => {
            state.kept.pointers.holds.hold(&request.key, state.clock.now(), &failed);
            outcome
        }
        (None, _) => {
            if matches!(&outcome, Outcome::Answered(answer) if answer.status() == StatusCode::OK) {
                link(&state.cache, &request, &target).await;
            }
            outcome
        }
    }
}

/// How an upstream answer of `status` failed, when it is a failure to fall
/// back from: a request to wait, or a server error.
fn failure_of(clock: &dyn pkgproxy_cache::Clock, status: StatusCode, headers: &HeaderMap) -> Option<Failed> {
    if let Some(limited) = Failed::rate_limited(status, headers, clock.now()) {
        return Some(limited);
    }
    status.is_server_error().then(|| Failed::Upstream(format!("the registry answered {status}")))
}

/// How the fetch of a name's new content by digest failed, when it did
/// (a side's own refusal, a `404` say, is its answer, not a failure).
fn failure_of_fetch(state: &State, outcome: &Outcome) -> Option<Failed> {
    match outcome {
        Outcome::Answered(answer) => failure_of(state.clock.as_ref(), answer.status(), answer.response.headers()),
        Outcome::Local(_) | Outcome::Failed(Failed::Refused(_)) => None,
        Outcome::Failed(failed) => Some(failed.clone()),
    }
}

/// The upstream failed the name with `failed`: held for as long as it
/// asked to be left alone, and served as [`unchecked`].
fn given_up(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    request: &CachedRequest,
    pointer: &Pointer,
    cached: Option<&Entry>,
    failed: Failed,
) -> Outcome {
    state.kept.pointers.holds.hold(&request.key, state.clock.now(), &failed);
    unchecked(state, exchange, request, pointer, cached, failed)
}

/// What the upstream says of the name now: the status and headers of one
/// `HEAD`, shared by every client asking at the same time.
async fn check(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    request: &CachedRequest,
) -> Result<(StatusCode, HeaderMap), Arc<FetchError>> {
    let agent = exchange.headers.get(USER_AGENT).cloned();
    let (shared, head) = (Arc::clone(state), request.clone());
    let run = move || async move { fetching::head(&shared, &head, agent).await.map_err(Arc::new) };
    state.kept.pointers.checks.run(&request.key, run).await
}

/// The name `request` asks for now points at what `target` holds,
/// confirmed now.
pub(super) async fn link(cache: &pkgproxy_cache::Cache, request: &CachedRequest, target: &str) {
    // The target, served whole, may be a moment from its commit.
    cache.settled_on(target).await;
    let (cache, key, target, class) = (cache.clone(), request.key.clone(), target.to_string(), request.class);
    match tokio::task::spawn_blocking(move || cache.link(&key, &target, class)).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => tracing::warn!(%error, "cannot move a name to its new content"),
        Err(_) => tracing::warn!("moving a name to its new content stopped"),
    }
}

/// The upstream could not say what the name stands for: the last content,
/// with a warning saying so, or `failed` when there is none.
fn unchecked(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    request: &CachedRequest,
    pointer: &Pointer,
    cached: Option<&Entry>,
    failed: Failed,
) -> Outcome {
    let Some(entry) = cached else { return failed.into() };
    state.stats.of(request.side, exchange.requester()).increment(SideCounter::StaleServed);
    tracing::info!(key = request.key, reason = %Reason::from(&failed), "serving a name's last content");
    let outcome = cached::from_cache(state, exchange, request, entry, Served::Stale);
    let Outcome::Answered(mut answer) = with_headers(outcome, request, pointer, entry) else {
        return Failed::Internal("cached body cannot be read".into()).into();
    };
    answer.reason = Some(Reason::from(&failed));
    let checked = state.clock.now().duration_since(entry.fetched_at_time()).unwrap_or_default();
    let ago = humantime::format_duration(Duration::from_secs(checked.as_secs()));
    let why = match &failed {
        Failed::Overloaded { .. } => "upstream rate-limited".to_string(),
        Failed::RateLimited { status: StatusCode::TOO_MANY_REQUESTS, .. } => "upstream rate-limited".to_string(),
        Failed::Offline => "pkgproxy is offline".to_string(),
        Failed::Upstream(reason) if reason.starts_with("the pull quota") => {
            format!("upstream {reason}, kept in reserve")
        }
        _ => "upstream unavailable".to_string(),
    };
    let warning = format!("299 - \"pkgproxy: served cached {} (checked {ago} ago): {why}\"", pointer.name);
    if let Ok(value) = HeaderValue::from_str(&warning) {
        answer.response.headers_mut().insert(WARNING, value);
    }
    Outcome::Answered(answer)
}

/// `outcome`, a cached answer for the name, with the side's headers and
/// the digest the name points at.
fn with_headers(outcome: Outcome, request: &CachedRequest, pointer: &Pointer, entry: &Entry) -> Outcome {
    match Finish::of(request).noted(outcome) {
        Outcome::Answered(mut answer) => {
            if let Ok(value) = HeaderValue::from_str(&format!("sha256:{}", entry.sha256)) {
                answer.response.headers_mut().insert(&pointer.digest_header, value);
            }
            Outcome::Answered(answer)
        }
        outcome => outcome,
    }
}

/// The pulls the upstream's quota has left, when at or below the reserve.
fn quota_left(pointer: &Pointer, headers: &HeaderMap) -> Option<u64> {
    let (header, reserve) = pointer.quota.as_ref()?;
    let value = headers.get(header)?.to_str().ok()?;
    let left = value.split(';').next()?.trim().parse::<u64>().ok()?;
    (left <= *reserve).then_some(left)
}
