//! The offline middleware, around every proxy request: in offline mode every
//! `502` (an upstream that could not be reached, since nothing is fetched)
//! becomes a `503` saying pkgproxy is offline, with no `Retry-After` (asking
//! again cannot help until the mode changes). In store-overloaded mode only a
//! `502` whose own upstream request was refused by a breaker becomes a
//! `503`, whose `Retry-After` is the shortest time left among the hosts it
//! was refused for; a `502` from a host whose breaker is closed stays one.
//!
//! The request carries a [`RefusalNote`] (in its extensions: the request's
//! context) down to where upstream requests are made; every client of a
//! shared fetch sees the fetch's typed refusal and notes it, the leader and
//! those who only waited alike. A side may answer refusals its own way
//! ([`refusal_answer`]); sides without one get the plain text.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header::{HeaderValue, RETRY_AFTER};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use pkgproxy_sides::Side;
use pkgproxy_upstream::offline::Mode;

use crate::body::ResponseBody;
use crate::proxy::{self, answer};
use crate::state::State;

/// What became of a request's upstream requests, noted as they are refused.
#[derive(Debug, Clone, Default)]
pub struct RefusalNote {
    inner: Arc<Mutex<Noted>>,
}

#[derive(Debug, Default)]
struct Noted {
    /// Some host refused this request.
    refused: bool,
    /// The shortest time left among the hosts that refused it.
    shortest: Option<Duration>,
    /// The side that handled the request, for its own refusal answer.
    side: Option<Side>,
}

impl RefusalNote {
    fn lock(&self) -> std::sync::MutexGuard<'_, Noted> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The offline switch refused an upstream request of this request.
    pub fn refused(&self, retry_after: Option<Duration>) {
        let mut noted = self.lock();
        noted.refused = true;
        if let Some(left) = retry_after {
            noted.shortest = Some(noted.shortest.map_or(left, |shortest| shortest.min(left)));
        }
    }

    /// The side handling the request.
    pub fn handled_by(&self, side: Side) {
        self.lock().side = Some(side);
    }
}

/// Serves a proxy request, rewriting a `502` as the mode says.
pub async fn around(state: Arc<State>, mut request: Request<Incoming>) -> Response<ResponseBody> {
    let note = RefusalNote::default();
    request.extensions_mut().insert(note.clone());
    let response = proxy::handle(Arc::clone(&state), request).await;
    if response.status() != StatusCode::BAD_GATEWAY {
        return response;
    }
    let noted = note.lock();
    match state.upstream.switch.mode() {
        Mode::Offline => refusal_answer(noted.side, None),
        Mode::StoreOverloaded if noted.refused => {
            refusal_answer(noted.side, Some(noted.shortest.unwrap_or(Duration::ZERO)))
        }
        _ => response,
    }
}

/// The answer to a request the offline switch refused: `retry_after` is
/// `None` in offline mode. Every side has the plain-text answer; a side
/// whose clients need another (snapd retries every 5xx) adds its arm here.
pub fn refusal_answer(side: Option<Side>, retry_after: Option<Duration>) -> Response<ResponseBody> {
    match (side, retry_after) {
        (Some(Side::Apt | Side::Go) | None, None) => {
            answer::text(StatusCode::SERVICE_UNAVAILABLE, "pkgproxy is offline")
        }
        (Some(Side::Apt | Side::Go) | None, Some(left)) => {
            let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            let secs = secs.max(1);
            let mut response = answer::text(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("pkgproxy: the upstream is overloaded and left alone for {secs} s more"),
            );
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_refused_for_two_hosts_retries_after_the_shorter_time() {
        let note = RefusalNote::default();
        note.refused(Some(Duration::from_secs(90)));
        note.refused(Some(Duration::from_millis(30_500)));
        note.refused(Some(Duration::from_secs(600)));
        let noted = note.lock();
        assert!(noted.refused);
        assert_eq!(noted.shortest, Some(Duration::from_millis(30_500)));
    }

    #[test]
    fn refusal_answers() {
        let offline = refusal_answer(Some(Side::Apt), None);
        assert_eq!(offline.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(offline.headers().get(RETRY_AFTER).is_none());
        let overloaded = refusal_answer(None, Some(Duration::from_millis(30_500)));
        assert_eq!(overloaded.headers().get(RETRY_AFTER).unwrap(), "31", "rounded up");
        let now = refusal_answer(None, Some(Duration::ZERO));
        assert_eq!(now.headers().get(RETRY_AFTER).unwrap(), "1", "never zero");
    }
}
