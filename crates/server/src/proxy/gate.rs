//! The fleet's policy on the request path, between the cache and the
//! client: an artifact of a release the policy refuses is answered `403`
//! saying which rule and until when, before the cache or the upstream is
//! asked (so a lockfile install is held too, and nothing is fetched for a
//! refused client); a listing is served without the releases it refuses,
//! or, when it names one release the policy refuses and nothing it serves
//! can stand in (go's `@latest`), refused as that release's artifact is.
//! Both read what is cached when the client asks, so a change of rule
//! applies at once, online and offline, and the stored bytes stay the
//! upstream's.
//!
//! Only clients are judged: what pkgproxy fetches for itself (the times a
//! judgement reads, a download's prerequisites, a bundle taken in) is
//! whole.
//!
//! A filtered listing is another representation than the stored one: it
//! has a tag of its own, and a client's conditionals are judged on what it
//! is served, never on the stored body (a client holding a listing served
//! before a rule changed must not be told it is still current).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{
    HeaderValue, ACCEPT_RANGES, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_MATCH, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED, RANGE,
};
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use pkgproxy_policy::{Blocked, Ecosystem, Policy, Published, Release, Verdict};
use pkgproxy_sides::role::{Filtered, Gated, Gating, Judge, Judged, ReleaseName, Times};
use pkgproxy_sides::{CachedRequest, Mount, Refusal, Side, SideId, StoredBody};

use super::outcome::{Answer, Failed, Outcome};
use super::plan::{plan, Plan, Representation};
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
    tracing::info!(side = %side.id(), release = %named, rule = blocked.rule.name(), "refused by policy");
    Some(refused(blocked.line(&named), blocked.phrase(), format!("{named} {}", blocked.summary())))
}

/// The `403` a client is told a release is refused with: `line` in the
/// body, `phrase` in the status line (what clients that print the status
/// alone show), `rule` for the access log.
fn refused(line: String, phrase: String, rule: String) -> Outcome {
    let refusal = Refusal::forbidden(line).with_code("BLOCKED_BY_POLICY").with_phrase(phrase);
    Failed::Blocked { refusal, rule }.into()
}

/// The reason phrase of a refused listing whose refusal's phrase was not
/// kept.
const REFUSED_PHRASE: &str = "Blocked by pkgproxy policy";

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
    let Some(policy) = state.gate.policy() else { return Outcome::Answered(as_asked(answer, exchange)) };
    let now = state.clock.now();
    let stored = answer.stored.as_ref().map(|stored| stored.sha256.clone());
    if let Some(listing) = stored.as_ref().and_then(|sha256| state.gate.listing(&request.key, sha256, now)) {
        let how =
            Served { filtered: listing.served, etag: listing.etag, stored: listing.stored, phrase: listing.phrase };
        return served(answer, how, exchange);
    }
    let (parts, body) = answer.response.into_parts();
    let body = match Limited::new(body, METADATA_LIMIT as usize).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return Failed::Upstream(format!("the listing could not be read whole: {error}")).into(),
    };
    let answer = Answer { response: http::Response::from_parts(parts, ResponseBody::full(body.clone())), ..answer };
    let Some(ecosystem) = Ecosystem::of_side(side.id().as_str()) else {
        return Outcome::Answered(as_asked(answer, exchange));
    };
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
        phrases: HashMap::new(),
    };
    let (request_copy, body_copy) = (request.clone(), body.clone());
    let made = tokio::task::spawn_blocking(move || {
        let mut judging = judging;
        let state = Arc::clone(&judging.state);
        let side = state.sides.get(judging.side);
        let filtered = side
            .roles()
            .gating
            .map_or(Filtered::AsStored, |gating| gating.filtered(&request_copy, &body_copy, &mut judging));
        let phrase = match &filtered {
            Filtered::Refused(line) => judging.phrases.remove(line),
            _ => None,
        };
        (filtered, phrase, judging.until, judging.borrowed)
    })
    .await;
    let Ok((filtered, phrase, until, borrowed)) = made else {
        return Failed::Internal("the policy's filter of a listing failed".to_owned()).into();
    };
    let kept = match &filtered {
        Filtered::Rewritten(body) => Some(kept(state, body.clone()).await),
        _ => None,
    };
    let etag = kept.as_ref().map(|kept| kept.etag.clone());
    let body_stored = kept.and_then(|kept| kept.stored);
    if let Some(sha256) = stored {
        let (served, etag, phrase, stored) = (filtered.clone(), etag.clone(), phrase.clone(), body_stored.clone());
        let listing = Listing { sha256, generation, from: now, until, served, stored, etag, phrase };
        state.gate.keep_listing(&request.key, listing, borrowed, now);
    }
    served(answer, Served { filtered, etag, stored: body_stored, phrase }, exchange)
}

