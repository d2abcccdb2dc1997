//! Nodes streaming a fetch in progress from each other: a node that lost
//! the race for a key's lease asks the holder for the body
//! ([`TAIL_PATH`]), which serves the bytes its own clients get, as they
//! arrive, the last one only once it verified the whole. The asking node
//! verifies what it gets itself: it never trusts a peer.

use futures_util::TryStreamExt;
use http::{HeaderValue, Response};
use http_body_util::BodyExt;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use pkgproxy_cache::{AnsweredBy, FetchError, UpstreamBody};

use crate::lease::LeaseRecord;
use crate::members::{Member, Members};
use crate::tier::SharedTier;

/// Where a node serves its fetches to its peers, on its proxy listener:
/// `GET TAIL_PATH?key=KEY`, with `Range: bytes=N-` to go on from byte N.
pub const TAIL_PATH: &str = "/pkgproxy/v1/peer/tail";

/// The header a peer proves itself with.
pub const TOKEN_HEADER: &str = "x-pkgproxy-peer-token";

/// Whether `offered` is this cluster's token (compared in constant time).
pub fn is_peer(offered: Option<&HeaderValue>, token: &str) -> bool {
    let Some(offered) = offered else { return false };
    !token.is_empty()
        && offered.len() == token.len()
        && offered.as_bytes().iter().zip(token.as_bytes()).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
}

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

/// Asks `holder` for the body of `key` from byte `from` on, as an upstream
/// answer (a `200`, or a `206` for a later byte).
pub async fn tail(
    client: &reqwest::Client,
    holder: &LeaseRecord,
    key: &str,
    from: u64,
    token: &str,
) -> Result<Response<UpstreamBody>, TailError> {
    let unreachable = |why: String| TailError::Unreachable(format!("peer {}: {why}", holder.node));
    let refused = |why: String| TailError::NotThere(format!("peer {}: {why}", holder.node));
    let base = holder.peer_url.as_deref().ok_or_else(|| unreachable("no peer address".into()))?;
    let url = format!("{}{TAIL_PATH}?key={}", base.trim_end_matches('/'), utf8_percent_encode(key, NON_ALPHANUMERIC));
    let mut request = client.get(&url).header(TOKEN_HEADER, token);
    if from > 0 {
        request = request.header(http::header::RANGE, format!("bytes={from}-"));
    }
    let answer = request.send().await.map_err(|error| unreachable(error.to_string()))?;
    let status = answer.status();
    let wanted = if from > 0 { http::StatusCode::PARTIAL_CONTENT } else { http::StatusCode::OK };
    if status != wanted {
        return Err(refused(format!("answered {status}")));
    }
    upstream_answer(answer, &holder.node).map_err(unreachable)
}

/// Asks the online node `member` for `target` as a client of it would
/// (`headers` as pkgproxy asks an upstream, conditionals and `Range`
/// included): an absolute `http://` target through it as a forward proxy,
/// an origin-form one on its listener. Its answer is the upstream answer
/// of a fetch of this node, checked as any other. A `5xx` (it went offline
/// too, say) is [`TailError::NotThere`]: another node may be asked.
pub async fn ask_through(
    tier: &SharedTier,
    members: &Members,
    member: &Member,
    target: &http::Uri,
    headers: &http::HeaderMap,
) -> Result<Response<UpstreamBody>, TailError> {
    let unreachable = |why: String| TailError::Unreachable(format!("peer {}: {why}", member.node));
    let request = match target.scheme_str() {
        Some(_) => members.client_through(member).map_err(|e| unreachable(e.to_string()))?.get(target.to_string()),
        None => {
            let path = target.path_and_query().map_or("/", |p| p.as_str());
            tier.peers().get(format!("{}{path}", member.peer_url.trim_end_matches('/')))
        }
    };
    let mut request = request.header(TOKEN_HEADER, &tier.identity().peer_token);
    for (name, value) in headers {
        if !matches!(name.as_str(), "host" | "connection" | "keep-alive" | "transfer-encoding" | "proxy-connection") {
            request = request.header(name, value);
        }
    }
    let answer = request.send().await.map_err(|error| unreachable(error.to_string()))?;
    if answer.status().is_server_error() {
        return Err(TailError::NotThere(format!("peer {}: answered {}", member.node, answer.status())));
    }
    upstream_answer(answer, &member.node).map_err(unreachable)
}

/// A peer's answer as the upstream answer of a fetch, named as the peer's.
fn upstream_answer(answer: reqwest::Response, node: &str) -> Result<Response<UpstreamBody>, String> {
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !matches!(name.as_str(), "connection" | "keep-alive" | "transfer-encoding" | "x-pkgproxy-cache") {
            response = response.header(name, value);
        }
    }
    let stream = answer.bytes_stream().map_ok(http_body::Frame::data).map_err(|error| error.into());
    let body: UpstreamBody = http_body_util::StreamBody::new(sync_wrapper::SyncStream::new(stream)).boxed();
    let mut response = response.body(body).map_err(|error| error.to_string())?;
    response.extensions_mut().insert(AnsweredBy(format!("cluster peer {node}").into()));
    Ok(response)
}
