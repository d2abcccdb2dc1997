//! Serving a request through the cache: a fresh entry is answered at once;
//! otherwise the client joins the key's shared fetch (a revalidation when an
//! entry is cached) and gets what it brings. A stale entry is served when
//! the upstream cannot be asked, fails or says it is too busy (`429`), so
//! clients keep working while a mirror is down or a store sheds load.
//!
//! What the side expects of the key overrides all of that: an entry that
//! does not match the expected checksum is superseded (never served, not
//! even stale), one that matches needs no revalidation, and expected bytes
//! the store holds under another name are served without a fetch.
//!
//! What a side needs fetched before it can check a download (the go side's
//! checksum database records) is itself served through the cache, for
//! pkgproxy itself: an immutable record is asked for once and shared by
//! every download that needs it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use pkgproxy_cache::{
    freshness, Class, ClientDirectives, Entry, FetchSpec, Freshness, Joined, PassedAnswer, Phase, Window,
};
use pkgproxy_cluster::SharedFirst;
use pkgproxy_metrics::SideCounter;
use pkgproxy_sides::role::UpstreamFailures;
use pkgproxy_sides::{CachedRequest, ClientCacheControl, LocatedHost, Mount, Origin, Side, SideId, UpstreamAuth};
use pkgproxy_upstream::offline::Mode;

use super::access;
use super::answer;
use super::fetching;
use super::finish::Finish;
use super::follow;
use super::lookup::{self, Held, Lookup, Moment};
use super::outcome::Served;
use super::outcome::{Answer, Failed, Outcome};
use super::reason::Reason;
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;
use crate::stats::Requester;

/// The largest body (by its announced length) whose client waits for the
/// whole of it to be checked before its answer starts: it costs a small
/// file's download time, and a large one is streamed as it arrives.
const CHECKED_BEFORE_ANSWER: u64 = 256 * 1024;

/// Serves `request`, which `side` decided to cache, to `exchange`.
pub async fn serve(state: &Arc<State>, exchange: &Exchange<'_>, side: &dyn Side, request: CachedRequest) -> Outcome {
    if let Some(refused) = super::gate::refusal(state, exchange, side, &request, fetch_own).await {
        return refused;
    }
    let finish = Finish::of(&request);
    if !super::gate::filters(state, exchange, side, &request) {
        let (outcome, reason, answered_by) = through_the_cache(state, exchange, side, request).await;
        return finish.because(reason).answered_by(answered_by).apply(state, side, exchange, outcome).await;
    }
    // A listing the policy filters: the cache serves the stored body whole,
    // and the client's conditionals are judged on what it is served.
    let finish = finish.filtered_as(request.clone(), fetch_own);
    let unconditional = super::gate::unconditional(exchange.headers);
    let whole = exchange.with_headers(&unconditional);
    let (outcome, reason, answered_by) = through_the_cache(state, &whole, side, request).await;
    finish.because(reason).answered_by(answered_by).apply(state, side, exchange, outcome).await
}

/// Serves `request` from the cache, or from the fetch it joins: the
/// outcome, why it is not a plain hit, and the upstream that answered.
async fn through_the_cache(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    request: CachedRequest,
) -> (Outcome, Option<Reason>, Option<Arc<str>>) {
    // An answer that is a plain hit, or refused before any fetch.
    let plain = |outcome: Outcome| (outcome, None, None);
    let stats = state.stats.of(request.side, exchange.requester());
    let (cached, reason) = match settled_lookup(state, exchange, &request).await {
        Lookup::Remembered(remembered) => {
            stats.add(SideCounter::BytesFromCache, remembered.body.len() as u64);
            return plain(Outcome::Answered(answer::passed(exchange, &remembered, Served::Hit)));
        }
        Lookup::Fresh(entry) => return plain(hit(state, exchange, side, &request, &entry).await),
        Lookup::Adoptable { sha256, size } => match Box::pin(adopt(state, &request, sha256, size)).await {
            Some(entry) => return plain(hit(state, exchange, side, &request, &entry).await),
            None => (None, Reason::NotCached),
        },
        Lookup::Stale { entry, why } => (Some(entry), why),
        Lookup::Missing(why) => (None, why),
    };
    // Boxed: a fetch's state is kilobytes a hit's task would otherwise
    // carry, and copy, on every request.
    Box::pin(through_a_fetch(state, exchange, side, request, cached, reason)).await
}

