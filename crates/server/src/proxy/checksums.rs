//! The checksum database consulted for go downloads: before a `.zip` or
//! `.mod` is fetched, its lookup record (immutable) is served through the
//! cache like any other file, and its `h1:` hashes go to the download's
//! checks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::StatusCode;
use http_body_util::BodyExt;
use pkgproxy_sides::go::sumdb::parse_lookup;
use pkgproxy_sides::go::{GoFile, GoSide, Sums};
use pkgproxy_sides::CachedRequest;

use super::answer::Asked;
use super::cached::serve;
use crate::offline::RefusalNote;
use crate::state::State;

/// What the checksum database says of the `.zip` or `.mod` `request` is
/// for: its lookup record is itself served through the cache (immutable,
/// so asked for once). Nothing when it cannot be had: the zip is then only
/// checked for its shape.
pub fn of<'a>(state: &'a Arc<State>, request: &'a CachedRequest) -> Pin<Box<dyn Future<Output = Sums> + Send + 'a>> {
    Box::pin(async move {
        let go = &state.settings.go;
        let (Some(supported), Some(lookup), Some((module, file))) =
            (go.sumdb_supported(), go.lookup_for(request), GoSide::file_of(request))
        else {
            return Sums::default();
        };
        let (GoFile::Zip(version) | GoFile::Mod(version)) = file else { return Sums::default() };
        // An upstream without the database says so once (and is
        // remembered): no lookup is asked of it for every version.
        if fetch_internally(state, supported).await.is_none() {
            return Sums::default();
        }
        match fetch_internally(state, lookup).await {
            Some(record) => parse_lookup(&String::from_utf8_lossy(&record), &module, &version),
            None => {
                tracing::debug!(module, version, "no checksum database record");
                Sums::default()
            }
        }
    })
}

/// The body of `request` served through the cache for pkgproxy itself, if
/// it is a `200`.
async fn fetch_internally(state: &Arc<State>, request: CachedRequest) -> Option<bytes::Bytes> {
    let (headers, note, upstream_answer) = (http::HeaderMap::new(), RefusalNote::default(), Default::default());
    let asked = Asked {
        method: &http::Method::GET,
        headers: &headers,
        note: &note,
        upstream_answer: &upstream_answer,
        client: None,
    };
    let response = serve(state, &asked, request).await;
    if response.status() != StatusCode::OK {
        return None;
    }
    response.into_body().collect().await.ok().map(|body| body.to_bytes())
}
