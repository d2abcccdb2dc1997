//! How a request ended, typed, and the one place that turns it into an
//! HTTP answer (axum's error handling): what went wrong is decided where it
//! happens and carried here as a type ([`Failed`]); the side phrases it for
//! its clients.
//!
//! An answer travels to its client as an [`Answer`]: the response and, as
//! typed fields beside it, what the request path learned of it (how it was
//! served, why it is not a plain hit, who answered, the stored body it
//! reads). Nothing about an answer rides in the response's extensions,
//! where the type checker could not follow it. It leaves here once
//! ([`finished`]): the headers that say how it was served written from
//! those fields ([`Answer::into_response`]), the access log's [`Note`]
//! beside the response.

use std::sync::Arc;

use http::header::{HeaderValue, CONTENT_LENGTH};
use http::{Response, StatusCode};
use pkgproxy_sides::{Failure, LocalAnswer, Side, StoredBody};
use pkgproxy_upstream::offline::Mode;

use super::reason::{Reason, REASON};
use crate::access_log::{CacheUse, Note};
use crate::body::ResponseBody;
pub use crate::failed::Failed;
use crate::headers::VIA;
use crate::stats::{Ending, Requester, Stats};

/// How an answer was served, as `X-Pkgproxy-Cache` tells the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// A fresh cached entry.
    Hit,
    /// A cached entry the upstream just confirmed.
    Revalidated,
    /// A stale cached entry, the upstream being unavailable.
    Stale,
    /// Bytes from the upstream.
    Miss,
}

impl Served {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Served::Hit => "hit",
            Served::Revalidated => "revalidated",
            Served::Stale => "stale",
            Served::Miss => "miss",
        }
    }
}

/// The marker header naming how an answer was served.
pub const CACHE_STATUS: &str = "x-pkgproxy-cache";

/// An answer on its way from the decision to the bytes written, with what
/// the request path noted of it (pingora's per-request context, for the
/// answer).
#[derive(Debug)]
pub struct Answer {
    /// The response, without the headers saying how it was served and why
    /// (written from `served` and `reason` at the end).
    pub response: Response<ResponseBody>,
    /// How it was served (`X-Pkgproxy-Cache`); `None` for an answer of a
    /// side's own (a fallback) or a tunnel's.
    pub served: Option<Served>,
    /// Why it is not a plain hit (`X-Pkgproxy-Reason`).
    pub reason: Option<Reason>,
    /// The upstream that answered, for the access log.
    pub answered_by: Option<Arc<str>>,
    /// The stored body it reads, whole: what a side that keeps a compressed
    /// form of a body finds it by. Noted only when the side rewrites.
    pub stored: Option<StoredBody>,
    /// How the access log says the cache was used, when `served` does not
    /// say it (an answer passed through uncached is `passed`, not `miss`).
    pub cache_use: Option<CacheUse>,
}

impl Answer {
    /// `response`, with nothing noted of it yet.
    pub fn new(response: Response<ResponseBody>) -> Answer {
        Answer { response, served: None, reason: None, answered_by: None, stored: None, cache_use: None }
    }

    /// `response`, served as `served`.
    pub fn served(response: Response<ResponseBody>, served: Served) -> Answer {
        Answer { served: Some(served), ..Answer::new(response) }
    }

    /// The answer's status.
    pub fn status(&self) -> StatusCode {
        self.response.status()
    }

    /// How the access log says the cache was used.
    pub fn cache_use(&self) -> CacheUse {
        self.cache_use.unwrap_or(match self.served {
            Some(Served::Hit) => CacheUse::Hit,
            Some(Served::Revalidated) => CacheUse::Revalidated,
            Some(Served::Stale) => CacheUse::Stale,
            Some(Served::Miss) | None => CacheUse::Miss,
        })
    }

    /// The response with the headers that say how it was served and why it
    /// is not a plain hit, written from what was noted of it, here and
    /// nowhere else.
    pub fn into_response(self) -> Response<ResponseBody> {
        let mut response = self.response;
        let headers = response.headers_mut();
        if let Some(served) = self.served {
            headers.insert(CACHE_STATUS, HeaderValue::from_static(served.as_str()));
        }
        if let Some(reason) = self.reason {
            headers.insert(REASON, reason.header_value());
        }
        response
    }
}

