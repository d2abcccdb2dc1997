//! What a node of a cluster serves its peers: the body of a key it
//! fetches or holds, to a node that lost the race for the key's lease.

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use pkgproxy_cache::Phase;
use pkgproxy_cluster::peer;
use pkgproxy_sides::{DatedResume, Mount, Reply};

use super::answer;
use super::outcome::Served;
use crate::body::ResponseBody;
use crate::cluster::ClientRequest;
use crate::context::{Exchange, UpstreamAnswer};
use crate::state::State;

/// Serves a peer the body of a key this node fetches or holds (the tail a
/// node that lost the race for the key's lease streams): the same bytes
/// this node's own clients get, the last one only once it is verified.
/// Only nodes of this cluster are answered, and only with what anyone may
/// read.
pub async fn serve(state: &Arc<State>, request: &Request<Incoming>) -> Response<ResponseBody> {
    let Some(tier) = state.cluster.as_ref().and_then(|cluster| cluster.tier()) else {
        return answer::text(StatusCode::NOT_FOUND, "pkgproxy: not part of a cluster");
    };
    let asking = ClientRequest { method: request.method(), uri: request.uri(), headers: request.headers() };
    if !crate::cluster::is_from_peer(&tier, &asking) {
        return answer::text(StatusCode::FORBIDDEN, "pkgproxy: only nodes of this cluster may ask");
    }
    let Some(key) = peer::key_of(request.uri().query()) else {
        return answer::text(StatusCode::BAD_REQUEST, "pkgproxy: which key?");
    };
    // A peer asks for its clients, whose credentials it does not pass on:
    // what only some clients may read is theirs to fetch with their own.
    if !state.sides.readable_by_anyone(&key) {
        return answer::text(StatusCode::FORBIDDEN, "pkgproxy: only clients the upstream accepts may read it");
    }
    let upstream_answer = UpstreamAnswer::default();
    let exchange = Exchange {
        method: request.method(),
        headers: request.headers(),
        mount: Mount::ForwardProxy,
        upstream_answer: &upstream_answer,
        client: None,
        target: None,
        supply: None,
    };
    if let Some(fetch) = state.cache.fetch_in_progress(&key) {
        match fetch.answered().await {
            Phase::Streaming(head) => {
                return answer::from_fetch(&exchange, &fetch, &head, DatedResume::Honoured).into_response()
            }
            Phase::Checked { entry, body } => {
                return answer::from_entry(&exchange, &entry, body, Served::Hit, &by_hash_reply()).0.into_response()
            }
            Phase::Done(_) | Phase::NotModified(_) => {}
            _ => return answer::text(StatusCode::BAD_GATEWAY, "pkgproxy: this node's fetch of it failed"),
        }
    }
    let Some(entry) = state.cache.lookup(&key) else {
        return answer::text(StatusCode::NOT_FOUND, "pkgproxy: not fetching it, nor holding it");
    };
    match state.cache.open_body(&entry) {
        Ok(file) => answer::from_entry(&exchange, &entry, file, Served::Hit, &by_hash_reply()).0.into_response(),
        Err(_) => answer::text(StatusCode::NOT_FOUND, "pkgproxy: not fetching it, nor holding it"),
    }
}

/// How a peer's by-hash answer is made: its name always stands for the
/// same bytes.
fn by_hash_reply() -> Reply {
    Reply { dated_resume: DatedResume::Honoured, ..Reply::default() }
}
