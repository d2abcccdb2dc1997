//! The one function that decides whether a cached entry may be served as is.
//!
//! Every side asks here, so the rules (immutable entries never age, a client's
//! `max-age=0` forces a revalidation, the configured window otherwise, and
//! offline mode freezing them all) live in one place.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

use crate::entry::{Class, Entry};

/// What the client said about freshness in its `Cache-Control`/`Pragma`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientDirectives {
    /// `no-cache` (or `Pragma: no-cache`): revalidate before serving.
    pub no_cache: bool,
    /// `max-age=N`: the client accepts a response at most this old.
    pub max_age: Option<Duration>,
}

impl ClientDirectives {
    /// Reads the directives from request headers. Unknown directives and
    /// malformed values are ignored, as RFC 9111 §5.2 asks.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut directives = ClientDirectives::default();
        for value in headers.get_all(http::header::CACHE_CONTROL) {
            let Ok(value) = value.to_str() else { continue };
            for directive in value.split(',') {
                let directive = directive.trim();
                let (name, arg) = match directive.split_once('=') {
                    Some((name, arg)) => (name.trim(), Some(arg.trim().trim_matches('"'))),
                    None => (directive, None),
                };
                if name.eq_ignore_ascii_case("no-cache") {
                    directives.no_cache = true;
                } else if name.eq_ignore_ascii_case("max-age") {
                    if let Some(secs) = arg.and_then(|a| a.parse::<u64>().ok()) {
                        directives.max_age = Some(Duration::from_secs(secs));
                    }
                }
            }
        }
        let pragma_no_cache = headers
            .get_all(http::header::PRAGMA)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|d| d.trim().eq_ignore_ascii_case("no-cache")));
        if pragma_no_cache && headers.get(http::header::CACHE_CONTROL).is_none() {
            directives.no_cache = true;
        }
        directives
    }
}

/// Whether an entry may be served without asking the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Serve it.
    Fresh,
    /// Revalidate it first (serve it if the upstream says `304`).
    Stale,
}

/// How long revalidated entries stay fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// This long (the side's configuration).
    For(Duration),
    /// For ever: offline mode froze freshness, and not even a client's
    /// `max-age=0` makes an entry old enough to revalidate.
    Frozen,
}

/// Decides the freshness of `entry` at `now`.
///
/// Immutable entries are always fresh: a client's `max-age=0` (which
/// `apt-get update` sends on every request, by-hash files included) cannot
/// make content that never changes any newer.
pub fn freshness(entry: &Entry, now: SystemTime, window: Window, client: ClientDirectives) -> Freshness {
    let window = match window {
        Window::Frozen => return Freshness::Fresh,
        Window::For(window) => window,
    };
    if entry.class == Class::Immutable {
        return Freshness::Fresh;
    }
    if client.no_cache {
        return Freshness::Stale;
    }
    let age = now.duration_since(entry.fetched_at_time()).unwrap_or(Duration::ZERO);
    let limit = client.max_age.map_or(window, |max_age| max_age.min(window));
    if limit.is_zero() || age > limit {
        Freshness::Stale
    } else {
        Freshness::Fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{unix_secs, Validators};
    use http::HeaderValue;

    fn entry(class: Class, fetched_at: SystemTime) -> Entry {
        Entry {
            sha256: String::new(),
            size: 0,
            headers: vec![],
            validators: Validators::default(),
            fetched_at: unix_secs(fetched_at),
            class,
            last_used_ns: 0,
        }
    }

    fn directives(cache_control: &str) -> ClientDirectives {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_str(cache_control).unwrap());
        ClientDirectives::from_headers(&headers)
    }

    const WINDOW: Window = Window::For(Duration::from_secs(300));

    #[test]
    fn immutable_entries_never_age_even_under_max_age_zero() {
        let now = SystemTime::now();
        let old = entry(Class::Immutable, now - Duration::from_secs(86400 * 365));
        assert_eq!(freshness(&old, now, WINDOW, directives("max-age=0")), Freshness::Fresh);
        assert_eq!(freshness(&old, now, WINDOW, directives("no-cache")), Freshness::Fresh);
    }

    #[test]
    fn revalidated_entries_are_fresh_inside_the_window_only() {
        let now = SystemTime::now();
        let young = entry(Class::Revalidated, now - Duration::from_secs(10));
        let old = entry(Class::Revalidated, now - Duration::from_secs(301));
        let none = ClientDirectives::default();
        assert_eq!(freshness(&young, now, WINDOW, none), Freshness::Fresh);
        assert_eq!(freshness(&old, now, WINDOW, none), Freshness::Stale);
    }

    #[test]
    fn apt_max_age_zero_and_no_cache_force_revalidation() {
        let now = SystemTime::now();
        let young = entry(Class::Revalidated, now);
        assert_eq!(freshness(&young, now, WINDOW, directives("max-age=0")), Freshness::Stale);
        assert_eq!(freshness(&young, now, WINDOW, directives("no-cache")), Freshness::Stale);
        let mut pragma = HeaderMap::new();
        pragma.insert(http::header::PRAGMA, HeaderValue::from_static("no-cache"));
        let pragma = ClientDirectives::from_headers(&pragma);
        assert_eq!(freshness(&young, now, WINDOW, pragma), Freshness::Stale);
    }

    #[test]
    fn client_max_age_shorter_than_window_applies() {
        let now = SystemTime::now();
        let e = entry(Class::Revalidated, now - Duration::from_secs(60));
        assert_eq!(freshness(&e, now, WINDOW, directives("max-age=30")), Freshness::Stale);
        assert_eq!(freshness(&e, now, WINDOW, directives("max-age=3600")), Freshness::Fresh);
    }

    #[test]
    fn zero_window_always_revalidates() {
        let now = SystemTime::now();
        let e = entry(Class::Revalidated, now);
        assert_eq!(freshness(&e, now, Window::For(Duration::ZERO), ClientDirectives::default()), Freshness::Stale);
    }

    #[test]
    fn frozen_freshness_ignores_age_and_max_age_zero() {
        let now = SystemTime::now();
        let old = entry(Class::Revalidated, now - Duration::from_secs(86400 * 30));
        assert_eq!(freshness(&old, now, Window::Frozen, directives("max-age=0")), Freshness::Fresh);
        assert_eq!(freshness(&old, now, Window::Frozen, directives("no-cache")), Freshness::Fresh);
    }

    #[test]
    fn malformed_directives_are_ignored() {
        assert_eq!(directives("max-age=banana, foo"), ClientDirectives::default());
    }
}
