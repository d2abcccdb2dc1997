//! Whether pkgproxy could serve a request with the network gone
//! (`pkgproxyctl check`), and fetching what it could not (`pkgproxyctl
//! warm`): one URL at a time, as a client would ask for it. The client
//! turns a build's inputs (a `go.sum`, `--print-uris` lines) into URLs;
//! what only the cache can say the daemon finds in what it holds
//! (`needs.rs`). It answers for each URL from its cache, and warms
//! through its own request path: its one way out, its checks, its cache.
//! What the answer to a URL is made of is what a bundle carries.

use std::sync::Arc;

use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use pkgproxy_control::ItemReadiness;
use pkgproxy_policy::{Published, Verdict};
use pkgproxy_sides::{CachedRequest, Decision, GenerationRequest, Member, Side};

use super::decide::{self, Decided};
use super::lookup::{self, Held, Lookup, Moment};
use super::reason::{Reason, REASON};
use super::{cached, generation, pointer};
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;
use crate::stats::Requester;

/// [`check`], and whether the fleet's policy refuses `url` to clients,
/// judged on what is held as it would be with the network gone (a publish
/// time not held is unknown): what `pkgproxyctl check` asks. Blocking.
pub fn check_for_clients(state: &State, url: &str) -> ItemReadiness {
    let told = check(state, url);
    let Ok(Decided { side, decision: Decision::Cache(request), .. }) = decide::decide(state, url) else { return told };
    let ruling = super::ruling::held(state, side, &request, Published::Unknown);
    let blocked = ruling.and_then(|ruling| match ruling.verdict {
        Verdict::Blocked(blocked) => Some(blocked.summary()),
        _ => None,
    });
    ItemReadiness { blocked, ..told }
}

/// Whether a `GET` of `url` would be answered with the network gone.
pub fn check(state: &State, url: &str) -> ItemReadiness {
    let item = |ready: bool, reason: Option<String>, size: Option<u64>| ItemReadiness {
        url: url.trim().to_owned(),
        ready,
        reason,
        size,
        blocked: None,
    };
    let from_cache = |request: &CachedRequest| match cached_readiness(state, request) {
        Ok(size) => item(true, None, size),
        // The cache remembers what eviction took: anything else it does
        // not hold it never fetched (or was told to forget).
        Err(Reason::NotCached) => item(false, Some("never fetched".to_owned()), None),
        Err(why) => item(false, Some(why.to_string()), None),
    };
    let decision = match decide::decide(state, url) {
        Ok(Decided { decision, .. }) => decision,
        Err(why) => return item(false, Some(why), None),
    };
    match decision {
        Decision::Cache(request) => from_cache(&request),
        Decision::Pointer(pointer) => from_cache(&pointer.name),
        Decision::Answer(_) => item(true, None, None),
        Decision::Refuse(refusal) => item(false, Some(Reason::Refused(refusal.reason).to_string()), None),
        Decision::Forward(_) => {
            item(false, Some("passed to the upstream uncached: never served offline".to_owned()), None)
        }
        Decision::Generation(generation) => match generation_member(&state.cache, &generation) {
            Ok(entry) => item(true, None, Some(entry.size)),
            Err(why) => item(false, Some(why.to_owned()), None),
        },
    }
}

/// The entry a request of `generation` is answered with offline: the held
/// generation's root or a file it names.
fn generation_member(
    cache: &pkgproxy_cache::Cache,
    generation: &GenerationRequest,
) -> Result<Arc<pkgproxy_cache::Entry>, &'static str> {
    if cache.lookup(&generation.root.key).is_none() {
        return Err("the remote's index is not cached");
    }
    match &generation.serve {
        Member::Key(key) => cache.lookup(key).ok_or("the cached index names it, but it is not cached"),
        Member::DecidedAgain => Err("the remote's cached index does not name it"),
    }
}

/// A cache entry a bundle carries.
#[derive(Debug, Clone)]
pub struct Carried {
    /// The request a client makes for it; `None` for what pkgproxy fetches
    /// itself to check the next item (a checksum database record).
    pub url: Option<String>,
    /// Its key here.
    pub key: String,
    /// What is stored.
    pub entry: Arc<pkgproxy_cache::Entry>,
}

/// What the answer to a `GET` of `url` is made of in the cache: the
/// entries that prove it (what the side fetches to check it) first, then
/// its own. Nothing for what needs no entry (a side's own answer, a
/// remembered "not found"). `Err`: why it is not held.
pub fn carried(state: &State, url: &str) -> Result<Vec<Carried>, String> {
    let Decided { side, decision, .. } = decide::decide(state, url)?;
    let request = match decision {
        Decision::Cache(request) => *request,
        Decision::Pointer(pointer) => pointer.name,
        Decision::Answer(_) => return Ok(Vec::new()),
        Decision::Refuse(refusal) => return Err(Reason::Refused(refusal.reason).to_string()),
        Decision::Forward(_) => return Err("passed to the upstream uncached, never kept".to_owned()),
        Decision::Generation(generation) => return carried_generation(&state.cache, side, &generation.root),
    };
    if request.access.is_some() {
        // A bundle is read by whoever holds the file.
        return Err("only a client's own credentials may read it: it is never carried in a bundle".to_owned());
    }
    let entry = match look_offline(state, &request) {
        Lookup::Remembered(answer) if is_served(&answer) => return Ok(Vec::new()),
        Lookup::Remembered(answer) => return Err(format!("the upstream answered {}", answer.status)),
        Lookup::Fresh(entry) | Lookup::Stale { entry, .. } => entry,
        Lookup::Adoptable { sha256, size } => Arc::new(lookup::by_hash(sha256, size, request.class)),
        Lookup::Missing(why) => return Err(why.to_string()),
    };
    // What proves it: requests of their own (an archive's indexes, as
    // they would be served offline), then what its fetch reads first (a
    // checksum database record).
    let proving = side.roles().exporting.map(|exporting| exporting.proving_keys(&request.key));
    let proving = proving.unwrap_or_default().into_iter().filter_map(|key| {
        let (_, url) = side.client_url(&key)?;
        carried(state, &url).ok()
    });
    let prerequisites = side.roles().fetching.map(|fetching| fetching.prerequisites(&request));
    let prerequisites = prerequisites.unwrap_or_default().into_iter().filter_map(|proof| {
        let entry = look_offline(state, &proof).entry().cloned()?;
        Some(Carried { url: None, key: proof.key, entry })
    });
    let mut carried: Vec<Carried> = proving.flatten().chain(prerequisites).collect();
    carried.push(Carried { url: Some(url.trim().to_owned()), key: request.key, entry });
    Ok(carried)
}