/// Serves `request`, which the cache does not hold fresh (`cached`, if it
/// holds it at all, is stale for `reason`), from a fetch: one started, or
/// one under way that it joins.
async fn through_a_fetch(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    request: CachedRequest,
    cached: Option<Arc<Entry>>,
    reason: Reason,
) -> (Outcome, Option<Reason>, Option<Arc<str>>) {
    let plain = |outcome: Outcome| (outcome, None, None);
    let checks = prerequisites(state, side, &request, exchange).await;
    let mut request = request;
    let withheld_from = locate(side, &mut request, &checks);
    let verifier = side.verifier(&request, &checks);
    let spec = FetchSpec {
        key: request.key.clone(),
        class: request.class,
        expected: request.wanted.expected.clone(),
        revalidating: cached.clone().filter(|e| !e.validators.is_empty()),
        verifier: verifier.clone(),
    };
    let conditional = spec.revalidating.clone();
    let shared = shared_tier(state, exchange, &request, &spec);
    // The bucket and the peers hand what they hold to any node: content
    // only some clients may read is confirmed for this one first, as the
    // upstream would have done had the fetch gone to it.
    if shared.is_some() {
        if let Err(refused) = access::confirmed(state, exchange, side, &request).await {
            return plain(refused);
        }
    }
    let expected = spec.expected.clone();
    let joined = state.cache.fetch_from(spec, || {
        let upstream = fetching::source(state, &request, exchange, conditional.as_deref());
        match shared {
            Some((tier, None)) => {
                let shared = SharedFirst::new(tier, &request.key, expected, upstream);
                match state.upstream.switch.mode() == Mode::Offline {
                    true => Box::new(shared.without_lease()),
                    false => Box::new(shared),
                }
            }
            Some((tier, Some(fresh))) => Box::new(SharedFirst::changing(tier, &request.key, fresh, upstream)),
            None => upstream,
        }
    });
    // Another client's fetch says nothing of whether this one may read it,
    // nor does one made without its credentials.
    let confirms = joined.started && withheld_from.is_none();
    if !confirms {
        if let Err(refused) = access::confirmed(state, exchange, side, &request).await {
            return plain(refused);
        }
    }
    let judged = verifier.as_ref().is_some_and(|v| v.judges_body());
    let phase = if judged { joined.fetch.checked().await } else { joined.fetch.answered().await };
    // A small body is answered once it is checked: one that fails its
    // check is then refused in so many words, not cut off after its head.
    let phase = match phase {
        Phase::Streaming(head) if head.content_length.is_some_and(|length| length <= CHECKED_BEFORE_ANSWER) => {
            joined.fetch.checked().await
        }
        phase => phase,
    };
    if let (Some(host), Phase::Passed(passed)) = (&withheld_from, &phase) {
        if matches!(passed.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return plain(refused_without_credentials(host, passed.status).into());
        }
    }
    if joined.started {
        report_upstream_status(exchange, &phase);
        if phase.is_body() && confirms {
            access::granted(state, side, &request).await;
        }
        follow::follow(state, side, exchange.mount, &request, Arc::clone(&joined.fetch), fetch_ahead);
    }
    let outcome = from_fetch(state, exchange, side, &request, cached.as_ref(), &joined, phase);
    (outcome, Some(reason), joined.fetch.answered_by())
}

/// What the cache holds for `request` now. A body served whole a moment
/// ago may still be on its way into the index: looked up again once it is
/// there, as a client asking right after another expects. (What its side
/// reads of other keys, it reads whole already: see `Cache::read_small`.)
async fn settled_lookup(state: &State, exchange: &Exchange<'_>, request: &CachedRequest) -> Lookup {
    let moment = Moment::of(state, exchange);
    let looked = lookup::look(&Held(state), request, &moment);
    match looked {
        Lookup::Stale { .. } | Lookup::Missing(_) if state.cache.settled_on(&request.key).await => {
            lookup::look(&Held(state), request, &moment)
        }
        looked => looked,
    }
}

/// Where `request` is fetched from, when only its prerequisites' bodies
/// `checks` say (the fetching role's `located`): the host a client's
/// credentials were kept from, when it is not the registry's own.
fn locate(side: &dyn Side, request: &mut CachedRequest, checks: &[Bytes]) -> Option<String> {
    let located = side.roles().fetching?.located(request, checks)?;
    let withheld_from = match located.host {
        LocatedHost::Foreign => withhold_credentials(request, &located.origin),
        LocatedHost::Registry => None,
    };
    request.origin = located.origin;
    withheld_from
}

