//! The answers pkgproxy gives when it cannot serve a request, before a side
//! phrases them: each side's clients read errors their own way (apt and go
//! print a plain-text body; snapd will want a JSON error list), so the
//! request path decides *what* went wrong, once, and the side says it.

use std::time::Duration;

use http::header::{HeaderValue, ALLOW, RETRY_AFTER};
use http::StatusCode;

use crate::decision::{LocalAnswer, Refusal};

/// Why pkgproxy answers a request itself with an error.
#[derive(Debug, Clone, Copy)]
pub enum Failure<'a> {
    /// The side's policy refused the request.
    Refused(&'a Refusal),
    /// Offline mode is in effect and what was asked is not cached.
    Offline,
    /// Store-overloaded mode, and the upstream's breaker is open: asking
    /// again after `retry_after` may help.
    Overloaded {
        /// The shortest time until the upstream may be asked again.
        retry_after: Duration,
    },
    /// The upstream could not be reached, or failed; `reason` says how.
    UpstreamFailed {
        /// What happened, for people.
        reason: &'a str,
    },
    /// pkgproxy itself failed (a cached body that cannot be read).
    Internal {
        /// What happened, for people.
        reason: &'a str,
    },
}

impl Failure<'_> {
    /// The plain-text answer: the status the failure calls for and one line
    /// saying why (`Retry-After` for an open breaker, `Allow` for a `405`).
    pub fn plain_text(&self) -> LocalAnswer {
        match self {
            Failure::Refused(refusal) => {
                let mut answer = LocalAnswer::text(refusal.status, &format!("pkgproxy: {}", refusal.reason));
                if let Some(allow) = refusal.allow {
                    answer.headers.insert(ALLOW, HeaderValue::from_static(allow));
                }
                answer.reason = refusal.phrase.clone().map(std::borrow::Cow::Owned);
                answer
            }
            Failure::Offline => LocalAnswer::text(StatusCode::SERVICE_UNAVAILABLE, "pkgproxy is offline"),
            Failure::Overloaded { retry_after } => {
                let secs = retry_after_secs(*retry_after);
                let mut answer = LocalAnswer::text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("pkgproxy: the upstream is overloaded and left alone for {secs} s more"),
                );
                answer.headers.insert(RETRY_AFTER, HeaderValue::from(secs));
                answer
            }
            Failure::UpstreamFailed { reason } => {
                LocalAnswer::text(StatusCode::BAD_GATEWAY, &format!("pkgproxy: {reason}"))
            }
            Failure::Internal { reason } => {
                LocalAnswer::text(StatusCode::INTERNAL_SERVER_ERROR, &format!("pkgproxy: {reason}"))
            }
        }
    }
}

impl Failure<'_> {
    /// How an installer that reads a `4xx` as final and retries a `5xx`
    /// for long (cargo, pip, uv, npm) is best told: what cannot be had now
    /// is a `424` with one line saying why (`hint`: how to have it next
    /// time), at once; an overloaded upstream a `503` with `Retry-After`.
    pub fn not_held(&self, hint: &str) -> LocalAnswer {
        match self {
            Failure::Offline => LocalAnswer::text(
                StatusCode::FAILED_DEPENDENCY,
                &format!("pkgproxy is offline and does not hold this ({hint})"),
            )
            .because("Offline (pkgproxy): not held"),
            Failure::UpstreamFailed { reason } => LocalAnswer::text(
                StatusCode::FAILED_DEPENDENCY,
                &format!("pkgproxy does not hold this and cannot get it: {reason}"),
            )
            .because("Not held (pkgproxy): the upstream cannot be had"),
            _ => self.plain_text(),
        }
    }
}

/// The answer for what is not held while `upstream` (`index`,
/// `repository`) asks to be left alone for `left` more: a `424` saying so,
/// `phrase` its reason phrase, with `Retry-After` for scripts. For clients
/// that retry a `429` or a `503` for minutes (pip, Maven) and take a `424`
/// as final.
pub fn asked_to_wait(left: Duration, upstream: &str, phrase: &'static str) -> LocalAnswer {
    let secs = retry_after_secs(left);
    let mut answer = LocalAnswer::text(
        StatusCode::FAILED_DEPENDENCY,
        &format!("pkgproxy does not hold this, and the {upstream} asks to be left alone for {secs} s more"),
    )
    .because(phrase);
    answer.headers.insert(RETRY_AFTER, HeaderValue::from(secs));
    answer
}

/// Whole seconds, rounded up and never zero: `Retry-After: 0` would invite
/// the client straight back.
pub fn retry_after_secs(left: Duration) -> u64 {
    (left.as_secs() + u64::from(left.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_answers() {
        let offline = Failure::Offline.plain_text();
        assert_eq!(offline.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(offline.body, "pkgproxy is offline\n");
        assert!(!offline.headers.contains_key(RETRY_AFTER));
        let overloaded = Failure::Overloaded { retry_after: Duration::from_millis(30_500) }.plain_text();
        assert_eq!(overloaded.headers[RETRY_AFTER], "31", "rounded up");
        let now = Failure::Overloaded { retry_after: Duration::ZERO }.plain_text();
        assert_eq!(now.headers[RETRY_AFTER], "1", "never zero");
        let refused = Failure::Refused(&Refusal::method_not_allowed("GET, HEAD")).plain_text();
        assert_eq!(refused.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(refused.headers[ALLOW], "GET, HEAD");
        let failed = Failure::UpstreamFailed { reason: "cannot connect to x" }.plain_text();
        assert_eq!(
            (failed.status, failed.body.as_ref()),
            (StatusCode::BAD_GATEWAY, &b"pkgproxy: cannot connect to x\n"[..])
        );
    }
}
