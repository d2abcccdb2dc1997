//! Why pkgproxy cannot serve a request, typed where it happens: a side's
//! refusal, offline mode, an overloaded store, a failed upstream, or
//! pkgproxy itself. The request path turns it into an answer in the side's
//! words.
//!
//! Offline mode has one rule of its own here: a request whose upstream
//! failed while offline mode is in effect (a download that started before
//! the switch, say) is answered as offline, since asking again cannot help
//! until the mode changes.

use std::error::Error;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};

use pkgproxy_cache::FetchError;
use pkgproxy_sides::{Failure, Refusal};
use pkgproxy_upstream::offline::{outcome_of, Mode, Outcome as HostOutcome, Refusal as NotSent};
use pkgproxy_upstream::UpstreamError;

/// How long a `429` without a usable `Retry-After` keeps an upstream from
/// being asked again.
pub const RATE_LIMITED_FOR: Duration = Duration::from_secs(60);

/// Why pkgproxy cannot serve a request.
#[derive(Debug, Clone)]
pub enum Failed {
    /// The side's policy refused it.
    Refused(Refusal),
    /// The fleet's policy refused the release it is of (`[policy]`).
    Blocked {
        /// What its client is told (a `403`, the line saying why and
        /// until when, the short reason phrase).
        refusal: Refusal,
        /// The release and the rule in a few words (`npm:x@1.0.1 blocked
        /// by min_age until 2026-12-06T10:00Z`): what `X-Pkgproxy-Reason`,
        /// the access log and the status page say.
        rule: String,
    },
    /// Offline mode refused to send its upstream request.
    Offline,
    /// Store-overloaded mode: every upstream host of the request has its
    /// breaker open, the shortest for this long.
    Overloaded {
        /// The host whose breaker is open, when known.
        host: Option<String>,
        /// How long until the upstream may be asked again.
        retry_after: Duration,
    },
    /// The upstream asked to be left alone: it answered `429` (its rate
    /// limit), or `503` with a `Retry-After`.
    RateLimited {
        /// What it answered.
        status: StatusCode,
        /// How long until it may be asked again.
        retry_after: Duration,
    },
    /// The upstream could not be reached or failed: why, for people.
    Upstream(String),
    /// pkgproxy itself failed.
    Internal(String),
}

