//! The upstream requests of a shared fetch: built from the side's decision
//! (and the cached entry's validators when revalidating), sent through the
//! request's pool, their bodies counted as they arrive. A body that breaks
//! is resumed with a `Range` request, preferably on another instance.

use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{
    HeaderValue, AUTHORIZATION, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, LOCATION, RANGE, USER_AGENT,
};
use http::{HeaderMap, Method, Response, StatusCode, Uri};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use pkgproxy_cache::{Entry, FetchError, Source, Sourced, StartFetch, Validators};
use pkgproxy_cluster::peer::Asked;
use pkgproxy_metrics::{SideCounter, Timing};
use pkgproxy_sides::{CachedRequest, Mount, Origin, Redirects, SideId, UpstreamAuth};
use pkgproxy_upstream::offline::Mode;
use pkgproxy_upstream::{Pool, PoolAnswer, PoolBody, PoolRequest, UpstreamError};
use tokio::time::Instant;

use super::outgoing;
use crate::cluster::ClientRequest;
use crate::config::Step;
use crate::context::{Exchange, UpstreamAnswer};
use crate::kept::tokens::{Asker, Challenge};
use crate::redact::without_user;
use crate::shadow::Original;
use crate::state::State;
use crate::stats::Requester;

/// The requests of one fetch, on one pool.
struct PoolSource {
    state: Arc<State>,
    pool: Result<Arc<Pool>, Arc<UpstreamError>>,
    request: PoolRequest,
    side: SideId,
    /// Who asked for the fetch: whose counters its bytes are added to.
    requester: Requester,
    /// The instance that sent the last answer: a resume avoids it.
    last_instance: Arc<Mutex<Option<usize>>>,
    /// Where the first answer's status goes, for mirrors of the upstream
    /// step that compare.
    upstream_answer: UpstreamAnswer,
    /// Whether redirects are followed, and the pool's instances they are
    /// relative to.
    redirects: Redirects,
    origin: Origin,
    /// How pkgproxy authorises itself upstream.
    auth: UpstreamAuth,
}

/// The source of a fetch of `request`: a `GET` with the headers of every
/// upstream request ([`outgoing::headers`]), the cached entry's
/// validators when revalidating. While this node is offline, in a cluster, an
/// online node of the cluster is asked instead; when the exchange carries
/// a supply holding the key (a bundle being imported), that supply.
pub fn source(
    state: &Arc<State>,
    request: &CachedRequest,
    exchange: &Exchange<'_>,
    conditional: Option<&Entry>,
) -> Box<dyn Source> {
    if let Some(supplied) = exchange.supply.and_then(|supply| supply.source_for(&request.key)) {
        return supplied;
    }
    let (origin, side, redirects, auth) =
        (&request.origin, request.side, request.asking.redirects, request.asking.auth.clone());
    let pool = state.upstream.transport.pool(&origin.pool, &origin.instances).map_err(Arc::new);
    let agent = exchange.headers.get(USER_AGENT).cloned();
    let revalidating = conditional.map(|entry| &entry.validators);
    let headers = outgoing::headers(request.asking.headers.clone(), agent, &state.loop_mark, revalidating);
    let upstream_answer = copy_upstream_request(state, side, origin, exchange, &Method::GET, &headers);
    let through_peer = match (&state.cluster, exchange.target, asked_of_a_peer(exchange)) {
        (Some(cluster), Some(target), Some(asked)) if state.upstream.switch.mode() == Mode::Offline => {
            Some((cluster, target, asked, headers.clone()))
        }
        _ => None,
    };
    let request = PoolRequest::get(origin.path.clone(), headers);
    let upstream = Box::new(PoolSource {
        state: Arc::clone(state),
        pool,
        request,
        side,
        requester: exchange.requester(),
        last_instance: Arc::default(),
        upstream_answer,
        redirects,
        origin: origin.clone(),
        auth,
    });
    match through_peer {
        Some((cluster, target, asked, headers)) => {
            let client = ClientRequest { method: exchange.method, uri: target, headers: exchange.headers };
            cluster.through_peer(&client, asked, headers, upstream)
        }
        None => upstream,
    }
}

/// What an online peer is asked for this request, built from how the side
/// routed it, never from where the client pointed: a mounted side's path
/// and query on the peer's own listener; for the forward proxy, the
/// `http://` URL the apt side took (its host an archive's), through the
/// peer as a proxy. `None`: not to be asked of a peer.
fn asked_of_a_peer(exchange: &Exchange<'_>) -> Option<Asked> {
    let target = exchange.target?;
    match exchange.mount {
        Mount::Prefix(_) => Some(Asked::OnThePeer(target.path_and_query()?.as_str().to_string())),
        Mount::ForwardProxy if target.scheme_str() == Some("http") => Some(Asked::ThroughThePeer(target.clone())),
        Mount::ForwardProxy => None,
    }
}

