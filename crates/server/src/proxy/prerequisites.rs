//! What a side needs fetched before it can check a download (the go side's
//! checksum database records): each prerequisite is served through the
//! cache like any other file, for pkgproxy itself, so an immutable record
//! is asked for once and shared by every download that needs it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use pkgproxy_sides::{CachedRequest, Mount, Side};

use super::cached::serve;
use super::outcome::Outcome;
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;

/// The bodies of `request`'s prerequisites, in order, up to the first that
/// could not be had as a `200`.
pub fn fetched<'a>(
    state: &'a Arc<State>,
    side: &'a Side,
    request: &'a CachedRequest,
    mount: Mount,
) -> Pin<Box<dyn Future<Output = Vec<Bytes>> + Send + 'a>> {
    // Boxed: serving a prerequisite goes through the cache, which asks for
    // prerequisites again (of the prerequisite, which has none).
    Box::pin(async move {
        let mut bodies = Vec::new();
        for prerequisite in side.prerequisites(request) {
            match fetch_for_pkgproxy(state, side, prerequisite, mount).await {
                Some(body) => bodies.push(body),
                None => break,
            }
        }
        bodies
    })
}

/// The body of `request` served through the cache for pkgproxy itself, if
/// it is a `200`.
async fn fetch_for_pkgproxy(state: &Arc<State>, side: &Side, request: CachedRequest, mount: Mount) -> Option<Bytes> {
    let (headers, upstream_answer) = (http::HeaderMap::new(), UpstreamAnswer::default());
    let exchange = Exchange {
        method: &http::Method::GET,
        headers: &headers,
        mount,
        upstream_answer: &upstream_answer,
        client: None,
    };
    let Outcome::Answered(response) = serve(state, &exchange, side, request).await else { return None };
    if response.status() != StatusCode::OK {
        return None;
    }
    response.into_body().collect().await.ok().map(|body| body.to_bytes())
}
