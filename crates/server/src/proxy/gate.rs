//! The fleet's policy on the request path, between the cache and the
//! client: an artifact of a release the policy refuses is answered `403`
//! saying which rule and until when, before the cache or the upstream is
//! asked (so a lockfile install is held too, and nothing is fetched for a
//! refused client); a listing is served without the releases it refuses.
//! Both read what is cached when the client asks, so a change of rule
//! applies at once, online and offline, and the stored bytes stay the
//! upstream's.
//!
//! Only clients are judged: what pkgproxy fetches for itself (the times a
//! judgement reads, a download's prerequisites, a bundle taken in) is
//! whole.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, ETAG};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use pkgproxy_policy::{Blocked, Ecosystem, Policy, Published, Release, Verdict};
use pkgproxy_sides::role::{Gated, Gating, Judge, Judged, ReleaseName, Times};
use pkgproxy_sides::{CachedRequest, Mount, Refusal, Side, SideId};

use super::outcome::{Answer, Failed, Outcome};
use crate::body::ResponseBody;
use crate::context::Exchange;
use crate::gate::{Listing, Refused};
use crate::state::State;

/// The largest held metadata read for its times, and the largest listing
/// filtered (npm's largest documents run to tens of megabytes).
pub(super) const METADATA_LIMIT: u64 = 256 * 1024 * 1024;
/// How many metadata files one listing's filter fetches at once.
const FETCHED_AT_ONCE: usize = 8;

/// How pkgproxy fetches for itself through its cache (the metadata that
/// says when a release was published): the cache path's own fetch, handed
/// in by the path that judges, which judging then does not depend on.
pub type FetchOwn = for<'a> fn(
    &'a Arc<State>,
    &'a dyn Side,
    CachedRequest,
    Mount,
) -> Pin<Box<dyn Future<Output = Option<Bytes>> + Send + 'a>>;

/// The policy and the side's gating role, when `exchange` is a client's
/// and the side's releases are judged.
fn judged<'s>(state: &State, exchange: &Exchange<'_>, side: &'s dyn Side) -> Option<(Arc<Policy>, &'s dyn Gating)> {
    if exchange.client.is_none() || exchange.supply.is_some() {
        return None;
    }
    let policy = state.gate.policy()?;
    Some((policy, side.roles().gating?))
}

/// The refusal of `request`, an artifact of a release the policy does not
/// serve; `None`: it is served. Its publish time is read from what is
/// held, else fetched with `fetch`.
pub async fn refusal(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    request: &CachedRequest,
    fetch: FetchOwn,
) -> Option<Outcome> {
    let (policy, gating) = judged(state, exchange, side)?;
    let Gated::Artifact { release, times_from } = gating.gated(request)? else { return None };
    let ecosystem = Ecosystem::of_side(side.id().as_str())?;
    let published = match policy.needs_times() {
        true => published(state, side, gating, &release, *times_from, exchange.mount, fetch).await,
        false => Published::NotNeeded,
    };
    let named = Release { ecosystem, name: &release.name, version: &release.version };
    let Verdict::Blocked(blocked) = policy.judge(&named, published, state.clock.now()) else { return None };
    note(state, side.id(), &named, &blocked, request.access.is_some());
    let line = blocked.line(&named);
    tracing::info!(side = %side.id(), release = %named, rule = blocked.rule.name(), "refused by policy");
    let refusal = Refusal::forbidden(line).with_code("BLOCKED_BY_POLICY").with_phrase(blocked.phrase());
    Some(Failed::Blocked { refusal, rule: format!("{named} {}", blocked.summary()) }.into())
}

fn note(state: &State, side: SideId, release: &Release<'_>, blocked: &Blocked, private: bool) {
    let at = state.clock.now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_secs());
    state.gate.refused(Refused {
        at,
        side: side.as_str(),
        release: release.to_string(),
        rule: blocked.rule.name(),
        because: blocked.because(),
        private,
    });
}

/// When `release` was published, as the metadata `source` says: read from
/// what is held, else fetched with `fetch` (asked again, at most every few
/// seconds, when what is held does not name it: it may be new).
pub(super) fn published<'a>(
    state: &'a Arc<State>,
    side: &'a dyn Side,
    gating: &'a dyn Gating,
    release: &'a ReleaseName,
    source: CachedRequest,
    mount: Mount,
    fetch: FetchOwn,
) -> Pin<Box<dyn Future<Output = Published> + Send + 'a>> {
    // Boxed: serving the metadata goes through the cache, which judges
    // again (the metadata, which is no artifact).
    Box::pin(published_from(state, side, gating, release, source, mount, fetch))
}

async fn published_from(
    state: &Arc<State>,
    side: &dyn Side,
    gating: &dyn Gating,
    release: &ReleaseName,
    mut source: CachedRequest,
    mount: Mount,
    fetch: FetchOwn,
) -> Published {
    let held = state.cache.lookup(&source.key);
    if let Some(entry) = &held {
        if let Some(times) = held_times(state, gating, &source, &entry.sha256).await {
            if let Some(at) = times.get(&release.timed_as) {
                return Published::At(*at);
            }
        }
        if !state.gate.may_ask_again(&source.key) {
            return Published::Unknown;
        }
        source.wanted.fresh_for = std::time::Duration::ZERO;
    }
    let Some(body) = fetch(state, side, source.clone(), mount).await else {
        return Published::Unknown;
    };
    let times = gating.times(&source, &body);
    let at = times.get(&release.timed_as).copied();
    if let Some(entry) = state.cache.lookup(&source.key) {
        state.gate.keep_times(&source.key, &entry.sha256, Arc::new(times));
    }
    at.map_or(Published::Unknown, Published::At)
}

