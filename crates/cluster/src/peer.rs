//! Nodes streaming a fetch in progress from each other: a node that lost
//! the race for a key's lease asks the holder for the body
//! ([`TAIL_PATH`]), which serves the bytes its own clients get, as they
//! arrive, the last one only once it verified the whole. The asking node
//! verifies what it gets itself: it never trusts a peer.

use bytes::Bytes;
use http::{HeaderMap, Method, Response};
use http_body_util::{BodyExt, Full};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use pkgproxy_cache::{FetchError, Sourced};

use crate::lease::LeaseRecord;
use crate::members::Member;
use crate::tier::SharedTier;

pub use crate::credential::{PeerKey, TIME_HEADER, TOKEN_HEADER};

/// Where a node serves its fetches to its peers, on its proxy listener:
/// `GET TAIL_PATH?key=KEY`, with `Range: bytes=N-` to go on from byte N.
pub const TAIL_PATH: &str = "/pkgproxy/v1/peer/tail";

/// The cache key a tail request asks for.
pub fn key_of(query: Option<&str>) -> Option<String> {
    let value = query?.split('&').find_map(|pair| pair.strip_prefix("key="))?;
    percent_encoding::percent_decode_str(value).decode_utf8().ok().map(|key| key.into_owned())
}

/// Why a peer's stream could not be had.
#[derive(Debug)]
pub enum TailError {
    /// The peer did not answer (it may have died): its lease lapses soon.
    Unreachable(String),
    /// The peer answered that it has no such body (its fetch failed, or it
    /// never started): nobody is fetching the key.
    NotThere(String),
}

impl From<TailError> for FetchError {
    fn from(error: TailError) -> Self {
        match error {
            TailError::Unreachable(why) | TailError::NotThere(why) => FetchError::Rejected(why),
        }
    }
}

impl std::fmt::Display for TailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TailError::Unreachable(why) | TailError::NotThere(why) => f.write_str(why),
        }
    }
}

/// What an offline node asks an online one for, built from what its side
/// decided, never from where a client pointed: a path below the peer's own
/// listener, or apt's `http://` URL through the peer as a forward proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// A mounted side's path and query, on the peer (`/go/x/@v/list`).
    OnThePeer(String),
    /// An absolute `http://` URL, through the peer as a forward proxy.
    ThroughThePeer(http::Uri),
}

impl Asked {
    /// The request target the peer receives (and the credential signs).
    fn target(&self) -> String {
        match self {
            Asked::OnThePeer(path) => path.clone(),
            Asked::ThroughThePeer(uri) => uri.to_string(),
        }
    }
}

/// A `GET` of `target` signed for the cluster of `tier`, with `headers`.
fn signed_get(tier: &SharedTier, target: &str, headers: &HeaderMap) -> Result<http::Request<Full<Bytes>>, String> {
    let mut request = http::Request::get(target).body(Full::default()).map_err(|error| error.to_string())?;
    for (name, value) in headers {
        if !matches!(name.as_str(), "host" | "connection" | "keep-alive" | "transfer-encoding" | "proxy-connection") {
            request.headers_mut().append(name, value.clone());
        }
    }
    if let Some(key) = &tier.identity().peer_key {
        let now = std::time::SystemTime::now();
        request.headers_mut().extend(key.credential(&Method::GET, target, now));
    }
    Ok(request)
}

/// Asks `holder` for the body of `key` from byte `from` on, as an upstream
/// answer (a `200`, or a `206` for a later byte).
pub async fn tail(tier: &SharedTier, holder: &LeaseRecord, key: &str, from: u64) -> Result<Sourced, TailError> {
    let unreachable = |why: String| TailError::Unreachable(format!("peer {}: {why}", holder.node));
    let refused = |why: String| TailError::NotThere(format!("peer {}: {why}", holder.node));
    let base = holder.peer_url.as_deref().ok_or_else(|| unreachable("no peer address".into()))?;
    let target = format!("{TAIL_PATH}?key={}", utf8_percent_encode(key, NON_ALPHANUMERIC));
    let mut headers = HeaderMap::new();
    if from > 0 {
        let range = http::HeaderValue::try_from(format!("bytes={from}-")).expect("digits are a valid value");
        headers.insert(http::header::RANGE, range);
    }
    let request = signed_get(tier, &target, &headers).map_err(unreachable)?;
    // A holder that takes a lease's life to begin its answer is not there.
    let wait = tier.identity().lease_ttl;
    let answer = match tokio::time::timeout(wait, tier.peers().send(base, request)).await {
        Ok(answer) => answer.map_err(|error| unreachable(error.to_string()))?,
        Err(_) => return Err(unreachable(format!("no answer within {}s", wait.as_secs()))),
    };
    let status = answer.status();
    let wanted = if from > 0 { http::StatusCode::PARTIAL_CONTENT } else { http::StatusCode::OK };
    if status != wanted {
        return Err(refused(format!("answered {status}")));
    }
    Ok(upstream_answer(answer, &holder.node))
}

/// Asks the online node `member` for `asked` as a client of it would
/// (`headers` as pkgproxy asks an upstream, conditionals and `Range`
/// included). Its answer is the upstream answer of a fetch of this node,
/// checked as any other. A `5xx` (it went offline too, say) is
/// [`TailError::NotThere`]: another node may be asked.
pub async fn ask_through(
    tier: &SharedTier,
    member: &Member,
    asked: &Asked,
    headers: &HeaderMap,
) -> Result<Sourced, TailError> {
    let unreachable = |why: String| TailError::Unreachable(format!("peer {}: {why}", member.node));
    let request = signed_get(tier, &asked.target(), headers).map_err(unreachable)?;
    let answer = tier.peers().send(&member.peer_url, request).await.map_err(|error| unreachable(error.to_string()))?;
    if answer.status().is_server_error() {
        return Err(TailError::NotThere(format!("peer {}: answered {}", member.node, answer.status())));
    }
    Ok(upstream_answer(answer, &member.node))
}

/// A peer's answer as the upstream answer of a fetch, named as the peer's.
fn upstream_answer(answer: Response<hyper::body::Incoming>, node: &str) -> Sourced {
    let (mut parts, body) = answer.into_parts();
    for name in ["connection", "keep-alive", "transfer-encoding", "x-pkgproxy-cache"] {
        parts.headers.remove(name);
    }
    parts.extensions = http::Extensions::new();
    let response = Response::from_parts(parts, body.map_err(|error| error.into()).boxed());
    Sourced::new(response).answered_by(format!("cluster peer {node}"))
}
