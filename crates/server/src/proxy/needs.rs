//! What a build needs, found in what the cache holds, where only the cache
//! can say (the packages an apt install pulls in, the blobs an image's
//! manifests name, a snap's download and assertions): each side follows
//! what its reader made of the build's files ([`pkgproxy_sides::role::Resolving::needs`]) in the
//! cache as this module shows it; `pkgproxyctl check` and `warm` then ask
//! about the requests one by one (see [`super::readiness`]). A search is
//! told when its requester is gone ([`Requester`]), so that one nobody
//! waits for stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use http::Method;
use http_body_util::{BodyExt, Full};
use pkgproxy_control::Needs;
use pkgproxy_sides::needs::{FirstAsk, HeldBodies, NeedsError};
use pkgproxy_sides::{route, CacheView, CachedRequest, Decision, Mount, Side};

use super::for_sides::CacheForSides;
use super::{forward, outcome};
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;
use crate::stats;

/// What `side` finds `asked` needs in what the cache holds, unless `gone`
/// is set first (see [`Requester`]). Blocking: a side reads and
/// decompresses what it holds.
pub fn resolve(
    state: &State,
    side: &dyn Side,
    asked: serde_json::Value,
    gone: &AtomicBool,
) -> Result<Needs, NeedsError> {
    let resolving = side.roles().resolving;
    let resolving = resolving
        .ok_or_else(|| NeedsError::new(format!("the {} side has nothing to follow for a check", side.id())))?;
    resolving.needs(asked, &Searched { held: CacheForSides(state), gone })
}

/// Stands for whoever asked for a search, in the future that answers it:
/// dropped with that future (hyper drops it when the connection closes),
/// it tells the search on its blocking thread that what it finds would
/// reach nobody.
#[derive(Debug, Default)]
pub struct Requester {
    gone: Arc<AtomicBool>,
}

impl Requester {
    /// What the search reads to know whether its requester is gone.
    pub fn gone(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.gone)
    }
}

impl Drop for Requester {
    fn drop(&mut self) {
        self.gone.store(true, Ordering::Relaxed);
    }
}

/// The cache as a search reads it, what would be served offline, for a
/// requester who may go away.
struct Searched<'s> {
    /// What would be served offline.
    held: CacheForSides<'s>,
    /// Set once the requester is gone.
    gone: &'s AtomicBool,
}

impl CacheView for Searched<'_> {
    fn open(&self, request: &CachedRequest) -> Option<Arc<std::fs::File>> {
        self.held.open(request)
    }
}

impl HeldBodies for Searched<'_> {
    fn body(&self, url: &str, limit: u64) -> Option<Vec<u8>> {
        self.held.body(url, limit)
    }

    fn open_sha256(&self, sha256: &str, size: u64) -> Option<Arc<std::fs::File>> {
        self.held.open_sha256(sha256, size)
    }

    fn now(&self) -> SystemTime {
        self.held.now()
    }

    fn abandoned(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }
}

/// For a warm: makes the request `side` asks to be made first, through its
/// own path (which records what it must for offline replay), and says what
/// the upstream refused, or why it could not be asked.
pub async fn ask_first(state: &Arc<State>, side: &dyn Side, first: FirstAsk) -> Vec<String> {
    let own = http::Uri::from_static("/");
    let host = crate::context::host_of(&own, &first.headers, state.listen);
    let routed = pkgproxy_sides::Request {
        method: &Method::POST,
        headers: &first.headers,
        mount: Mount::Prefix(route::prefix_of(side.id()).unwrap_or_default()),
        path: first.path,
        query: None,
        target: None,
        host: &host,
        secure: false,
    };
    let Decision::Forward(request) = side.classify(&routed) else {
        return vec![format!("the {} side does not forward {}", side.id(), first.path)];
    };
    let answer = UpstreamAnswer::default();
    let exchange = Exchange { method: &Method::POST, ..Exchange::own_get(&first.headers, routed.mount, &answer) };
    let outcome = forward::forward(state, &exchange, request, Full::new(first.body)).await;
    let mode = state.upstream.switch.mode();
    let response = outcome::respond_counted(&state.stats, stats::Requester::Pkgproxy, side, mode, outcome);
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return vec![format!("the upstream's answer to {} broke off", first.path)],
    };
    (first.refusals)(status, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_search_is_told_its_requester_is_gone_once_the_request_s_future_is_dropped() {
        let requester = Requester::default();
        let gone = requester.gone();
        let answering = tokio::spawn(async move {
            let _requester = requester;
            std::future::pending::<()>().await;
        });
        tokio::task::yield_now().await;
        assert!(!gone.load(Ordering::Relaxed), "the requester waits");
        answering.abort();
        assert!(answering.await.unwrap_err().is_cancelled());
        assert!(gone.load(Ordering::Relaxed), "its connection closed");
    }
}