/// The times of the held body `sha256` of `source`: parsed once per body.
async fn held_times(
    state: &Arc<State>,
    gating: &dyn Gating,
    source: &CachedRequest,
    sha256: &str,
) -> Option<Arc<Times>> {
    if let Some(times) = state.gate.held_times(&source.key, sha256) {
        return Some(times);
    }
    let (cache, key) = (state.cache.clone(), source.key.clone());
    let body = tokio::task::spawn_blocking(move || cache.read_small(&key, METADATA_LIMIT)).await.ok()??;
    let times = Arc::new(gating.times(source, &body));
    state.gate.keep_times(&source.key, sha256, Arc::clone(&times));
    Some(times)
}

/// Whether `request`'s answers are a listing the policy filters for this
/// client.
pub fn filters(state: &State, exchange: &Exchange<'_>, side: &dyn Side, request: &CachedRequest) -> bool {
    judged(state, exchange, side).is_some_and(|(_, gating)| matches!(gating.gated(request), Some(Gated::Listing)))
}

/// `outcome`, a listing's, without the releases the policy refuses; the
/// metadata giving times the listing does not itself is fetched with
/// `fetch`.
pub async fn filtered(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    request: &CachedRequest,
    fetch: FetchOwn,
    outcome: Outcome,
) -> Outcome {
    let Outcome::Answered(answer) = outcome else { return outcome };
    if answer.status() != StatusCode::OK || *exchange.method == Method::HEAD {
        return Outcome::Answered(answer);
    }
    let Some(policy) = state.gate.policy() else { return Outcome::Answered(answer) };
    let now = state.clock.now();
    let stored = answer.stored.as_ref().map(|stored| stored.sha256.clone());
    if let Some(listing) = stored.as_ref().and_then(|sha256| state.gate.listing(&request.key, sha256, now)) {
        return match listing.body {
            None => Outcome::Answered(answer),
            Some(body) => Outcome::Answered(with_body(answer, body)),
        };
    }
    let (parts, body) = answer.response.into_parts();
    let body = match Limited::new(body, METADATA_LIMIT as usize).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return Failed::Upstream(format!("the listing could not be read whole: {error}")).into(),
    };
    let answer = Answer { response: http::Response::from_parts(parts, ResponseBody::full(body.clone())), ..answer };
    let Some(ecosystem) = Ecosystem::of_side(side.id().as_str()) else { return Outcome::Answered(answer) };
    let generation = state.gate.generation();
    let judging = Judging {
        policy,
        ecosystem,
        now,
        state: Arc::clone(state),
        side: side.id(),
        mount: exchange.mount,
        fetch,
        handle: tokio::runtime::Handle::current(),
        until: None,
        borrowed: false,
    };
    let (request_copy, body_copy) = (request.clone(), body.clone());
    let made = tokio::task::spawn_blocking(move || {
        let mut judging = judging;
        let state = Arc::clone(&judging.state);
        let side = state.sides.get(judging.side);
        let filtered = side.roles().gating.and_then(|gating| gating.filtered(&request_copy, &body_copy, &mut judging));
        (filtered, judging.until, judging.borrowed)
    })
    .await;
    let Ok((filtered, until, borrowed)) = made else {
        return Failed::Internal("the policy's filter of a listing failed".to_owned()).into();
    };
    if let Some(sha256) = stored {
        let listing = Listing { sha256, generation, until, body: filtered.clone() };
        state.gate.keep_listing(&request.key, listing, borrowed, now);
    }
    match filtered {
        Some(body) => Outcome::Answered(with_body(answer, body)),
        None => Outcome::Answered(answer),
    }
}

/// `answer` with `body` in place of its own: no longer the stored bytes,
/// so no compressed form of them and not their tag.
fn with_body(answer: Answer, body: Bytes) -> Answer {
    let (mut parts, _) = answer.response.into_parts();
    parts.headers.remove(ETAG);
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    Answer { response: http::Response::from_parts(parts, ResponseBody::full(body)), stored: None, ..answer }
}

/// The policy as a side's listing filter asks it, on a blocking thread.
struct Judging {
    policy: Arc<Policy>,
    ecosystem: Ecosystem,
    now: SystemTime,
    state: Arc<State>,
    side: SideId,
    mount: Mount,
    fetch: FetchOwn,
    handle: tokio::runtime::Handle,
    /// The earliest a refused release is served by itself.
    until: Option<SystemTime>,
    /// Whether times were read from other metadata.
    borrowed: bool,
}

impl Judge for Judging {
    fn needs_times(&self) -> bool {
        self.policy.needs_times()
    }

    fn judge(&mut self, name: &str, version: &str, published: Option<SystemTime>) -> Judged {
        let release = Release { ecosystem: self.ecosystem, name, version };
        let published = match (self.policy.needs_times(), published) {
            (false, _) => Published::NotNeeded,
            (true, Some(at)) => Published::At(at),
            (true, None) => Published::Unknown,
        };
        match self.policy.judge(&release, published, self.now) {
            Verdict::Blocked(blocked) => {
                if let Some(until) = blocked.until {
                    self.until = Some(self.until.map_or(until, |earliest| earliest.min(until)));
                }
                Judged::Blocked(blocked.line(&release))
            }
            _ => Judged::Served,
        }
    }

    fn fetch(&mut self, requests: Vec<CachedRequest>) -> Vec<Option<Bytes>> {
        use futures_util::StreamExt;
        self.borrowed = true;
        let (state, side, mount, fetch) = (Arc::clone(&self.state), self.side, self.mount, self.fetch);
        self.handle.block_on(async move {
            let side = state.sides.get(side);
            futures_util::stream::iter(requests)
                .map(|request| fetch(&state, side, request, mount))
                .buffered(FETCHED_AT_ONCE)
                .collect()
                .await
        })
    }
}