/// How a request ended.
#[derive(Debug)]
pub enum Outcome {
    /// An answer to send as it is: from the cache or a download in progress
    /// (hit, miss, revalidated, stale), or an upstream's own answer passed
    /// on (a `404`, a `503` with its `Retry-After`, a forwarded answer).
    Answered(Answer),
    /// The side made the answer itself.
    Local(LocalAnswer),
    /// pkgproxy cannot serve the request.
    Failed(Failed),
}

impl Outcome {
    /// How the request ended, for its side's counters, with offline mode
    /// `mode` in effect: `None` for an answer the side made itself.
    pub fn ending(&self, mode: Mode) -> Option<Ending> {
        match self {
            Outcome::Answered(answer) => Some(match answer.served {
                Some(Served::Hit | Served::Revalidated | Served::Stale) => Ending::Hit,
                _ if answer.status().is_server_error() => Ending::Failed,
                Some(Served::Miss) | None => Ending::Miss,
            }),
            Outcome::Local(_) => None,
            Outcome::Failed(failed) => Some(match failed.failure(mode) {
                Failure::Refused(_) | Failure::Offline | Failure::Overloaded { .. } => Ending::Refused,
                Failure::UpstreamFailed { .. } | Failure::Internal { .. } => Ending::Failed,
            }),
        }
    }

    /// How the request used the cache, as the access log says it.
    pub fn cache_use(&self) -> CacheUse {
        match self {
            Outcome::Answered(answer) => answer.cache_use(),
            Outcome::Local(_) => CacheUse::Local,
            Outcome::Failed(Failed::Upstream(_) | Failed::Internal(_)) => CacheUse::Miss,
            Outcome::Failed(_) => CacheUse::Refused,
        }
    }
}

impl From<Answer> for Outcome {
    fn from(answer: Answer) -> Self {
        Outcome::Answered(answer)
    }
}

impl From<Failed> for Outcome {
    fn from(failed: Failed) -> Self {
        Outcome::Failed(failed)
    }
}

/// An answer ready for its client: the response, and what the access log
/// and the trouble table say of it.
#[derive(Debug)]
pub struct Finished {
    /// The response, every header written.
    pub response: Response<ResponseBody>,
    /// What the log says of it.
    pub note: Note,
}

impl Finished {
    /// `response`, an answer of pkgproxy's own that used the cache as
    /// `cache` says (`local`, or `refused`).
    pub fn own(response: Response<ResponseBody>, cache: CacheUse) -> Finished {
        Finished { response, note: Note { side: None, cache, upstream: None } }
    }
}

/// The answer to a request of `side` (`None`: no side, as for a tunnel)
/// that ended in `outcome`, with offline mode `mode` in effect, and what
/// the log says of it.
pub fn finished(side: Option<&dyn Side>, mode: Mode, outcome: Outcome) -> Finished {
    let note = Note { side: side.map(|side| side.id()), cache: outcome.cache_use(), upstream: None };
    match outcome {
        Outcome::Answered(mut answer) => {
            let upstream = answer.answered_by.take();
            Finished { response: answer.into_response(), note: Note { upstream, ..note } }
        }
        outcome => Finished { response: respond(side, mode, outcome), note },
    }
}

/// The answer to a request of `side` (`None`: no side, as for a tunnel)
/// that ended in `outcome`, with offline mode `mode` in effect.
pub fn respond(side: Option<&dyn Side>, mode: Mode, outcome: Outcome) -> Response<ResponseBody> {
    match outcome {
        Outcome::Answered(answer) => answer.into_response(),
        Outcome::Local(answer) => local(answer),
        Outcome::Failed(failed) => {
            let failure = failed.failure(mode);
            let mut answer = local(match side {
                Some(side) => side.failure_answer(&failure),
                None => failure.plain_text(),
            });
            if let Some(reason) = refused_because(&failure) {
                answer.headers_mut().insert(REFUSED, HeaderValue::from_static(reason));
            }
            let reason = match failure {
                pkgproxy_sides::Failure::Offline => Reason::Offline,
                _ => Reason::from(&failed),
            };
            answer.headers_mut().insert(REASON, reason.header_value());
            answer
        }
    }
}

/// [`respond`], the request counted in `stats` as `requester`'s request
/// of `side` as it ended.
pub fn respond_counted(
    stats: &Stats,
    requester: Requester,
    side: &dyn Side,
    mode: Mode,
    outcome: Outcome,
) -> Response<ResponseBody> {
    stats.count(side.id(), requester, outcome.ending(mode));
    respond(Some(side), mode, outcome)
}