/// What the upstream answers a `HEAD` of `request`: its status and
/// headers, with the side's headers, the client's user agent and the
/// upstream's authorisation as for a fetch.
pub async fn head(
    state: &Arc<State>,
    request: &CachedRequest,
    agent: Option<HeaderValue>,
) -> Result<(StatusCode, HeaderMap), FetchError> {
    let (pool, headers) = prepared(state, request, None, agent)?;
    let head = PoolRequest { method: Method::HEAD, ..PoolRequest::get(request.origin.path.clone(), headers) };
    let sent = Instant::now();
    let (_, answer) = authorised(state, &pool, &request.origin, &request.asking.auth, head).await?;
    state.stats.time(request.side, Timing::Upstream, sent.elapsed());
    let (parts, _) = answer.response.into_parts();
    Ok((parts.status, parts.headers))
}

/// The upstream's answer to a `GET` of `request`, revalidating what
/// `revalidating` describes if given: authorised and, when the side says
/// so, redirected as for a fetch, the body still to be read. For files
/// pkgproxy reads itself before anyone is served (a generation's).
pub async fn get(
    state: &Arc<State>,
    request: &CachedRequest,
    revalidating: Option<&Validators>,
    agent: Option<HeaderValue>,
) -> Result<Response<PoolBody>, FetchError> {
    let origin = &request.origin;
    let (pool, headers) = prepared(state, request, revalidating, agent)?;
    let get = PoolRequest::get(origin.path.clone(), headers);
    let sent = Instant::now();
    let (get, answer) = authorised(state, &pool, origin, &request.asking.auth, get).await?;
    let response = match request.asking.redirects {
        Redirects::PassedOn => answer.response,
        Redirects::Followed => {
            let base = origin.instances.get(answer.instance).map(|base| without_user(base)).unwrap_or_default();
            follow(state, &origin.pool, &base, get, answer.response).await?
        }
    };
    state.stats.time(request.side, Timing::Upstream, sent.elapsed());
    Ok(response)
}

/// The pool `request` goes out through, and the headers it carries
/// ([`outgoing::headers`]).
fn prepared(
    state: &State,
    request: &CachedRequest,
    revalidating: Option<&Validators>,
    agent: Option<HeaderValue>,
) -> Result<(Arc<Pool>, HeaderMap), FetchError> {
    let origin = &request.origin;
    let pool = state
        .upstream
        .transport
        .pool(&origin.pool, &origin.instances)
        .map_err(|error| FetchError::Upstream(Box::new(error)))?;
    let headers = outgoing::headers(request.asking.headers.clone(), agent, &state.loop_mark, revalidating);
    Ok((pool, headers))
}

/// Copies an upstream request to the shadows of the upstream step, as the
/// upstream gets it: for the forward proxy, a proxy request for the URL at
/// the pool's first instance; for a side mounted under a prefix, the path
/// below the upstream's base, which goes below the target's prefix.
pub fn copy_upstream_request(
    state: &State,
    side: SideId,
    origin: &Origin,
    exchange: &Exchange<'_>,
    method: &Method,
    headers: &HeaderMap,
) -> UpstreamAnswer {
    if state.shadows.load().is_empty() {
        return UpstreamAnswer::default();
    }
    let uri = match exchange.mount {
        Mount::ForwardProxy => {
            format!("{}{}", without_user(origin.instances.first().map_or("", String::as_str)), origin.path)
        }
        Mount::Prefix(_) => origin.path.clone(),
    };
    let tapped = state.shadows.load().tap(&Original {
        step: Step::Upstream,
        side,
        method,
        uri: &uri,
        headers,
        client: exchange.client,
        offline: state.upstream.switch.mode() == Mode::Offline,
    });
    let answer = tapped.answer();
    tapped.send();
    answer
}