/// What the cache holds for `request` as it would serve it with the
/// network gone (offline, nothing is too old).
fn look_offline(state: &State, request: &CachedRequest) -> Lookup {
    lookup::look(&Held(state), request, &Moment::offline(state))
}

/// A held generation of `root`: the files its root names (each read by
/// the root's refresh, so carried as its proofs), then the root.
fn carried_generation(
    cache: &pkgproxy_cache::Cache,
    side: &dyn Side,
    root: &CachedRequest,
) -> Result<Vec<Carried>, String> {
    const ROOT_LIMIT: u64 = 256 * 1024 * 1024;
    let not_held = || "the remote's index is not cached".to_owned();
    let entry = cache.lookup(&root.key).ok_or_else(not_held)?;
    let body = cache.read_small(&root.key, ROOT_LIMIT).ok_or_else(not_held)?;
    let url = side.client_url(&root.key).map(|(_, url)| url).ok_or("its index cannot be named")?;
    let mut carried = Vec::new();
    let generations = side.roles().generations.ok_or("its side keeps no generations")?;
    for member in generations.members(root, &body)? {
        let held = cache.lookup(&member.key).ok_or("a products file its index names is not cached")?;
        carried.push(Carried { url: None, key: member.key, entry: held });
    }
    carried.push(Carried { url: Some(url), key: root.key.clone(), entry });
    Ok(carried)
}

/// Whether a remembered answer serves the request offline as it would
/// online (a "not found"), not a refusal that names what is missing (a
/// registry's challenge).
fn is_served(answer: &pkgproxy_cache::PassedAnswer) -> bool {
    !matches!(answer.status, http::StatusCode::UNAUTHORIZED | http::StatusCode::FORBIDDEN)
}

/// Whether the cache holds what `request` needs, whatever its age (offline,
/// nothing is too old): its size, or why not.
fn cached_readiness(state: &State, request: &CachedRequest) -> Result<Option<u64>, Reason> {
    let size = match look_offline(state, request) {
        Lookup::Remembered(answer) if is_served(&answer) => return Ok(None),
        Lookup::Remembered(answer) => return Err(Reason::UpstreamFailed(format!("it answered {}", answer.status))),
        Lookup::Fresh(entry) | Lookup::Stale { entry, .. } => Some(entry.size),
        Lookup::Adoptable { size, .. } => Some(size),
        Lookup::Missing(why) => return Err(why),
    };
    // Offline, content that needs the upstream's word for this client is
    // served only on a confirmation that counts offline.
    let now = tokio::time::Instant::now().into_std();
    match request.access.as_deref() {
        Some(access) if !(access.offline && state.kept.grants.holds(&access.grant, None, now)) => {
            Err(Reason::Unconfirmed)
        }
        _ => Ok(size),
    }
}

/// Fetches what a `GET` of `url` with `headers` (the client's, as far as
/// they change what the upstream serves) needs unless it is there: the
/// answer is read to its end, so the fetch completes and is kept. What it
/// is then.
pub async fn warm(state: &Arc<State>, url: &str, headers: &HeaderMap) -> ItemReadiness {
    let before = check(state, url);
    if before.ready {
        return before;
    }
    let Ok(Decided { side, mount, decision }) = decide::decide_with(state, url, headers) else { return before };
    let answer = UpstreamAnswer::default();
    let exchange = Exchange::own_get(headers, mount, &answer);
    let outcome = match decision {
        Decision::Pointer(named) => pointer::serve(state, &exchange, side, *named).await,
        Decision::Cache(request) => cached::serve(state, &exchange, side, *request).await,
        Decision::Generation(generation) => match generation::current(state, &exchange, &generation.root).await {
            Ok(_) => return check(state, url),
            Err(failed) => failed.into(),
        },
        Decision::Answer(_) | Decision::Refuse(_) | Decision::Forward(_) => return before,
    };
    let mode = state.upstream.switch.mode();
    let response = super::outcome::respond_counted(&state.stats, Requester::Pkgproxy, side, mode, outcome);
    let (status, why) = (response.status(), response.headers().get(REASON).cloned());
    let mut body = response.into_body();
    let mut read = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => read += frame.data_ref().map_or(0, |data| data.len() as u64),
            Err(_) => break,
        }
    }
    // Read whole; its commit may be a moment behind.
    state.cache.settled().await;
    let after = check(state, url);
    match (after.ready, status) {
        (true, _) => ItemReadiness { size: after.size.or(Some(read)), ..after },
        (false, StatusCode::OK) => after,
        (false, status) => {
            let why = why.and_then(|why| why.to_str().ok().map(str::to_owned));
            ItemReadiness { reason: Some(why.unwrap_or_else(|| format!("the upstream answered {status}"))), ..after }
        }
    }
}
