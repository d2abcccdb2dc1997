//! `pkgproxyctl explain URL`: what pkgproxy would do for a `GET` of a URL
//! now, and why, found the way a request finds it (the route, the side's
//! decision, the cache, the offline switch and the breakers) without
//! fetching anything or changing any state. What it says is what the next
//! request's `X-Pkgproxy-Cache` and `X-Pkgproxy-Reason` then say. An
//! upstream's own URL (as a lockfile names it) is explained at the path
//! pkgproxy serves it at, which the side whose upstream it is tells; a
//! request is explained as the side's clients make it. An artifact the
//! fleet's policy refuses is explained as refused, naming the rule; a
//! listing it filters names the releases it is served without.

use std::sync::Arc;

use http::{HeaderMap, Uri};
use pkgproxy_control::Explanation;
use pkgproxy_policy::Published;
use pkgproxy_sides::{CachedRequest, Decision, Side, UpstreamPath};
use pkgproxy_upstream::offline::Mode;

use super::decide::{decide, decide_with, Decided};
use super::for_sides::CacheForSides;
use super::lookup::{self, Lookup};
use super::reason::Reason;
use crate::state::State;

/// [`decide`] with the headers that the side's clients send and that
/// choose the answer (a PyPI page's form).
fn decide_as_its_clients_ask<'s>(state: &'s State, url: &str) -> Result<Decided<'s>, String> {
    let explaining = decide(state, url)?.side.roles().explaining;
    let headers = explaining.map(|explaining| explaining.clients_headers()).unwrap_or_default();
    decide_with(state, url, &headers)
}

/// What a `GET` of `url` would get now. `Err`: `url` is not a URL.
/// Blocking (an upstream's URL may be read in a held body).
pub fn explain(state: &Arc<State>, url: &str) -> Result<Explanation, String> {
    let asked = url.trim();
    let told = Explanation {
        url: asked.to_owned(),
        side: None,
        served_at: None,
        key: None,
        action: String::new(),
        cache: None,
        reason: None,
        upstream: Vec::new(),
        withheld: Vec::new(),
    };
    let (url, told) = match state.sides.upstream_path(asked, &CacheForSides(state)) {
        None => (asked.to_owned(), told),
        Some((_, UpstreamPath::At(path))) => (path.clone(), Explanation { served_at: Some(path), ..told }),
        Some((side, UpstreamPath::Unknown(why))) => {
            let side = Some(side.id().as_str().to_owned());
            return Ok(Explanation { side, action: "unknown".to_owned(), reason: Some(why), ..told });
        }
    };
    let Decided { side, decision, .. } = match decide_as_its_clients_ask(state, &url) {
        Ok(decided) => decided,
        Err(why) if url.parse::<Uri>().is_err() => return Err(why),
        Err(why) => return Ok(refused(told, why)),
    };
    let mut told = Explanation { side: Some(side.id().as_str().to_owned()), ..told };
    Ok(match decision {
        Decision::Refuse(refusal) => refused(told, Reason::Refused(refusal.reason).to_string()),
        Decision::Answer(_) => Explanation { action: "answer itself".to_owned(), ..told },
        // An LXD image list or file: from the generation of the remote's
        // index in effect, brought up to date first once its window passed.
        Decision::Generation(_) => Explanation { action: "serve from the index generation".to_owned(), ..told },
        Decision::Forward(forward) => {
            told.upstream = forward.origin.instances;
            match state.upstream.switch.mode() {
                Mode::Offline => refused(told, Reason::Offline.to_string()),
                _ => Explanation { action: "forward".to_owned(), ..told },
            }
        }
        Decision::Cache(request) => match blocked(state, side, &request) {
            Some(rule) => {
                refused(Explanation { key: Some(request.key.clone()), ..told }, Reason::Refused(rule).to_string())
            }
            None => {
                let withheld = super::ruling::withheld(state, side, &request);
                through_the_cache(state, *request, false, Explanation { withheld, ..told })
            }
        },
        Decision::Pointer(pointer) => through_the_cache(state, pointer.name, true, told),
    })
}

/// The release `request` is an artifact of, and the rule, when the fleet's
/// policy refuses it to clients now: judged on what is held. A publish time
/// not held is fetched before a client's request is judged, so only what
/// needs none is said then; offline, it is unknown, as the request would
/// find it.
fn blocked(state: &State, side: &dyn Side, request: &CachedRequest) -> Option<String> {
    let missing = match state.upstream.switch.mode() {
        Mode::Offline => Published::Unknown,
        _ => Published::NotNeeded,
    };
    super::ruling::held(state, side, request, missing)?.blocked()
}

fn refused(told: Explanation, reason: String) -> Explanation {
    Explanation { action: "refuse".to_owned(), reason: Some(reason), ..told }
}

/// What the cache path would do with `request` (a name that points at
/// content by digest, when `named`), as it would decide it.
fn through_the_cache(state: &Arc<State>, request: CachedRequest, named: bool, told: Explanation) -> Explanation {
    let upstream = request.origin.instances.iter().map(|url| crate::redact::without_user(url)).collect();
    let mut told = Explanation { key: Some(request.key.clone()), upstream, ..told };
    let (stale, reason) = match lookup::now(state, &request, &HeaderMap::new()) {
        Lookup::Remembered(_) | Lookup::Fresh(_) | Lookup::Adoptable { .. } => {
            return Explanation { action: "hit".to_owned(), cache: Some("hit".to_owned()), ..told }
        }
        Lookup::Stale { why, .. } => (true, why),
        Lookup::Missing(why) => (false, why),
    };
    let (action, cache, reason) = match (stale, not_asked(state, &request, named)) {
        (true, Some(why)) => ("serve stale", "stale", why),
        (false, Some(why)) => ("refuse", "", why),
        (true, None) => ("revalidate", "revalidated or miss", reason),
        (false, None) => ("fetch", "miss", reason),
    };
    told.action = action.to_owned();
    told.cache = (!cache.is_empty()).then(|| cache.to_owned());
    told.reason = Some(reason.to_string());
    told
}

/// Why the upstream would not be asked now, if it would not: offline
/// mode, a name (`named`) whose upstream asked to be left alone, or every
/// instance's breaker open.
fn not_asked(state: &State, request: &CachedRequest, named: bool) -> Option<Reason> {
    if state.upstream.switch.mode() == Mode::Offline {
        return Some(Reason::Offline);
    }
    if named {
        if let Some(held) = state.kept.pointers.holds.current(&request.key, state.clock.now()) {
            return Some(Reason::from(&held));
        }
    }
    let pool = state.upstream.transport.pool(&request.origin.pool, &request.origin.instances).ok()?;
    let (host, left) = pool.all_breakers_open(tokio::time::Instant::now())?;
    Some(Reason::BreakerOpen { host: Some(host), left })
}
