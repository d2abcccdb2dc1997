//! Fetching ahead of a client: once a download is in, what its side says
//! the client asks for next ([`Side::follow_ups`]: the index files of a
//! crate's dependencies, for cargo) is fetched through the cache for
//! pkgproxy itself, so that the client finds it held or on its way. What
//! is fetched ahead is followed in turn when it comes in.
//!
//! A few fetches at once, so that clients' own requests come first; what
//! is held, or already on its way ahead, is left alone; nothing while
//! offline. No client waits for it, and one that fails is only a miss
//! later.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use pkgproxy_cache::Entry;
use pkgproxy_sides::{CachedRequest, Mount, Side, SideId};
use pkgproxy_upstream::offline::Mode;
use tokio::sync::Semaphore;

use crate::state::State;

/// How many fetches ahead run at once.
const AT_ONCE: usize = 16;

/// The most keys on their way ahead; beyond, no more are taken.
const KEYS_LIMIT: usize = 1024;

/// The fetches ahead on their way.
#[derive(Debug)]
pub struct Ahead {
    running: Arc<Semaphore>,
    keys: Mutex<HashSet<String>>,
}

impl Default for Ahead {
    fn default() -> Self {
        Ahead { running: Arc::new(Semaphore::new(AT_ONCE)), keys: Mutex::default() }
    }
}

impl Ahead {
    fn keys(&self) -> MutexGuard<'_, HashSet<String>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Fetches ahead what follows `request`, whose body `entry` the cache
/// just took from the upstream.
pub(super) fn follow(state: &Arc<State>, side: &dyn Side, mount: Mount, request: &CachedRequest, entry: &Entry) {
    let Some(limit) = side.follow_up_limit(request) else { return };
    if entry.size > limit || state.upstream.switch.mode() == Mode::Offline {
        return;
    }
    let (state, id, request) = (Arc::clone(state), side.id(), request.clone());
    tokio::spawn(async move {
        let reading = Arc::clone(&state);
        let read = tokio::task::spawn_blocking(move || {
            let body = reading.cache.read_small(&request.key, limit)?;
            Some(reading.sides.get(id).follow_ups(&request, &body))
        });
        for next in read.await.ok().flatten().unwrap_or_default() {
            start(&state, id, mount, next);
        }
    });
}

/// Fetches `request` ahead unless it is held or on its way.
fn start(state: &Arc<State>, side: SideId, mount: Mount, request: CachedRequest) {
    if state.cache.lookup(&request.key).is_some() {
        return;
    }
    {
        let mut keys = state.ahead.keys();
        if keys.len() >= KEYS_LIMIT || !keys.insert(request.key.clone()) {
            return;
        }
    }
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let key = request.key.clone();
        if let Ok(_running) = Arc::clone(&state.ahead.running).acquire_owned().await {
            // A client may have had it fetched meanwhile.
            if state.cache.lookup(&key).is_none() && state.upstream.switch.mode() != Mode::Offline {
                super::cached::fetch_for_pkgproxy(&state, state.sides.get(side), request, mount, None).await;
            }
        }
        state.ahead.keys().remove(&key);
    });
}
