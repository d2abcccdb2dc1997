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
use std::time::Duration;

use pkgproxy_cache::FetchError;
use pkgproxy_sides::{Failure, Refusal};
use pkgproxy_upstream::offline::{Mode, Refusal as NotSent};
use pkgproxy_upstream::UpstreamError;

/// Why pkgproxy cannot serve a request.
#[derive(Debug, Clone)]
pub enum Failed {
    /// The side's policy refused it.
    Refused(Refusal),
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
            Failed::Refused(refusal) => Failure::Refused(refusal),
            Failed::Upstream(_) if mode == Mode::Offline => Failure::Offline,
            Failed::Offline => Failure::Offline,
            Failed::Overloaded { retry_after, .. } => Failure::Overloaded { retry_after: *retry_after },
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
}
