//! How a request ended, typed, and the one place that turns it into an
//! HTTP answer (axum's error handling): what went wrong is decided where it
//! happens and carried here as a type; the side phrases it for its clients.
//!
//! Offline mode has one rule of its own here: a request whose upstream
//! failed while offline mode is in effect (a download that started before
//! the switch, say) is answered as offline, since asking again cannot help
//! until the mode changes.

use std::error::Error;
use std::time::Duration;

use http::header::{HeaderValue, CONTENT_LENGTH};
use http::Response;
use pkgproxy_cache::FetchError;
use pkgproxy_sides::{Failure, LocalAnswer, Refusal, Side};
use pkgproxy_upstream::offline::{Mode, Refusal as NotSent};
use pkgproxy_upstream::UpstreamError;

use crate::body::ResponseBody;
use crate::headers::VIA;

/// How a request ended.
#[derive(Debug)]
pub enum Outcome {
    /// An answer to send as it is: from the cache or a download in progress
    /// (hit, miss, revalidated, stale), or an upstream's own answer passed
    /// on (a `404`, a `503` with its `Retry-After`, a forwarded answer).
    Answered(Response<ResponseBody>),
    /// The side made the answer itself.
    Local(LocalAnswer),
    /// pkgproxy cannot serve the request.
    Failed(Failed),
}

/// Why pkgproxy cannot serve a request.
#[derive(Debug)]
pub enum Failed {
    /// The side's policy refused it.
    Refused(Refusal),
    /// Offline mode refused to send its upstream request.
    Offline,
    /// Store-overloaded mode: every upstream host of the request has its
    /// breaker open, the shortest for this long.
    Overloaded {
        /// How long until the upstream may be asked again.
        retry_after: Duration,
    },
    /// The upstream could not be reached or failed: why, for people.
    Upstream(String),
    /// pkgproxy itself failed.
    Internal(String),
}

impl Failed {
    /// The failure of a fetch: a refusal by the offline switch is found
    /// among the error's causes, whatever wraps it.
    pub fn of_fetch(error: &FetchError) -> Failed {
        match refusal_in(error) {
            Some(refusal) => Failed::not_sent(refusal),
            None => Failed::Upstream(error.to_string()),
        }
    }

    /// The failure of the way out.
    pub fn of_upstream(error: &UpstreamError) -> Failed {
        match error.refusal() {
            Some(refusal) => Failed::not_sent(refusal),
            None => Failed::Upstream(error.to_string()),
        }
    }

    fn not_sent(refusal: NotSent) -> Failed {
        match refusal {
            NotSent::Offline => Failed::Offline,
            NotSent::BreakerOpen { retry_after } => Failed::Overloaded { retry_after },
        }
    }

    /// What the side is to phrase, with offline mode `mode` in effect.
    pub fn failure(&self, mode: Mode) -> Failure<'_> {
        match self {
            Failed::Refused(refusal) => Failure::Refused(refusal),
            Failed::Upstream(_) if mode == Mode::Offline => Failure::Offline,
            Failed::Offline => Failure::Offline,
            Failed::Overloaded { retry_after } => Failure::Overloaded { retry_after: *retry_after },
            Failed::Upstream(reason) => Failure::UpstreamFailed { reason },
            Failed::Internal(reason) => Failure::Internal { reason },
        }
    }
}

impl From<Failed> for Outcome {
    fn from(failed: Failed) -> Self {
        Outcome::Failed(failed)
    }
}

/// The offline switch's refusal among the causes of `error`, if any
/// (linkerd's `is_caused_by`).
fn refusal_in(error: &(dyn Error + 'static)) -> Option<NotSent> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(refusal) = error.downcast_ref::<UpstreamError>().and_then(UpstreamError::refusal) {
            return Some(refusal);
        }
        cause = error.source();
    }
    None
}

