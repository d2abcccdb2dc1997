//! The headers of every request pkgproxy sends an upstream, built here
//! alone so that what the README promises holds for each of them (a fetch,
//! a revalidation, a `HEAD` asking what a name points at, a generation's
//! file, a forwarded request, a token):
//!
//! - the headers the side chose;
//! - the client's user agent, or pkgproxy's when it sent none;
//! - `Accept-Encoding: identity`: what is cached, recorded or checked is
//!   the identity, the bytes checksums cover (a server that compresses
//!   text when nothing is asked, as many CDNs do, would otherwise have its
//!   answer refused as encoded);
//! - the loop mark, so a request that comes back to this process is
//!   refused;
//! - when revalidating, the held entry's validators.
//!
//! Authorisation is not here: it is added as the request is sent
//! (`fetching::authorised`), once the instance that challenged is known.

use http::header::{HeaderValue, ACCEPT_ENCODING, IF_MODIFIED_SINCE, IF_NONE_MATCH, USER_AGENT};
use http::HeaderMap;
use pkgproxy_cache::Validators;

use crate::headers::LoopMark;

/// The user agent of a request no client's is passed on with.
pub const PKGPROXY_AGENT: HeaderValue = HeaderValue::from_static(concat!("pkgproxy/", env!("CARGO_PKG_VERSION")));

/// The headers of an upstream request: `chosen` (the side's), with the
/// client's user agent `agent`, the identity encoding, `mark`, and the
/// validators of the entry being revalidated, if any.
pub fn headers(
    chosen: HeaderMap,
    agent: Option<HeaderValue>,
    mark: &LoopMark,
    revalidating: Option<&Validators>,
) -> HeaderMap {
    let mut headers = chosen;
    headers.insert(USER_AGENT, agent.unwrap_or(PKGPROXY_AGENT));
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    mark.add_to(&mut headers);
    if let Some(validators) = revalidating {
        let value = |v: &Option<String>| v.as_deref().and_then(|v| HeaderValue::from_str(v).ok());
        if let Some(etag) = value(&validators.etag) {
            headers.insert(IF_NONE_MATCH, etag);
        }
        if let Some(date) = value(&validators.last_modified) {
            headers.insert(IF_MODIFIED_SINCE, date);
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_upstream_request_asks_for_the_identity_and_carries_the_agent_mark_and_validators() {
        let mark = LoopMark::new();
        let mut chosen = HeaderMap::new();
        chosen.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip, br"));
        chosen.insert("snap-device-series", HeaderValue::from_static("16"));
        let validators = Validators { etag: Some("\"v1\"".into()), last_modified: Some("bad\nvalue".into()) };
        let sent = headers(chosen, Some(HeaderValue::from_static("apt/2.6")), &mark, Some(&validators));
        assert_eq!(sent[ACCEPT_ENCODING], "identity", "never the client's encodings");
        assert_eq!(sent[USER_AGENT], "apt/2.6");
        assert_eq!(sent["snap-device-series"], "16");
        assert_eq!(sent[IF_NONE_MATCH], "\"v1\"");
        assert!(!sent.contains_key(IF_MODIFIED_SINCE), "a validator that is not a header value is left out");
        assert!(mark.seen_in(&sent));

        let plain = headers(HeaderMap::new(), None, &mark, None);
        assert_eq!(plain[USER_AGENT], PKGPROXY_AGENT);
        assert_eq!(plain[ACCEPT_ENCODING], "identity");
        assert!(!plain.contains_key(IF_NONE_MATCH));
    }
}
