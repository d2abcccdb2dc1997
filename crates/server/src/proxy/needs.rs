//! What a build needs, found in what the cache holds, where only the cache
//! can say (the packages an apt install pulls in, the blobs an image's
//! manifests name, a snap's download and assertions): each side follows
//! what its reader made of the build's files ([`Side::needs`]) in the
//! cache as this module shows it; `pkgproxyctl check` and `warm` then ask
//! about the requests one by one (see [`super::readiness`]).

use std::sync::Arc;
use std::time::SystemTime;

use http::Method;
use http_body_util::{BodyExt, Full};
use pkgproxy_cache::BodyReader;
use pkgproxy_control::Needs;
use pkgproxy_sides::needs::{FirstAsk, HeldBodies, NeedsError};
use pkgproxy_sides::{route, Decision, Mount, Side};

use super::explain;
use super::lookup::{self, Held, Moment};
use super::{forward, outcome};
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;

/// The cache as a side's resolver reads it: what would be served offline.
struct Offline<'s>(&'s State);

impl HeldBodies for Offline<'_> {
    fn body(&self, url: &str, limit: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let state = self.0;
        let request = explain::decide(state, url).ok()?.decision.into_cached()?;
        let entry = lookup::look(&Held(state), &request, &Moment::offline(state)).entry().cloned()?;
        let file = state.cache.open_body(&entry).ok()?;
        let mut bytes = Vec::new();
        BodyReader::new(&file).take(limit).read_to_end(&mut bytes).ok()?;
        Some(bytes)
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

/// What `side` finds `asked` needs in what the cache holds. Blocking: a
/// side reads and decompresses what it holds.
pub fn resolve(state: &State, side: &dyn Side, asked: serde_json::Value) -> Result<Needs, NeedsError> {
    side.needs(asked, &Offline(state))
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
    };
    let Decision::Forward(request) = side.classify(&routed) else {
        return vec![format!("the {} side does not forward {}", side.id(), first.path)];
    };
    let answer = UpstreamAnswer::default();
    let exchange = Exchange { method: &Method::POST, ..Exchange::own_get(&first.headers, routed.mount, &answer) };
    let outcome = forward::forward(state, &exchange, request, Full::new(first.body)).await;
    let response = outcome::respond(Some(side), state.upstream.switch.mode(), outcome);
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return vec![format!("the upstream's answer to {} broke off", first.path)],
    };
    (first.refusals)(status, &body)
}