impl PoolSource {
    /// Sends `request`; the status of its answer goes to `report`.
    fn send(&self, request: PoolRequest, report: Option<UpstreamAnswer>) -> StartFetch {
        let pool = match &self.pool {
            Ok(pool) => Arc::clone(pool),
            Err(error) => {
                let error = FetchError::Upstream(Box::new(SharedError(Arc::clone(error))));
                return Box::pin(async move { Err(error) });
            }
        };
        let (state, last_instance) = (Arc::clone(&self.state), Arc::clone(&self.last_instance));
        let (side, requester) = (self.side, self.requester);
        let (redirects, origin, auth) = (self.redirects, self.origin.clone(), self.auth.clone());
        Box::pin(async move {
            let sent = Instant::now();
            let (request, answer) = authorised(&state, &pool, &origin, &auth, request).await?;
            *last_instance.lock() = Some(answer.instance);
            let response = match redirects {
                Redirects::PassedOn => answer.response,
                Redirects::Followed => {
                    let base = origin.instances.get(answer.instance).map(|base| without_user(base)).unwrap_or_default();
                    follow(&state, &origin.pool, &base, request, answer.response).await?
                }
            };
            state.stats.time(side, Timing::Upstream, sent.elapsed());
            if let Some(report) = report {
                report.report(response.status().as_u16());
            }
            let response = response.map(|body| counted(body, state, side, requester));
            let answered_by = origin.instances.get(answer.instance).map(|base| without_user(base).into());
            Ok(Sourced { answered_by, ..Sourced::new(response) })
        })
    }
}

impl Source for PoolSource {
    fn start(&self) -> StartFetch {
        self.send(self.request.clone(), Some(self.upstream_answer.clone()))
    }

    fn resume(&self, from: u64, validators: &Validators) -> Option<StartFetch> {
        let mut request = self.request.clone();
        request.headers.remove(IF_NONE_MATCH);
        request.headers.remove(IF_MODIFIED_SINCE);
        request.headers.insert(RANGE, HeaderValue::from_str(&format!("bytes={from}-")).ok()?);
        let strong_etag = validators.etag.as_deref().filter(|tag| !tag.starts_with("W/"));
        if let Some(validator) = strong_etag.or(validators.last_modified.as_deref()) {
            request.headers.insert(IF_RANGE, HeaderValue::from_str(validator).ok()?);
        }
        request.avoid = *self.last_instance.lock();
        Some(self.send(request, None))
    }

    /// The same request, on another instance than the one that answered.
    fn elsewhere(&self) -> Option<StartFetch> {
        let last = (*self.last_instance.lock())?;
        if self.origin.instances.len() < 2 {
            return None;
        }
        let request = PoolRequest { avoid: Some(last), ..self.request.clone() };
        Some(self.send(request, None))
    }
}

/// Sends `request`, authorised as `auth` says: with the client's own
/// `Authorization`; or with the token held for its scope, or, after a `401`
/// with a Bearer challenge, with one fetched for it (once). Returns the
/// request as last sent, token included.
async fn authorised(
    state: &State,
    pool: &Arc<Pool>,
    origin: &Origin,
    auth: &UpstreamAuth,
    mut request: PoolRequest,
) -> Result<(PoolRequest, PoolAnswer), FetchError> {
    let upstream = |error: UpstreamError| FetchError::Upstream(Box::new(error));
    let (scope, credentials) = match auth {
        UpstreamAuth::Bearer { scope, credentials } => (scope, credentials),
        UpstreamAuth::Client(client) => {
            request.headers.insert(AUTHORIZATION, client.0.clone());
            let answer = pool.send(request.clone()).await.map_err(upstream)?;
            return Ok((request, answer));
        }
        UpstreamAuth::None => {
            let answer = pool.send(request.clone()).await.map_err(upstream)?;
            return Ok((request, answer));
        }
    };
    let held = state.kept.tokens.get(&origin.pool, scope);
    if let Some(token) = held.clone() {
        request.headers.insert(AUTHORIZATION, token);
    }
    let answer = pool.send(request.clone()).await.map_err(upstream)?;
    let challenge = match answer.response.status() {
        StatusCode::UNAUTHORIZED => Challenge::of(answer.response.headers()),
        _ => None,
    };
    // A token refused for what it may read: a new one, for the same scope
    // and account, would be refused too (and counted by the registry).
    let challenge = challenge.filter(|challenge| held.is_none() || !challenge.is_insufficient_scope());
    let Some(challenge) = challenge else { return Ok((request, answer)) };
    let base = without_user(origin.instances.get(answer.instance).map_or("", String::as_str));
    let asking = outgoing::headers(HeaderMap::new(), request.headers.get(USER_AGENT).cloned(), &state.loop_mark, None);
    let asker =
        Asker { pool: &origin.pool, base: &base, scope, credentials: credentials.as_ref().map(|c| c.0.as_str()) };
    let token = state
        .kept
        .tokens
        .fetch(&state.upstream.transport, asker, &challenge, asking)
        .await
        .map_err(|reason| FetchError::Upstream(format!("cannot get a token: {reason}").into()))?;
    request.headers.insert(AUTHORIZATION, token);
    let answer = pool.send(request.clone()).await.map_err(upstream)?;
    Ok((request, answer))
}

