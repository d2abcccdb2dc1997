//! The upstream request of a shared fetch: built from the side's decision
//! (and the cached entry's validators when revalidating), sent through the
//! one transport, its body counted as it arrives.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, USER_AGENT};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use pkgproxy_cache::{Entry, FetchError, StartFetch};
use pkgproxy_sides::CachedRequest;

use super::answer::Asked;
use crate::state::State;

/// The future that asks the upstream for `request`.
pub fn start(
    state: &Arc<State>,
    request: &CachedRequest,
    asked: &Asked<'_>,
    conditional: Option<&Entry>,
) -> StartFetch {
    let Some(uri) = request.upstream.uri() else {
        let url = format!("{}{}", request.upstream.host, request.upstream.raw_path);
        return Box::pin(async move { Err(FetchError::Upstream(format!("{url} is not a valid URL"))) });
    };
    let mut upstream_request =
        http::Request::get(uri).body(Default::default()).expect("a parsed URI makes a valid request");
    let headers = upstream_request.headers_mut();
    let agent = asked.headers.get(USER_AGENT).cloned();
    headers
        .insert(USER_AGENT, agent.unwrap_or(HeaderValue::from_static(concat!("pkgproxy/", env!("CARGO_PKG_VERSION")))));
    state.loop_mark.add_to(headers);
    if let Some(entry) = conditional {
        let value = |v: &Option<String>| v.as_deref().and_then(|v| HeaderValue::from_str(v).ok());
        if let Some(etag) = value(&entry.validators.etag) {
            headers.insert(IF_NONE_MATCH, etag);
        }
        if let Some(lm) = value(&entry.validators.last_modified) {
            headers.insert(IF_MODIFIED_SINCE, lm);
        }
    }
    let state = Arc::clone(state);
    let side = request.side;
    Box::pin(async move {
        let answer = state.upstream.transport.send(upstream_request).await.map_err(|error| match error.refusal() {
            Some(retry_after) => FetchError::Refused { message: error.to_string(), retry_after },
            None => FetchError::Upstream(error.to_string()),
        })?;
        Ok(answer.map(|body| Counted { body, state, side }.boxed()))
    })
}

/// An upstream body that adds what passes through to the side's counter.
struct Counted {
    body: hyper::body::Incoming,
    state: Arc<State>,
    side: pkgproxy_sides::Side,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.state.stats.side(self.side).upstream_bytes(data.len() as u64);
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
