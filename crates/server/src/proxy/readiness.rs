//! Whether pkgproxy could serve a request with the network gone
//! (`pkgproxyctl check`), and fetching what it could not (`pkgproxyctl
//! warm`): one URL at a time, as a client would ask for it. The client
//! turns a build's inputs (a `go.sum`, apt's `--print-uris`) into URLs;
//! the daemon answers for each from its cache, and warms through its own
//! request path: its one way out, its checks, its cache.

use std::sync::Arc;

use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use pkgproxy_control::ItemReadiness;
use pkgproxy_sides::{CachedRequest, Decision, Side};

use super::explain::{self, Decided};
use super::reason::{Reason, REASON};
use super::{cached, pointer};
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;

/// Whether a `GET` of `url` would be answered with the network gone.
pub fn check(state: &State, url: &str) -> ItemReadiness {
    let item = |ready: bool, reason: Option<String>, size: Option<u64>| ItemReadiness {
        url: url.trim().to_owned(),
        ready,
        reason,
        size,
    };
    match explain::decide(state, url) {
        Err(why) => item(false, Some(why), None),
        Ok(Decided { decision: Decision::Cache(request), side, .. }) => match cached_readiness(state, side, &request) {
            Ok(size) => item(true, None, size),
            Err(why) => item(false, Some(why.to_string()), None),
        },
        Ok(Decided { decision: Decision::Answer(_), .. }) => item(true, None, None),
        Ok(Decided { decision: Decision::Refuse(refusal), .. }) => {
            item(false, Some(Reason::Refused(refusal.reason).to_string()), None)
        }
        Ok(Decided { decision: Decision::Forward(_), .. }) => {
            item(false, Some("passed to the upstream uncached: never served offline".to_owned()), None)
        }
        Ok(Decided { decision: Decision::Generation(_), .. }) => {
            item(false, Some("an LXD index generation: check it by remote and alias".to_owned()), None)
        }
    }
}

/// Whether the cache holds what `request` needs, whatever its age (offline,
/// nothing is too old): its size, or why not.
fn cached_readiness(state: &State, side: &Side, request: &CachedRequest) -> Result<Option<u64>, Reason> {
    let now = tokio::time::Instant::now().into_std();
    if side.remembered(&request.key, now, true).is_some() {
        return Ok(None);
    }
    match cached::usable(state, state.cache.lookup(&request.key), request) {
        Ok(entry) => Ok(Some(entry.size)),
        Err(_) if explain::adoptable(state, request) => Ok(request.expected.size),
        Err(why) => Err(why),
    }
}

/// Fetches what a `GET` of `url` needs unless it is there: the answer is
/// read to its end, so the fetch completes and is kept. What it is then.
pub async fn warm(state: &Arc<State>, url: &str) -> ItemReadiness {
    let before = check(state, url);
    if before.ready {
        return before;
    }
    let Ok(Decided { side, mount, decision: Decision::Cache(request) }) = explain::decide(state, url) else {
        return before;
    };
    let headers = HeaderMap::new();
    let exchange = Exchange {
        method: &Method::GET,
        headers: &headers,
        mount,
        upstream_answer: &UpstreamAnswer::default(),
        client: None,
        target: None,
    };
    let outcome = match request.pointer {
        Some(_) => pointer::serve(state, &exchange, side, *request).await,
        None => cached::serve(state, &exchange, side, *request).await,
    };
    let response = super::outcome::respond(Some(side), state.upstream.switch.mode(), outcome);
    let (status, why) = (response.status(), response.headers().get(REASON).cloned());
    let mut body = response.into_body();
    let mut read = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => read += frame.data_ref().map_or(0, |data| data.len() as u64),
            Err(_) => break,
        }
    }
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