/// How many redirects in a row are followed before the fetch fails.
const MAX_REDIRECTS: usize = 5;

/// The answer at the end of the redirects starting with `response` to
/// `request`, sent to `base`: each hop goes out through the one transport
/// (so the offline switch and the hop host's breaker apply), the redirect
/// itself is never cached, and authorization never leaves for another host.
async fn follow(
    state: &State,
    pool: &str,
    base: &str,
    mut request: PoolRequest,
    mut response: Response<PoolBody>,
) -> Result<Response<PoolBody>, FetchError> {
    let mut from = origin_of(base).ok_or_else(|| redirect_error(format!("{base} is not a URL")))?;
    for _ in 0..MAX_REDIRECTS {
        if !is_redirect(response.status()) {
            return Ok(response);
        }
        let Some(location) = response.headers().get(LOCATION).and_then(|v| v.to_str().ok()) else {
            return Ok(response);
        };
        let (to, path) = resolve_location(&from, location).ok_or_else(|| {
            redirect_error(format!("the upstream redirected to {location:?}, not an http or https URL"))
        })?;
        if to != from {
            let names: Vec<_> =
                request.headers.keys().filter(|name| name.as_str().ends_with("authorization")).cloned().collect();
            names.iter().for_each(|name| {
                request.headers.remove(name);
            });
        }
        let hop = state
            .upstream
            .transport
            .pool(&format!("{pool}-redirect"), std::slice::from_ref(&to))
            .map_err(|error| FetchError::Upstream(Box::new(error)))?;
        request.path = path;
        request.avoid = None;
        response = hop.send(request.clone()).await.map_err(|error| FetchError::Upstream(Box::new(error)))?.response;
        from = to;
    }
    Err(redirect_error(format!("more than {MAX_REDIRECTS} redirects in a row")))
}

fn is_redirect(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

fn redirect_error(message: String) -> FetchError {
    FetchError::Upstream(message.into())
}

/// `scheme://authority` of `url`.
fn origin_of(url: &str) -> Option<String> {
    let uri: Uri = url.parse().ok()?;
    Some(format!("{}://{}", uri.scheme_str()?, uri.authority()?))
}

/// Where a `Location` sends a request made to the origin `from`: the
/// origin and the path (with its query).
fn resolve_location(from: &str, location: &str) -> Option<(String, String)> {
    if location.starts_with('/') && !location.starts_with("//") {
        return Some((from.to_string(), location.to_string()));
    }
    let uri: Uri = location.parse().ok()?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return None;
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    Some((origin_of(location)?, path))
}

/// A pool that could not be made, for every fetch that needed it.
#[derive(Debug)]
struct SharedError(Arc<UpstreamError>);

impl std::fmt::Display for SharedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref())
    }
}

/// `body`, adding what passes through to `side`'s counter of
/// `requester`'s requests.
pub fn counted(body: PoolBody, state: Arc<State>, side: SideId, requester: Requester) -> pkgproxy_cache::UpstreamBody {
    Counted { body, state, side, requester }.boxed()
}

/// An upstream body that adds what passes through to the side's counter.
struct Counted {
    body: PoolBody,
    state: Arc<State>,
    side: SideId,
    requester: Requester,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                let counters = self.state.stats.of(self.side, self.requester);
                counters.add(SideCounter::BytesFromUpstream, data.len() as u64);
            }
        }
        polled.map_err(|e| e.into())
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_resolves_against_the_origin_it_came_from() {
        let from = "http://127.0.0.1:8721";
        assert_eq!(resolve_location(from, "/cdn/x?t=1"), Some((from.to_string(), "/cdn/x?t=1".to_string())));
        assert_eq!(
            resolve_location(from, "https://cdn.example:8443/a/b"),
            Some(("https://cdn.example:8443".to_string(), "/a/b".to_string()))
        );
        assert_eq!(resolve_location(from, "ftp://x/y"), None);
        assert_eq!(resolve_location(from, "//elsewhere/x"), None);
        assert_eq!(origin_of("http://store.lan:80/prefix"), Some("http://store.lan:80".to_string()));
    }
}
