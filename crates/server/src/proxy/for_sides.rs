//! The cache as a side reads it outside serving one of its requests: what
//! a side's own answer (a fallback) reads of a request it made itself, and
//! what a resolver reads of what a user named by URL (a lock's pages, a
//! sources list's indexes, an image's manifests). Each body as it would be
//! served with the network gone; nothing here fetches or changes anything.
//!
//! A request the side made is looked up as it is ([`CacheView`]): nothing
//! is routed or classified again. Only a URL a user named is routed and
//! classified first, as a client's `GET` of it would be.

use std::sync::Arc;
use std::time::SystemTime;

use pkgproxy_sides::needs::HeldBodies;
use pkgproxy_sides::{CacheView, CachedRequest};

use super::decide;
use super::lookup::{self, Held, Moment};
use crate::state::State;

/// The cache as a side reads it: what would be served offline.
pub struct CacheForSides<'s>(pub &'s State);

impl CacheView for CacheForSides<'_> {
    fn open(&self, request: &CachedRequest) -> Option<Arc<std::fs::File>> {
        let state = self.0;
        let entry = lookup::look(&Held(state), request, &Moment::offline(state)).entry().cloned()?;
        state.cache.open_body(&entry).ok()
    }
}

impl HeldBodies for CacheForSides<'_> {
    fn body(&self, url: &str, limit: u64) -> Option<Vec<u8>> {
        let request = decide::decide(self.0, url).ok()?.decision.into_cached()?;
        self.read(&request, limit)
    }

    fn open_sha256(&self, sha256: &str, size: u64) -> Option<Arc<std::fs::File>> {
        let state = self.0;
        if !state.cache.holds(sha256, size) {
            return None;
        }
        state.cache.open_body(&lookup::by_hash(sha256.to_owned(), size, pkgproxy_cache::Class::Immutable)).ok()
    }

    fn now(&self) -> SystemTime {
        self.0.clock.now()
    }
}
