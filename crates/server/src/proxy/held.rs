//! The cache as a side reads it outside the request path (what a build
//! needs, an answer it makes itself): each body as it would be served with
//! the network gone.

use std::sync::Arc;
use std::time::SystemTime;

use pkgproxy_cache::BodyReader;
use pkgproxy_sides::needs::HeldBodies;

use super::decide;
use super::lookup::{self, Held, Moment};
use crate::state::State;

/// The cache as a side's resolver reads it: what would be served offline.
pub struct Offline<'s>(pub &'s State);

impl HeldBodies for Offline<'_> {
    fn body(&self, url: &str, limit: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let file = self.open(url)?;
        let mut bytes = Vec::new();
        BodyReader::new(&file).take(limit).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    fn open(&self, url: &str) -> Option<Arc<std::fs::File>> {
        let state = self.0;
        let request = decide::decide(state, url).ok()?.decision.into_cached()?;
        let entry = lookup::look(&Held(state), &request, &Moment::offline(state)).entry().cloned()?;
        state.cache.open_body(&entry).ok()
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
