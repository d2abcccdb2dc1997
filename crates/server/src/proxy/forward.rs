//! Forwarding: a request its side passes to the upstream uncached (an
//! authentication `POST`, say). Its body is read whole, up to the side's
//! limit, and sent through the side's pool, which never sends it twice when
//! its method is not idempotent; the answer streams back as the upstream
//! sends it. Nothing is shared with another client, nothing is cached.

use std::sync::Arc;

use bytes::Bytes;
use http::header::HeaderValue;
use http::{Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use pkgproxy_metrics::SideCounter;
use pkgproxy_sides::{ForwardRequest, Refusal};
use pkgproxy_upstream::PoolRequest;

use super::answer::{Served, CACHE_STATUS};
use super::fetching::{copy_upstream_request, counted};
use super::outcome::{Failed, Outcome};
use crate::body::ResponseBody;
use crate::context::Exchange;
use crate::headers::{add_via, strip_hop_by_hop};
use crate::state::State;

/// Forwards `request` with the client's `body`.
pub async fn forward<B>(state: &Arc<State>, exchange: &Exchange<'_>, request: ForwardRequest, body: B) -> Outcome
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let stats = state.stats.side(request.side);
    stats.increment(SideCounter::Requests);
    let limit = usize::try_from(request.body_limit).unwrap_or(usize::MAX);
    let body = match Limited::new(body, limit).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            let reason = format!("the request body is larger than the {} bytes taken here", request.body_limit);
            return Failed::Refused(Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, reason)).into();
        }
        Err(error) => {
            return Failed::Refused(Refusal::bad_request(format!("the request body broke off: {error}"))).into()
        }
    };
    if let Some(record) = request.record {
        match record {}
    }
    let origin = &request.origin;
    let pool = match state.upstream.transport.pool(&origin.pool, &origin.instances) {
        Ok(pool) => pool,
        Err(error) => return Failed::of_upstream(&error).into(),
    };
    let mut headers = request.headers;
    state.loop_mark.add_to(&mut headers);
    let upstream_answer = copy_upstream_request(state, request.side, origin, exchange, &request.method, &headers);
    let sent = PoolRequest { method: request.method, path: origin.path.clone(), headers, body, avoid: None };
    let answer = match pool.send(sent).await {
        Ok(answer) => answer,
        Err(error) => return Failed::of_upstream(&error).into(),
    };
    let status = answer.response.status();
    upstream_answer.report(status.as_u16());
    exchange.upstream_answer.report(status.as_u16());
    stats.increment(SideCounter::Misses);
    let (parts, body) = answer.response.into_parts();
    let mut response = Response::new(ResponseBody::Upstream(counted(body, Arc::clone(state), request.side)));
    *response.status_mut() = parts.status;
    *response.headers_mut() = parts.headers;
    let headers = response.headers_mut();
    strip_hop_by_hop(headers);
    add_via(headers);
    headers.insert(CACHE_STATUS, HeaderValue::from_static(Served::Miss.as_str()));
    if *exchange.method == http::Method::HEAD {
        *response.body_mut() = ResponseBody::Empty;
    }
    Outcome::Answered(response)
}