/// Takes a client's own credentials off `request`, which goes to `origin`,
/// a host that is not its registry's: they go only to the registry they
/// were given for. The host they were withheld from, if they were.
fn withhold_credentials(request: &mut CachedRequest, origin: &Origin) -> Option<String> {
    let had = std::mem::take(&mut request.asking.auth);
    let host = origin.instances.first().map(|instance| crate::redact::without_user(instance));
    host.filter(|_| matches!(had, UpstreamAuth::Client(_)))
}

/// What the client is told when `host`, asked without its credentials,
/// refused: pkgproxy does not send them there.
fn refused_without_credentials(host: &str, status: StatusCode) -> Failed {
    let reason = format!(
        "{host} holds this file and answered {status} to a request without credentials: pkgproxy sends a \
         client's token only to the registry it was given for, and {host} is not that registry"
    );
    Failed::Refused(pkgproxy_sides::Refusal::new(StatusCode::FORBIDDEN, reason).with_code("DENIED"))
}

/// Serves `entry`, which answers `request` without the upstream, once the
/// client may read it.
async fn hit(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    request: &CachedRequest,
    entry: &Entry,
) -> Outcome {
    if let Err(refused) = access::confirmed(state, exchange, side, request).await {
        return refused;
    }
    from_cache(state, exchange, request, entry, Served::Hit)
}

/// The cluster's shared tier, when this fetch may be answered from it: a
/// miss, not a revalidation. For what changes under its name, with the
/// test a published entry must pass to be served as fresh (the same this
/// node applies to its own entries). Read also while offline: the bucket is
/// the cluster's, not an upstream.
fn shared_tier(
    state: &State,
    exchange: &Exchange<'_>,
    request: &CachedRequest,
    spec: &FetchSpec,
) -> Option<(Arc<pkgproxy_cluster::SharedTier>, Option<pkgproxy_cluster::IsFresh>)> {
    // A revalidation asks the upstream; bytes handed in are their own.
    if spec.revalidating.is_some() || exchange.supply.is_some() {
        return None;
    }
    let tier = state.cluster.as_ref()?.tier()?;
    if spec.class == Class::Immutable {
        return Some((tier, None));
    }
    let directives = match request.wanted.client_cache_control {
        ClientCacheControl::Honoured => ClientDirectives::from_headers(exchange.headers),
        ClientCacheControl::Ignored => ClientDirectives::default(),
    };
    let window = match state.upstream.switch.frozen() {
        true => Window::Frozen,
        false => Window::For(request.wanted.fresh_for),
    };
    let clock = Arc::clone(&state.clock);
    let fresh = move |entry: &Entry| freshness(entry, clock.now(), window, directives) == Freshness::Fresh;
    Some((tier, Some(Arc::new(fresh))))
}

