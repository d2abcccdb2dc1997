//! What a build needs, found in what the cache holds, where only the cache
//! can say (the packages an apt install pulls in, the blobs an image's
//! manifests name, a snap's download and assertions): each side follows
//! what its reader made of the build's files ([`Side::needs`]) in the
//! cache as this module shows it; `pkgproxyctl check` and `warm` then ask
//! about the requests one by one (see [`super::readiness`]).

use std::sync::Arc;

use http::Method;
use http_body_util::{BodyExt, Full};
use pkgproxy_control::Needs;
use pkgproxy_sides::needs::{FirstAsk, NeedsError};
use pkgproxy_sides::{route, Decision, Mount, Side};

use super::held::Offline;
use super::{forward, outcome};
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;

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
        secure: false,
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
