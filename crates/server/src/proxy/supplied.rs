//! Taking an item into the cache from bytes pkgproxy is handed (a bundle
//! being imported) rather than fetched: the item's URL goes through the
//! request path as pkgproxy's own `GET`, and its fetch reads the handed
//! bytes instead of the upstream. So an imported item meets every check a
//! fetched one meets (the side's expected sums, its verifier, the
//! prerequisites that prove it), and is stored as a fetch stores it.

use std::sync::Arc;

use http::header::{HeaderValue, CACHE_CONTROL};
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use pkgproxy_cache::{Class, Source};
use pkgproxy_sides::{CachedRequest, Decision, Side};

use super::decide::{self, Decided};
use super::outcome::{self, Outcome};
use super::reason::{Reason, REASON};
use super::{access, cached, generation, pointer, readiness};
use crate::context::{Exchange, Supply, UpstreamAnswer};
use crate::state::State;
use crate::stats::Requester;

/// An item handed to pkgproxy.
pub struct Handed<'a> {
    /// The request a client makes for it.
    pub url: &'a str,
    /// The SHA-256 its bytes have, as whoever handed them says.
    pub sha256: &'a str,
    /// When it was fetched where it comes from (Unix seconds): a newer
    /// copy held here of what changes under its name is kept.
    pub fetched_at: u64,
    /// Its bytes.
    pub source: &'a (dyn Fn() -> Box<dyn Source> + Send + Sync),
}

/// What became of a handed item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Checked and stored.
    Stored,
    /// The cache held it already, or a newer copy of it.
    Held,
}

/// Takes `item` into the cache through the request path: its own fetch
/// reads the item's bytes; the fetches that prove it (a checksum database
/// record) read `proofs`. `Err`: why it was not taken.
pub async fn take(state: &Arc<State>, item: &Handed<'_>, proofs: &dyn Supply) -> Result<Taken, String> {
    let Decided { side, mount, decision } = decide::decide(state, item.url)?;
    let (request, pointer) = match decision {
        Decision::Cache(request) => (*request, false),
        Decision::Pointer(named) => (named.name, true),
        Decision::Generation(generation) => return take_generation(state, item, &generation.root, proofs).await,
        Decision::Refuse(refusal) => return Err(format!("refused here: {}", refusal.reason)),
        Decision::Answer(_) | Decision::Forward(_) => {
            return Err("not something pkgproxy keeps in its cache as it is".to_owned())
        }
    };
    if held(state, item, &request) {
        // The bundle says this name serves what the cache holds (a layer
        // shared by two repositories): taken as the upstream's word.
        if request.access.is_some() {
            access::granted(state, side, &request).await;
        }
        return Ok(Taken::Held);
    }
    let (fetched, pointer_at) = match pointer {
        true => {
            let digest = format!("sha256:{}", item.sha256);
            let by_digest = side
                .roles()
                .digests
                .and_then(|digests| digests.by_digest(&request, &digest))
                .ok_or_else(|| format!("{digest} is not content this side fetches by digest"))?;
            (by_digest, Some(request.clone()))
        }
        false => (request, None),
    };
    let key = fetched.key.clone();
    let supply = ItemFirst { key: &key, item, proofs };
    // A copy held of what changes under its name is older than the item
    // (see `held`): it is replaced, not revalidated.
    let mut headers = HeaderMap::new();
    if fetched.class != Class::Immutable {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=0"));
    }
    let answer = UpstreamAnswer::default();
    let exchange = Exchange { supply: Some(&supply), ..Exchange::own_get(&headers, mount, &answer) };
    let outcome = cached::serve(state, &exchange, side, fetched).await;
    state.stats.count(side.id(), Requester::Pkgproxy, outcome.ending(state.upstream.switch.mode()));
    let said = drained(Some(side), &state.upstream, outcome).await?;
    // Read whole; its commit may be a moment behind.
    state.cache.settled_on(&key).await;
    if state.cache.lookup(&key).is_none_or(|entry| entry.sha256 != item.sha256) {
        return Err(said.unwrap_or_else(|| "its fetch ended without storing it".to_owned()));
    }
    if let Some(name) = pointer_at {
        pointer::link(&state.cache, &name, &key).await;
    }
    Ok(Taken::Stored)
}

/// Takes in a generation whose root is `item` (an LXD remote's index),
/// its other files (the products files) among `proofs`: checked and stored
/// as one, as a refresh does.
async fn take_generation(
    state: &Arc<State>,
    item: &Handed<'_>,
    root: &CachedRequest,
    proofs: &dyn Supply,
) -> Result<Taken, String> {
    if held(state, item, root) {
        return Ok(Taken::Held);
    }
    let supply = ItemFirst { key: &root.key, item, proofs };
    generation::take_in(state, root, &supply).await.map_err(|failed| Reason::from(&failed).to_string())?;
    Ok(Taken::Stored)
}

/// Whether the cache holds `item` already: the same bytes under its name,
/// a copy of what changes under its name fetched no earlier, or what the
/// request needs however it is named.
fn held(state: &State, item: &Handed<'_>, request: &CachedRequest) -> bool {
    if let Some(entry) = state.cache.lookup(&request.key) {
        let newer = request.class != Class::Immutable && entry.fetched_at >= item.fetched_at;
        if entry.sha256 == item.sha256 || newer {
            return true;
        }
    }
    request.class == Class::Immutable && readiness::check(state, item.url).ready
}

/// Reads the answer `outcome` gives to its end, so the fetch behind it
/// completes and is kept: the reason it gave, if any; `Err` with it when
/// the answer is not a `200`.
async fn drained(
    side: Option<&dyn Side>,
    upstream: &pkgproxy_upstream::Upstream,
    outcome: Outcome,
) -> Result<Option<String>, String> {
    // Its own words: answered, an upstream's failure says "offline" while
    // the switch is.
    if let Outcome::Failed(failed) = &outcome {
        return Err(Reason::from(failed).to_string());
    }
    let response = outcome::respond(side, upstream.switch.mode(), outcome);
    let (status, why) = (response.status(), response.headers().get(REASON).cloned());
    let why = why.and_then(|why| why.to_str().ok().map(str::to_owned));
    // Read and let go, frame by frame: a body of gigabytes is never held.
    let mut body = response.into_body();
    let mut broken = None;
    while let Some(frame) = body.frame().await {
        if let Err(error) = frame {
            broken = Some(error.to_string());
            break;
        }
    }
    match (status, broken) {
        (StatusCode::OK, None) => Ok(why),
        (StatusCode::OK, Some(error)) => Err(format!("its fetch failed: {error}")),
        (status, _) => Err(why.unwrap_or_else(|| format!("answered {status}"))),
    }
}

/// The supply of one item's fetch: the item's bytes for its key, the
/// proofs' for theirs.
struct ItemFirst<'a> {
    key: &'a str,
    item: &'a Handed<'a>,
    proofs: &'a dyn Supply,
}

impl Supply for ItemFirst<'_> {
    fn source_for(&self, key: &str) -> Option<Box<dyn Source>> {
        match key == self.key {
            true => Some((self.item.source)()),
            false => self.proofs.source_for(key),
        }
    }
}