/// The answer a fetch's `phase` gives the request.
fn from_fetch(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    request: &CachedRequest,
    cached: Option<&Arc<Entry>>,
    joined: &Joined,
    phase: Phase,
) -> Outcome {
    let (stats, fetch, held) = (state.stats.of(side.id(), exchange.requester()), &joined.fetch, joined.held);
    match phase {
        Phase::Streaming(head) => {
            Outcome::Answered(answer::from_fetch(exchange, fetch, &head, request.reply.dated_resume))
        }
        Phase::Checked { entry, body } if held => from_body(state, exchange, request, &entry, body, Served::Hit),
        Phase::Done(entry) if held => from_cache(state, exchange, request, &entry, Served::Hit),
        Phase::Checked { entry, body } => from_body(state, exchange, request, &entry, body, Served::Miss),
        Phase::Done(entry) => from_cache(state, exchange, request, &entry, Served::Miss),
        Phase::NotModified(entry) => {
            stats.increment(SideCounter::Revalidations);
            from_cache(state, exchange, request, &entry, Served::Revalidated)
        }
        Phase::Passed(passed) => {
            let failures = side.roles().fetching.map_or(UpstreamFailures::PASSED_ON, |f| f.upstream_failures());
            let wait = match cached {
                None if failures.waits_fail => told_to_wait(&passed, state.clock.now()),
                _ => None,
            };
            match (cached, wait) {
                (Some(entry), _)
                    if passed.status.is_server_error() || passed.status == StatusCode::TOO_MANY_REQUESTS =>
                {
                    let why = Reason::UpstreamFailed(format!("it answered {}", passed.status));
                    stale(state, exchange, request, entry, why)
                }
                // Told as the side says, for clients that would sleep it.
                (None, Some(failed)) => failed.into(),
                // One that asks to be left alone a while (`Retry-After`) is
                // passed on: the client is told when to ask again.
                (None, None) if passed.status.is_server_error() && !asks_to_wait(&passed) && failures.errors_fail => {
                    Failed::Upstream(format!("the upstream answered {}", passed.status)).into()
                }
                _ => {
                    if let Some(remembering) = side.roles().remembering {
                        remembering.remember(request, &passed, tokio::time::Instant::now().into_std());
                    }
                    Outcome::Answered(answer::passed(exchange, &passed, Served::Miss))
                }
            }
        }
        Phase::Failed(error) => match cached {
            Some(entry) => stale(state, exchange, request, entry, Reason::from(&Failed::of_fetch(&error))),
            None => Failed::of_fetch(&error).into(),
        },
        // Passed through, not cached: read through the download's handle.
        Phase::Uncached { head, .. } => {
            Outcome::Answered(answer::from_fetch(exchange, fetch, &head, request.reply.dated_resume))
        }
        Phase::Asking => Failed::Upstream("the fetch ended without an answer".to_string()).into(),
    }
}

/// The failure an upstream's answer is when it asks to be left alone (a
/// `429`, a `503` with `Retry-After`), read at `now`.
fn told_to_wait(passed: &PassedAnswer, now: std::time::SystemTime) -> Option<Failed> {
    let headers = passed
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .filter_map(|(_, value)| Some((http::header::RETRY_AFTER, http::HeaderValue::from_str(value).ok()?)))
        .collect();
    Failed::rate_limited(passed.status, &headers, now)
}

/// Whether an upstream's answer says when to ask again.
fn asks_to_wait(passed: &PassedAnswer) -> bool {
    passed.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
}

/// Tells the shadows that compare what the upstream answered the request
/// whose miss started the fetch. A `304` is the answer to pkgproxy's own
/// revalidation, which the client did not ask for: not compared.
fn report_upstream_status(exchange: &Exchange<'_>, phase: &Phase) {
    let status = match phase {
        phase if phase.is_body() => StatusCode::OK,
        Phase::Passed(passed) => passed.status,
        _ => return,
    };
    exchange.upstream_answer.report(status.as_u16());
}

/// The expected bytes, held under another name (an index file fetched by
/// name whose by-hash copy is cached), made the entry of `request`'s key:
/// served with no upstream request at all.
async fn adopt(state: &Arc<State>, request: &CachedRequest, sha256: String, size: u64) -> Option<Arc<Entry>> {
    let (cache, key, class) = (state.cache.clone(), request.key.clone(), request.class);
    let adopted = tokio::task::spawn_blocking(move || cache.adopt(&key, &sha256, size, class)).await;
    match adopted {
        Ok(Ok(entry)) => entry,
        Ok(Err(error)) => {
            tracing::warn!(key = request.key, %error, "cannot adopt a stored copy");
            None
        }
        Err(_) => None,
    }
}

fn stale(state: &Arc<State>, exchange: &Exchange<'_>, request: &CachedRequest, entry: &Entry, why: Reason) -> Outcome {
    tracing::info!(key = request.key, reason = %why, "revalidation failed; serving the cached entry");
    state.stats.of(request.side, exchange.requester()).increment(SideCounter::StaleServed);
    match from_cache(state, exchange, request, entry, Served::Stale) {
        Outcome::Answered(answer) => Outcome::Answered(Answer { reason: Some(why), ..answer }),
        outcome => outcome,
    }
}

pub(super) fn from_cache(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    request: &CachedRequest,
    entry: &Entry,
    served: Served,
) -> Outcome {
    match state.cache.open_body(entry) {
        Ok(file) => from_body(state, exchange, request, entry, file, served),
        Err(error) => {
            tracing::error!(key = request.key, %error, "cached body cannot be opened");
            Failed::Internal("cached body cannot be read".to_string()).into()
        }
    }
}

