//! The upstream requests of a shared fetch: built from the side's decision
//! (and the cached entry's validators when revalidating), sent through the
//! request's pool, their bodies counted as they arrive. A body that breaks
//! is resumed with a `Range` request, preferably on another instance.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, RANGE, USER_AGENT};
use http::{HeaderMap, Method};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use pkgproxy_cache::{Entry, FetchError, Source, StartFetch, Validators};
use pkgproxy_metrics::SideCounter;
use pkgproxy_sides::{CachedRequest, Mount, Origin, SideId};
use pkgproxy_upstream::offline::Mode;
use pkgproxy_upstream::{Pool, PoolBody, PoolRequest, UpstreamError};

use crate::config::Step;
use crate::context::{Exchange, UpstreamAnswer};
use crate::shadow::Original;
use crate::state::State;

/// The requests of one fetch, on one pool.
struct PoolSource {
    state: Arc<State>,
    pool: Result<Arc<Pool>, Arc<UpstreamError>>,
    request: PoolRequest,
    side: SideId,
    /// The instance that sent the last answer: a resume avoids it.
    last_instance: Arc<Mutex<Option<usize>>>,
    /// Where the first answer's status goes, for mirrors of the upstream
    /// step that compare.
    upstream_answer: UpstreamAnswer,
}

/// The source of a fetch of `request`: a `GET` with the client's user agent,
/// our loop mark and, when revalidating, the cached entry's validators.
pub fn source(
    state: &Arc<State>,
    request: &CachedRequest,
    exchange: &Exchange<'_>,
    conditional: Option<&Entry>,
) -> Box<dyn Source> {
    let (origin, side) = (&request.origin, request.side);
    let pool = state.upstream.transport.pool(&origin.pool, &origin.instances).map_err(Arc::new);
    let mut headers = HeaderMap::new();
    let agent = exchange.headers.get(USER_AGENT).cloned();
    headers
        .insert(USER_AGENT, agent.unwrap_or(HeaderValue::from_static(concat!("pkgproxy/", env!("CARGO_PKG_VERSION")))));
    state.loop_mark.add_to(&mut headers);
    if let Some(entry) = conditional {
        let value = |v: &Option<String>| v.as_deref().and_then(|v| HeaderValue::from_str(v).ok());
        if let Some(etag) = value(&entry.validators.etag) {
            headers.insert(IF_NONE_MATCH, etag);
        }
        if let Some(lm) = value(&entry.validators.last_modified) {
            headers.insert(IF_MODIFIED_SINCE, lm);
        }
    }
    let upstream_answer = copy_upstream_request(state, side, origin, exchange, &Method::GET, &headers);
    let request = PoolRequest::get(origin.path.clone(), headers);
    Box::new(PoolSource {
        state: Arc::clone(state),
        pool,
        request,
        side,
        last_instance: Arc::default(),
        upstream_answer,
    })
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
    if state.shadows.is_empty() {
        return UpstreamAnswer::default();
    }
    let uri = match exchange.mount {
        Mount::ForwardProxy => format!("{}{}", origin.instances.first().map_or("", String::as_str), origin.path),
        Mount::Prefix(_) => origin.path.clone(),
    };
    let tapped = state.shadows.tap(&Original {
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
        let (state, side, last_instance) = (Arc::clone(&self.state), self.side, Arc::clone(&self.last_instance));
        Box::pin(async move {
            let answer = pool.send(request).await.map_err(|error| FetchError::Upstream(Box::new(error)))?;
            if let Some(report) = report {
                report.report(answer.response.status().as_u16());
            }
            *last_instance.lock().unwrap_or_else(|p| p.into_inner()) = Some(answer.instance);
            Ok(answer.response.map(|body| counted(body, state, side)))
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
        request.avoid = *self.last_instance.lock().unwrap_or_else(|p| p.into_inner());
        Some(self.send(request, None))
    }
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

/// `body`, adding what passes through to `side`'s counter.
pub fn counted(body: PoolBody, state: Arc<State>, side: SideId) -> pkgproxy_cache::UpstreamBody {
    Counted { body, state, side }.boxed()
}

/// An upstream body that adds what passes through to the side's counter.
struct Counted {
    body: PoolBody,
    state: Arc<State>,
    side: SideId,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.state.stats.side(self.side).add(SideCounter::BytesFromUpstream, data.len() as u64);
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
