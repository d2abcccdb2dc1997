//! The decision a `GET` of a URL gets, found as the proxy listener finds
//! it (the route, the side that owns it, its classification) without
//! serving it: what `explain`, `check`, bundles and a side's resolver
//! reading held bodies all start from.

use http::{HeaderMap, Method, Uri};
use pkgproxy_sides::{route, Decision, Mount, Route, Side};

use crate::state::State;

/// What a `GET` of a URL is, as the request path sees it: the side that
/// owns it, how it reached it, and what the side decided.
pub struct Decided<'s> {
    /// The side.
    pub side: &'s dyn Side,
    /// How the request reached it.
    pub mount: Mount,
    /// What it decided.
    pub decision: Decision,
}

/// Routes and classifies a `GET` of `url` (no headers) as the proxy
/// listener would. `Err`: not a URL, or no side serves it.
pub fn decide<'s>(state: &'s State, url: &str) -> Result<Decided<'s>, String> {
    decide_with(state, url, &HeaderMap::new())
}

/// [`decide`] for a `GET` with `headers` (a device's, which a side sends
/// upstream).
pub fn decide_with<'s>(state: &'s State, url: &str, headers: &HeaderMap) -> Result<Decided<'s>, String> {
    let uri: Uri = url.trim().parse().map_err(|_| format!("{url:?} is not a URL"))?;
    let method = Method::GET;
    let Route::Side { side, mount, target } = route::route(&method, &uri, state.listen.port()) else {
        return Err("no side of pkgproxy serves this path".to_owned());
    };
    let side = state.sides.owner(side, target.as_ref());
    let host = crate::context::host_of(&uri, headers, state.listen);
    let routed = pkgproxy_sides::Request {
        method: &method,
        headers,
        mount,
        path: route::below(mount, uri.path()),
        query: uri.query(),
        target: target.as_ref(),
        host: &host,
        secure: false,
    };
    Ok(Decided { side, mount, decision: side.classify(&routed) })
}
