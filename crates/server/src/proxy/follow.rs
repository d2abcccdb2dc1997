//! Fetching ahead of a client: once a download is in, what its side says
//! the client asks for next ([`FetchingAhead::follow_ups`](pkgproxy_sides::role::FetchingAhead::follow_ups): the index files of a
//! crate's dependencies, for cargo) is fetched through the cache for
//! pkgproxy itself, so that the client finds it held or on its way. What
//! is fetched ahead is followed in turn when it comes in.
//!
//! What is held, or already on its way ([`crate::ahead`]), is left alone;
//! nothing while offline. No client waits for it, and one that fails is
//! only a miss later.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use pkgproxy_cache::Fetch;
use pkgproxy_sides::{CachedRequest, Mount, Side, SideId};
use pkgproxy_upstream::offline::Mode;

use crate::state::State;

/// How a request is fetched ahead: served through the cache for pkgproxy
/// itself (given by the request path, which also calls [`follow`]).
pub(super) type FetchAhead = fn(Arc<State>, SideId, Mount, CachedRequest) -> FetchingAhead;

/// A fetch ahead of a client, under way.
pub(super) type FetchingAhead = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Fetches ahead, with `fetch`, what follows `request` once `download`,
/// the cache's fetch of it from the upstream, has its body checked.
pub(super) fn follow(
    state: &Arc<State>,
    side: &dyn Side,
    mount: Mount,
    request: &CachedRequest,
    download: Arc<Fetch>,
    fetch: FetchAhead,
) {
    let Some(limit) = side.roles().fetching_ahead.and_then(|ahead| ahead.follow_up_limit(request)) else { return };
    let (state, id, request) = (Arc::clone(state), side.id(), request.clone());
    tokio::spawn(async move {
        // Read back whole once checked, committed or not (`read_small`).
        if !download.checked().await.is_body() || state.upstream.switch.mode() == Mode::Offline {
            return;
        }
        let reading = Arc::clone(&state);
        let read = tokio::task::spawn_blocking(move || {
            let body = reading.cache.read_small(&request.key, limit)?;
            Some(reading.sides.get(id).roles().fetching_ahead?.follow_ups(&request, &body))
        });
        for next in read.await.ok().flatten().unwrap_or_default() {
            start(&state, id, mount, next, fetch);
        }
    });
}

/// Fetches `request` ahead unless it is held or on its way.
fn start(state: &Arc<State>, side: SideId, mount: Mount, request: CachedRequest, fetch: FetchAhead) {
    if state.cache.lookup(&request.key).is_some() {
        return;
    }
    let Some(claim) = state.ahead.claim(&request.key) else { return };
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let Some(_turn) = claim.turn().await else { return };
        // A client may have had it fetched meanwhile.
        if state.cache.lookup(&request.key).is_none() && state.upstream.switch.mode() != Mode::Offline {
            fetch(Arc::clone(&state), side, mount, request).await;
        }
        // The key is no longer on its way once the claim goes.
        drop(claim);
    });
}