impl Failed {
    /// Whether the side's policy refused the request: nothing was to be
    /// had, so no fallback stands for it.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Failed::Refused(_) | Failed::Blocked { .. })
    }

    /// The failure of a fetch: a refusal by the offline switch is found
    /// among the error's causes, whatever wraps it.
    pub fn of_fetch(error: &FetchError) -> Failed {
        match refusal_in(error) {
            Some((host, refusal)) => Failed::not_sent(host, refusal),
            None => Failed::Upstream(error.to_string()),
        }
    }

    /// The failure of the way out.
    pub fn of_upstream(error: &UpstreamError) -> Failed {
        match (error, error.refusal()) {
            (UpstreamError::Refused { host, .. }, Some(refusal)) => Failed::not_sent(host.clone(), refusal),
            (_, Some(refusal)) => Failed::not_sent(String::new(), refusal),
            (_, None) => Failed::Upstream(error.to_string()),
        }
    }

    /// The failure an upstream answer of `status` with `headers` is when
    /// it asks to be left alone (read at `now`, for a `Retry-After` date):
    /// a `429` (for its `Retry-After`, else [`RATE_LIMITED_FOR`]) or a
    /// `503` with a `Retry-After`.
    pub fn rate_limited(status: StatusCode, headers: &HeaderMap, now: SystemTime) -> Option<Failed> {
        let HostOutcome::Failure { retry_after } = outcome_of(status, headers, now) else { return None };
        let retry_after = match (status, retry_after) {
            (_, Some(retry_after)) => retry_after,
            (StatusCode::TOO_MANY_REQUESTS, None) => RATE_LIMITED_FOR,
            _ => return None,
        };
        Some(Failed::RateLimited { status, retry_after })
    }

    /// How long the upstream asked to be left alone, when it did (a rate
    /// limit, or a breaker opened by one).
    pub fn leave_alone_for(&self) -> Option<Duration> {
        match self {
            Failed::RateLimited { retry_after, .. } | Failed::Overloaded { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The same failure, `left` from its end: what a client asking again
    /// before then is told.
    pub fn with_time_left(&self, left: Duration) -> Failed {
        match self {
            Failed::RateLimited { status, .. } => Failed::RateLimited { status: *status, retry_after: left },
            Failed::Overloaded { host, .. } => Failed::Overloaded { host: host.clone(), retry_after: left },
            other => other.clone(),
        }
    }

    fn not_sent(host: String, refusal: NotSent) -> Failed {
        match refusal {
            NotSent::Offline => Failed::Offline,
            NotSent::BreakerOpen { retry_after } => {
                Failed::Overloaded { host: Some(host).filter(|h| !h.is_empty()), retry_after }
            }
        }
    }

    /// What the side is to phrase, with offline mode `mode` in effect.
    pub fn failure(&self, mode: Mode) -> Failure<'_> {
        match self {
            Failed::Refused(refusal) | Failed::Blocked { refusal, .. } => Failure::Refused(refusal),
            Failed::Upstream(_) if mode == Mode::Offline => Failure::Offline,
            Failed::Offline => Failure::Offline,
            Failed::Overloaded { retry_after, .. } | Failed::RateLimited { retry_after, .. } => {
                Failure::Overloaded { retry_after: *retry_after }
            }
            Failed::Upstream(reason) => Failure::UpstreamFailed { reason },
            Failed::Internal(reason) => Failure::Internal { reason },
        }
    }
}

/// The offline switch's refusal among the causes of `error`, with the host
/// it was about, if any (linkerd's `is_caused_by`).
fn refusal_in(error: &(dyn Error + 'static)) -> Option<(String, NotSent)> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(UpstreamError::Refused { host, refusal }) = error.downcast_ref::<UpstreamError>() {
            return Some((host.clone(), *refusal));
        }
        cause = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use pkgproxy_upstream::offline::Refusal as SwitchRefusal;

    use super::*;

    #[test]
    fn a_refusal_by_the_switch_is_found_whatever_wraps_it() {
        let refused = |refusal| UpstreamError::Refused { host: "h".into(), refusal };
        let offline = FetchError::Upstream(Box::new(refused(SwitchRefusal::Offline)));
        assert!(matches!(Failed::of_fetch(&offline), Failed::Offline));
        let open = refused(SwitchRefusal::BreakerOpen { retry_after: Duration::from_secs(9) });
        let overloaded = FetchError::Upstream(Box::new(open));
        assert!(
            matches!(Failed::of_fetch(&overloaded), Failed::Overloaded { host: Some(host), retry_after } if retry_after.as_secs() == 9 && host == "h")
        );
        let broken = FetchError::Body { received: 10, message: "reset".into() };
        assert!(matches!(Failed::of_fetch(&broken), Failed::Upstream(_)));
    }

    #[test]
    fn a_429_or_a_503_with_retry_after_asks_to_be_left_alone_and_nothing_else_does() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::RETRY_AFTER, value.parse().unwrap());
            headers
        };
        let left = |status: u16, headers: &HeaderMap| {
            Failed::rate_limited(StatusCode::from_u16(status).unwrap(), headers, now)
                .and_then(|failed| failed.leave_alone_for())
        };
        assert_eq!(left(429, &with("30")), Some(Duration::from_secs(30)));
        assert_eq!(left(429, &HeaderMap::new()), Some(RATE_LIMITED_FOR));
        assert_eq!(left(429, &with("soon")), Some(RATE_LIMITED_FOR));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(left(503, &with(&date)), Some(Duration::from_secs(90)));
        assert_eq!(left(503, &HeaderMap::new()), None, "a 503 alone is a failure, not a request to wait");
        for status in [200, 404, 500, 502, 504] {
            assert_eq!(left(status, &with("30")), None, "{status}");
        }
        let limited =
            Failed::RateLimited { status: StatusCode::TOO_MANY_REQUESTS, retry_after: Duration::from_secs(30) };
        assert_eq!(limited.with_time_left(Duration::from_secs(4)).leave_alone_for(), Some(Duration::from_secs(4)));
    }
}