/// Says why pkgproxy did not ask the upstream, for a pkgproxy downstream
/// (a child whose parent this is) and scripts: `offline`, or `overloaded`
/// (the host's breaker is open; `Retry-After` says for how long). The
/// host it is about is the one the request named.
pub const REFUSED: http::header::HeaderName = http::header::HeaderName::from_static("x-pkgproxy-refused");

fn refused_because(failure: &pkgproxy_sides::Failure<'_>) -> Option<&'static str> {
    match failure {
        pkgproxy_sides::Failure::Offline => Some("offline"),
        pkgproxy_sides::Failure::Overloaded { .. } => Some("overloaded"),
        _ => None,
    }
}

/// A side's own answer, with its length and `Via`.
pub fn local(answer: LocalAnswer) -> Response<ResponseBody> {
    let length = answer.body.len();
    let mut response = Response::new(ResponseBody::full(answer.body));
    *response.status_mut() = answer.status;
    *response.headers_mut() = answer.headers;
    let reason = answer.reason.and_then(|reason| hyper::ext::ReasonPhrase::try_from(reason.as_bytes().to_vec()).ok());
    if let Some(reason) = reason {
        response.extensions_mut().insert(reason);
    }
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
    use std::time::Duration;

    use pkgproxy_sides::Refusal;

    use super::*;

    #[test]
    fn a_local_answer_s_reason_phrase_goes_with_it() {
        let answer = LocalAnswer::text(StatusCode::FAILED_DEPENDENCY, "x").because("Offline (pkgproxy): not held");
        let response = local(answer);
        let reason = response.extensions().get::<hyper::ext::ReasonPhrase>().expect("the reason phrase");
        assert_eq!(reason.as_bytes(), b"Offline (pkgproxy): not held");
    }

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
        assert_eq!(headers[REFUSED], "offline");
        assert_eq!(headers[REASON], "offline");
        let overloaded = Failed::Overloaded { host: None, retry_after: Duration::from_millis(1500) };
        let (status, headers, _) = answered(Mode::StoreOverloaded, overloaded).await;
        assert_eq!((status, &headers[RETRY_AFTER]), (StatusCode::SERVICE_UNAVAILABLE, &HeaderValue::from(2)));
        assert_eq!(headers[REFUSED], "overloaded");
        let (_, headers, _) = answered(Mode::Never, Failed::Upstream("cannot connect to x".into())).await;
        assert!(!headers.contains_key(REFUSED), "the upstream was asked");
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

    #[test]
    fn what_was_noted_of_an_answer_is_written_once_as_its_headers_and_its_log_note() {
        let response = Response::new(ResponseBody::Empty);
        let answer = Answer {
            reason: Some(Reason::Offline),
            answered_by: Some("https://upstream.example".into()),
            cache_use: Some(CacheUse::Passed),
            ..Answer::served(response, Served::Stale)
        };
        let finished = finished(None, Mode::Never, Outcome::Answered(answer));
        assert_eq!(finished.response.headers()[CACHE_STATUS], "stale");
        assert_eq!(finished.response.headers()[REASON], "offline");
        assert_eq!(finished.note.cache, CacheUse::Passed, "as noted, over what `served` says");
        assert_eq!(finished.note.upstream.as_deref(), Some("https://upstream.example"));
        let plain = finished_plain(Served::Revalidated);
        assert_eq!((plain.note.cache, plain.note.upstream), (CacheUse::Revalidated, None));
        assert!(!plain.response.headers().contains_key(REASON), "a plain answer says no reason");
    }

    fn finished_plain(served: Served) -> Finished {
        let answer = Answer::served(Response::new(ResponseBody::Empty), served);
        finished(None, Mode::Never, Outcome::Answered(answer))
    }

    #[tokio::test]
    async fn a_local_answer_is_sent_with_its_length() {
        let answer = LocalAnswer::text(StatusCode::IM_A_TEAPOT, "short and stout");
        let (status, headers, body) = answered(Mode::Never, Outcome::Local(answer)).await;
        assert_eq!((status, body.as_str()), (StatusCode::IM_A_TEAPOT, "short and stout\n"));
        assert_eq!(headers[CONTENT_LENGTH], "16");
    }
}
