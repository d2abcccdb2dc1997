//! Why an answer is not a plain hit, in a few words a person reads: the
//! `X-Pkgproxy-Reason` header of every answer of the cache path but a
//! fresh hit, the access log's `reason`, and what `pkgproxyctl explain`
//! says of a request before it is made.

use std::time::Duration;

use http::header::HeaderValue;
use pkgproxy_cache::ClientDirectives;

use crate::failed::Failed;

pub use crate::headers::REASON;

/// The longest reason sent, in bytes (a side's refusal can be a sentence).
const LONGEST: usize = 240;

/// Why pkgproxy did not answer from a fresh cached entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Nothing is cached under the key.
    NotCached,
    /// Eviction removed what was cached under the key (at, Unix seconds).
    Evicted {
        /// When.
        at: u64,
    },
    /// The cached entry is older than its freshness window.
    Expired {
        /// Since it was fetched or last confirmed.
        age: Duration,
        /// How long it stays fresh.
        window: Duration,
    },
    /// The client's `Cache-Control` (or `Pragma`) asked for a fresher
    /// answer than the entry: `max-age=0`, `no-cache`.
    ClientAsked(String),
    /// What the side now expects of the key (a newer `Release` lists other
    /// bytes) is not the cached entry: `by` names it.
    Superseded {
        /// What lists other bytes: `Release of 2026-12-01 12:03 UTC`.
        by: String,
    },
    /// The cached entry is in a format the client does not read.
    NotReadable,
    /// The content is cached, but the upstream has not yet confirmed that
    /// this name serves it to this client (a registry's repository): the
    /// first request asks it.
    Unconfirmed,
    /// Offline mode: the upstream is not asked.
    Offline,
    /// Store-overloaded mode: the host's breaker is open.
    BreakerOpen {
        /// The host it is open for (`None` when not known).
        host: Option<String>,
        /// How long it stays open.
        left: Duration,
    },
    /// The upstream asked to be left alone (a `429`, or a `503` with
    /// `Retry-After`).
    RateLimited {
        /// What it answered.
        status: http::StatusCode,
        /// How long until it is asked again.
        left: Duration,
    },
    /// The side's policy refuses the request.
    Refused(String),
    /// The upstream failed: a stale copy was served, or nothing.
    UpstreamFailed(String),
}

impl Reason {
    /// Why an entry `age` old is not fresh for a client that sent `client`,
    /// with the side's `window`: the client's own directive when that is
    /// what made it stale, else its age.
    pub fn stale(age: Duration, window: Duration, client: ClientDirectives) -> Reason {
        if client.no_cache {
            return Reason::ClientAsked("no-cache".into());
        }
        match client.max_age {
            Some(max_age) if max_age < window || window.is_zero() => {
                Reason::ClientAsked(format!("max-age={}", max_age.as_secs()))
            }
            _ => Reason::Expired { age, window },
        }
    }

    /// The reason as the header carries it: printable ASCII, at most
    /// [`LONGEST`] bytes.
    pub fn header_value(&self) -> HeaderValue {
        let words = self.to_string();
        let mut printable: String =
            words.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
        if printable.len() > LONGEST {
            printable.truncate(LONGEST - 3);
            printable.push_str("...");
        }
        HeaderValue::try_from(printable).unwrap_or(HeaderValue::from_static("unknown"))
    }
}