/// The answer to a request of `side` (`None`: no side, as for a tunnel)
/// that ended in `outcome`, with offline mode `mode` in effect.
pub fn respond(side: Option<&Side>, mode: Mode, outcome: Outcome) -> Response<ResponseBody> {
    match outcome {
        Outcome::Answered(response) => response,
        Outcome::Local(answer) => local(answer),
        Outcome::Failed(failed) => {
            let failure = failed.failure(mode);
            local(match side {
                Some(side) => side.failure_answer(&failure),
                None => failure.plain_text(),
            })
        }
    }
}

/// A side's own answer, with its length and `Via`.
pub fn local(answer: LocalAnswer) -> Response<ResponseBody> {
    let length = answer.body.len();
    let mut response = Response::new(ResponseBody::full(answer.body));
    *response.status_mut() = answer.status;
    *response.headers_mut() = answer.headers;
    let headers = response.headers_mut();
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    headers.insert(http::header::VIA, VIA);
    response
}

#[cfg(test)]
mod tests {
    use http::header::{ALLOW, RETRY_AFTER, VIA};
    use http::{HeaderMap, StatusCode};
    use http_body_util::BodyExt;
    use pkgproxy_upstream::offline::Refusal as SwitchRefusal;

    use super::*;

    async fn answered(mode: Mode, outcome: impl Into<Outcome>) -> (StatusCode, HeaderMap, String) {
        let response = respond(None, mode, outcome.into());
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        (parts.status, parts.headers, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn each_failure_gets_its_status_and_words() {
        let (status, _, body) = answered(Mode::Never, Failed::Upstream("cannot connect to x".into())).await;
        assert_eq!((status, body.as_str()), (StatusCode::BAD_GATEWAY, "pkgproxy: cannot connect to x\n"));
        let (status, headers, body) = answered(Mode::Never, Failed::Offline).await;
        assert_eq!((status, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "pkgproxy is offline\n"));
        assert!(!headers.contains_key(RETRY_AFTER));
        let overloaded = Failed::Overloaded { retry_after: Duration::from_millis(1500) };
        let (status, headers, _) = answered(Mode::StoreOverloaded, overloaded).await;
        assert_eq!((status, &headers[RETRY_AFTER]), (StatusCode::SERVICE_UNAVAILABLE, &HeaderValue::from(2)));
        let (status, headers, _) =
            answered(Mode::Never, Failed::Refused(Refusal::method_not_allowed("GET, HEAD"))).await;
        assert_eq!((status, &headers[ALLOW]), (StatusCode::METHOD_NOT_ALLOWED, &HeaderValue::from_static("GET, HEAD")));
        assert_eq!(headers[VIA], "1.1 pkgproxy");
    }

    #[tokio::test]
    async fn an_upstream_failure_while_offline_is_answered_as_offline() {
        let (status, _, body) = answered(Mode::Offline, Failed::Upstream("reset".into())).await;
        assert_eq!((status, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "pkgproxy is offline\n"));
    }

    #[tokio::test]
    async fn a_local_answer_is_sent_with_its_length() {
        let answer = LocalAnswer::text(StatusCode::IM_A_TEAPOT, "short and stout");
        let (status, headers, body) = answered(Mode::Never, Outcome::Local(answer)).await;
        assert_eq!((status, body.as_str()), (StatusCode::IM_A_TEAPOT, "short and stout\n"));
        assert_eq!(headers[CONTENT_LENGTH], "16");
    }

    #[test]
    fn a_refusal_by_the_switch_is_found_whatever_wraps_it() {
        let refused = |refusal| UpstreamError::Refused { host: "h".into(), refusal };
        let offline = FetchError::Upstream(Box::new(refused(SwitchRefusal::Offline)));
        assert!(matches!(Failed::of_fetch(&offline), Failed::Offline));
        let open = refused(SwitchRefusal::BreakerOpen { retry_after: Duration::from_secs(9) });
        let overloaded = FetchError::Upstream(Box::new(open));
        assert!(
            matches!(Failed::of_fetch(&overloaded), Failed::Overloaded { retry_after } if retry_after.as_secs() == 9)
        );
        let broken = FetchError::Body { received: 10, message: "reset".into() };
        assert!(matches!(Failed::of_fetch(&broken), Failed::Upstream(_)));
    }
}