/// A rewritten listing's tag, and its body kept as a stored one.
struct Kept {
    etag: String,
    stored: Option<StoredBody>,
}

/// `body`'s tag (its bytes' own, so it changes with them), and the body
/// written to a file of its own, unnamed (gone with its last handle), so
/// that its side keeps a compressed form of it as of a stored body (npm's
/// documents, sent compressed to a hundred clients). Without the file, it
/// is served from memory alone.
async fn kept(state: &State, body: Bytes) -> Kept {
    use sha2::Digest;
    let sha256 = hex::encode(sha2::Sha256::digest(&body));
    let etag = format!("\"p{}\"", &sha256[..32]);
    let folder = state.settings.cache_dir.clone();
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<StoredBody> {
        use std::io::Write;
        let mut file = tempfile::tempfile_in(&folder)?;
        file.write_all(&body)?;
        Ok(StoredBody { sha256, size: body.len() as u64, file: Arc::new(file) })
    })
    .await;
    match written {
        Ok(Ok(stored)) => Kept { etag, stored: Some(stored) },
        Ok(Err(error)) => {
            tracing::warn!(%error, "a filtered listing is served from memory alone");
            Kept { etag, stored: None }
        }
        Err(_) => Kept { etag, stored: None },
    }
}

/// How a listing is served under the policy.
struct Served {
    filtered: Filtered,
    /// A rewritten body's tag.
    etag: Option<String>,
    /// A rewritten body, as a stored one.
    stored: Option<StoredBody>,
    /// A refusal's reason phrase.
    phrase: Option<String>,
}

/// What a client is answered for `answer`, a listing, served as the policy
/// lets it be (`how`), or `304` where its conditionals hold for that.
fn served(answer: Answer, how: Served, exchange: &Exchange<'_>) -> Outcome {
    match how.filtered {
        Filtered::AsStored => Outcome::Answered(as_asked(answer, exchange)),
        Filtered::Rewritten(body) => {
            Outcome::Answered(as_asked(with_body(answer, body, how.etag, how.stored), exchange))
        }
        Filtered::Refused(line) => {
            let rule = line.clone();
            refused(line, how.phrase.unwrap_or_else(|| REFUSED_PHRASE.to_owned()), rule)
        }
    }
}

/// The headers of a client's request to the cache for a listing the policy
/// filters: without its conditionals and range, which are judged on the
/// listing as served.
pub fn unconditional(headers: &HeaderMap) -> HeaderMap {
    let mut headers = headers.clone();
    for name in [IF_NONE_MATCH, IF_MODIFIED_SINCE, IF_MATCH, IF_UNMODIFIED_SINCE, IF_RANGE, RANGE] {
        headers.remove(name);
    }
    headers
}

/// `answer` with `body` in place of its own (`stored`: the same bytes as a
/// stored body, for the side's compressed forms of them): its own tag and
/// no date; and asked again by the client each time (what the policy took
/// out comes back when a rule changes, or when a release is old enough).
fn with_body(answer: Answer, body: Bytes, etag: Option<String>, stored: Option<StoredBody>) -> Answer {
    let (mut parts, _) = answer.response.into_parts();
    parts.headers.remove(LAST_MODIFIED);
    parts.headers.remove(ETAG);
    if let Some(etag) = etag.and_then(|etag| HeaderValue::from_str(&etag).ok()) {
        parts.headers.insert(ETAG, etag);
    }
    parts.headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    Answer { response: http::Response::from_parts(parts, ResponseBody::full(body)), stored, ..answer }
}

/// `answer`, a listing as served, or `304 Not Modified` when the client's
/// conditionals hold for it.
fn as_asked(answer: Answer, exchange: &Exchange<'_>) -> Answer {
    let headers = answer.response.headers();
    let text = |value: Option<&HeaderValue>| value.and_then(|value| value.to_str().ok()).map(str::to_owned);
    let (etag, last_modified) = (text(headers.get(ETAG)), text(headers.get(LAST_MODIFIED)));
    let representation = Representation {
        etag: etag.as_deref(),
        last_modified: last_modified.as_deref(),
        date_validates_ranges: false,
        length: None,
    };
    if plan(exchange.method, exchange.headers, &representation) != Plan::NotModified {
        return answer;
    }
    let (mut parts, _) = answer.response.into_parts();
    parts.status = StatusCode::NOT_MODIFIED;
    for name in [CONTENT_TYPE, CONTENT_LENGTH, ACCEPT_RANGES] {
        parts.headers.remove(name);
    }
    Answer { response: http::Response::from_parts(parts, ResponseBody::Empty), stored: None, ..answer }
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
    /// The reason phrase of each refusal's line, for a listing refused
    /// whole with one of them.
    phrases: HashMap<String, String>,
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
                let line = blocked.line(&release);
                self.phrases.insert(line.clone(), blocked.phrase());
                Judged::Blocked(line)
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