impl From<&Failed> for Reason {
    fn from(failed: &Failed) -> Reason {
        match failed {
            Failed::Refused(refusal) => Reason::Refused(refusal.reason.clone()),
            Failed::Blocked { rule, .. } => Reason::Refused(rule.clone()),
            Failed::Offline => Reason::Offline,
            Failed::Overloaded { host, retry_after } => Reason::BreakerOpen { host: host.clone(), left: *retry_after },
            Failed::RateLimited { status, retry_after } => Reason::RateLimited { status: *status, left: *retry_after },
            Failed::Upstream(why) | Failed::Internal(why) => Reason::UpstreamFailed(why.clone()),
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::NotCached => f.write_str("not cached"),
            Reason::Evicted { at } => write!(f, "evicted ({})", minute_utc(*at)),
            Reason::Expired { age, window } => write!(f, "expired (age {}, window {})", short(*age), short(*window)),
            Reason::ClientAsked(directive) => write!(f, "client asked {directive}"),
            Reason::Superseded { by } => write!(f, "superseded by {by}"),
            Reason::NotReadable => f.write_str("cached copy is in a format this client does not read"),
            Reason::Unconfirmed => f.write_str("cached, but not yet confirmed as readable under this name"),
            Reason::Offline => f.write_str("offline"),
            Reason::BreakerOpen { host: Some(host), left } => {
                write!(f, "breaker open for {host}, {} s left", left.as_secs_f64().ceil() as u64)
            }
            Reason::BreakerOpen { host: None, left } => {
                write!(f, "breaker open, {} s left", left.as_secs_f64().ceil() as u64)
            }
            Reason::RateLimited { status, left } => {
                let left = left.as_secs_f64().ceil() as u64;
                match *status {
                    http::StatusCode::TOO_MANY_REQUESTS => write!(f, "upstream rate-limited, asked again in {left} s"),
                    status => write!(f, "upstream unavailable ({}), asked again in {left} s", status.as_u16()),
                }
            }
            Reason::Refused(why) => write!(f, "refused: {}", why.trim_end_matches('.')),
            Reason::UpstreamFailed(why) => write!(f, "upstream failed: {why}"),
        }
    }
}

/// Unix seconds to the minute: `2026-12-01 12:03 UTC`.
fn minute_utc(secs: u64) -> String {
    let stamp = humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs)).to_string();
    format!("{} {} UTC", &stamp[..10], &stamp[11..16])
}

/// A duration the way people say it: `40s`, `7m`, `3h`, `2d` (the largest
/// whole unit; seconds below two minutes).
fn short(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..120 => format!("{secs}s"),
        120..7_200 => format!("{}m", secs / 60),
        7_200..172_800 => format!("{}h", secs / 3_600),
        _ => format!("{}d", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_is_said_in_a_few_words() {
        let expired = Reason::Expired { age: Duration::from_secs(7 * 60 + 5), window: Duration::from_secs(300) };
        assert_eq!(expired.to_string(), "expired (age 7m, window 5m)");
        assert_eq!(Reason::NotCached.to_string(), "not cached");
        assert_eq!(Reason::Evicted { at: 1_800_000_000 }.to_string(), "evicted (2027-01-15 08:00 UTC)");
        let open = Reason::BreakerOpen { host: Some("deb.debian.org".into()), left: Duration::from_millis(13_200) };
        assert_eq!(open.to_string(), "breaker open for deb.debian.org, 14 s left");
        let limited =
            Reason::RateLimited { status: http::StatusCode::TOO_MANY_REQUESTS, left: Duration::from_secs(30) };
        assert_eq!(limited.to_string(), "upstream rate-limited, asked again in 30 s");
        let busy =
            Reason::RateLimited { status: http::StatusCode::SERVICE_UNAVAILABLE, left: Duration::from_millis(1) };
        assert_eq!(busy.to_string(), "upstream unavailable (503), asked again in 1 s");
        assert_eq!(
            Reason::Refused("not a known archive host.".into()).to_string(),
            "refused: not a known archive host"
        );
        let by = "Release of 2026-12-01 12:03 UTC".to_string();
        assert_eq!(Reason::Superseded { by }.to_string(), "superseded by Release of 2026-12-01 12:03 UTC");
        assert_eq!(Reason::Offline.header_value(), "offline");
        let long = Reason::Refused("é".repeat(400)).header_value();
        assert!(long.len() <= LONGEST && long.to_str().is_ok());
    }

    #[test]
    fn a_client_s_directive_is_named_when_it_made_the_entry_stale() {
        let window = Duration::from_secs(300);
        let mut client = ClientDirectives::default();
        let age = Duration::from_secs(400);
        assert_eq!(Reason::stale(age, window, client), Reason::Expired { age, window });
        client.max_age = Some(Duration::ZERO);
        assert_eq!(Reason::stale(Duration::from_secs(3), window, client).to_string(), "client asked max-age=0");
        client.no_cache = true;
        assert_eq!(Reason::stale(age, window, client).to_string(), "client asked no-cache");
    }
}