/// Serves `entry` with its body read through `file`.
fn from_body(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    request: &CachedRequest,
    entry: &Entry,
    file: Arc<std::fs::File>,
    served: Served,
) -> Outcome {
    // A hit is a client's: what pkgproxy reads for itself (a
    // prerequisite, a fetch ahead, a warm) is a use alone.
    match (served, exchange.client) {
        (Served::Miss, _) | (_, None) => state.cache.touch(&request.key),
        (_, Some(_)) => state.cache.hit(&request.key),
    }
    if let Some(client) = exchange.client {
        crate::browse::served(&state.browsing, state.clock.as_ref(), client.addr.ip(), request);
    }
    if let Some(cluster) = &state.cluster {
        cluster.accessed(&request.key, entry, || Ok(Arc::clone(&file)));
    }
    let (answer, sent) = answer::from_entry(exchange, entry, file, served, &request.reply);
    if served != Served::Miss {
        state.stats.of(request.side, exchange.requester()).add(SideCounter::BytesFromCache, sent);
    }
    Outcome::Answered(answer)
}

/// The bodies of `request`'s prerequisites, in order, up to the first that
/// could not be had as a `200` (each, with an empty body for one not had,
/// when they are independent). Fetched from the exchange's supply when it
/// holds them.
fn prerequisites<'a>(
    state: &'a Arc<State>,
    side: &'a dyn Side,
    request: &'a CachedRequest,
    exchange: &'a Exchange<'a>,
) -> Pin<Box<dyn Future<Output = Vec<Bytes>> + Send + 'a>> {
    // Boxed: serving a prerequisite goes through the cache, which asks for
    // prerequisites again (of the prerequisite, which has none).
    Box::pin(async move {
        let mut bodies = Vec::new();
        let Some(fetching) = side.roles().fetching else { return bodies };
        let prerequisites = fetching.prerequisites(request);
        if fetching.prerequisites_independent() {
            let each = prerequisites
                .into_iter()
                .map(|prerequisite| fetch_for_pkgproxy(state, side, prerequisite, exchange.mount, exchange.supply));
            let had = futures_util::future::join_all(each).await;
            return had.into_iter().map(Option::unwrap_or_default).collect();
        }
        for prerequisite in prerequisites {
            match fetch_for_pkgproxy(state, side, prerequisite, exchange.mount, exchange.supply).await {
                Some(body) => bodies.push(body),
                None => break,
            }
        }
        bodies
    })
}

/// `request` fetched ahead of a client ([`follow`]).
fn fetch_ahead(state: Arc<State>, side: SideId, mount: Mount, request: CachedRequest) -> follow::FetchingAhead {
    Box::pin(async move {
        fetch_for_pkgproxy(&state, state.sides.get(side), request, mount, None).await;
    })
}

/// [`fetch_for_pkgproxy`] of what the fleet's policy reads (no supply), as
/// the gate takes it.
pub(super) fn fetch_own<'a>(
    state: &'a Arc<State>,
    side: &'a dyn Side,
    request: CachedRequest,
    mount: Mount,
) -> Pin<Box<dyn Future<Output = Option<Bytes>> + Send + 'a>> {
    Box::pin(fetch_for_pkgproxy(state, side, request, mount, None))
}

/// The body of `request` served through the cache for pkgproxy itself, if
/// it is a `200`.
pub(super) async fn fetch_for_pkgproxy(
    state: &Arc<State>,
    side: &dyn Side,
    request: CachedRequest,
    mount: Mount,
    supply: Option<&dyn crate::context::Supply>,
) -> Option<Bytes> {
    let (headers, upstream_answer) = (http::HeaderMap::new(), UpstreamAnswer::default());
    let exchange = Exchange { supply, ..Exchange::own_get(&headers, mount, &upstream_answer) };
    let key = request.key.clone();
    let outcome = serve(state, &exchange, side, request).await;
    state.stats.count(side.id(), Requester::Pkgproxy, outcome.ending(state.upstream.switch.mode()));
    let Outcome::Answered(answer) = outcome else { return None };
    if answer.status() != StatusCode::OK {
        return None;
    }
    let body = answer.response.into_body().collect().await.ok().map(|body| body.to_bytes());
    // What pkgproxy fetches for itself, its side may read back from the
    // index next: its commit is waited for.
    state.cache.settled_on(&key).await;
    body
}
