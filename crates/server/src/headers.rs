//! Header rules of an HTTP/1.1 proxy (RFC 9110 §7.6): hop-by-hop fields are
//! not forwarded, and `Via` names pkgproxy on what it relays.

use http::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION};

/// The `Via` value pkgproxy adds.
pub const VIA: HeaderValue = HeaderValue::from_static("1.1 pkgproxy");

/// Why an answer is not a plain hit (see `proxy::reason`); the access log
/// copies it.
pub const REASON: HeaderName = HeaderName::from_static("x-pkgproxy-reason");

const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// Removes hop-by-hop fields, including those a `Connection` header names,
/// and `Transfer-Encoding` (framing is ours to choose).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(http::header::TRANSFER_ENCODING);
}

/// Appends pkgproxy to `Via`.
pub fn add_via(headers: &mut HeaderMap) {
    headers.append(http::header::VIA, VIA);
}

/// What an answer of a side mounted on pkgproxy's own origin may do in a
/// browser: nothing. Its content is an upstream's (an index's HTML page,
/// a registry's API answer, a passed-on error page), served beside
/// pkgproxy's status page; package clients ignore both headers.
const CONFINED: HeaderValue = HeaderValue::from_static("default-src 'none'; sandbox");
const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");

/// Marks `headers`, an answer of upstream content on pkgproxy's own
/// origin, as content no browser runs or sniffs.
pub fn confine(headers: &mut HeaderMap) {
    headers.insert(http::header::CONTENT_SECURITY_POLICY, CONFINED);
    headers.insert(http::header::X_CONTENT_TYPE_OPTIONS, NOSNIFF);
}

/// This process's own name in the `Via` of its upstream requests: a request
/// arriving with it has gone round in a loop (a mirror configured to be
/// pkgproxy itself), while another pkgproxy in a chain has a name of its own.
#[derive(Debug, Clone)]
pub struct LoopMark {
    via: HeaderValue,
    token: String,
}

impl LoopMark {
    /// A mark unique to this process (random per start).
    pub fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let token = format!("pkgproxy-{:016x}", hasher.finish());
        let via = HeaderValue::from_str(&format!("1.1 {token}")).expect("hex is a valid header value");
        LoopMark { via, token }
    }

    /// Appends the mark to the `Via` of an upstream request.
    pub fn add_to(&self, headers: &mut HeaderMap) {
        headers.append(http::header::VIA, self.via.clone());
    }

    /// True when `headers` show the request already passed through here.
    pub fn seen_in(&self, headers: &HeaderMap) -> bool {
        headers.get_all(http::header::VIA).iter().any(|v| v.to_str().is_ok_and(|v| v.contains(&self.token)))
    }
}

impl Default for LoopMark {
    fn default() -> Self {
        LoopMark::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_marked_by_this_process_is_a_loop_and_another_pkgproxy_s_is_not() {
        let (here, there) = (LoopMark::new(), LoopMark::new());
        let mut headers = HeaderMap::new();
        there.add_to(&mut headers);
        assert!(!here.seen_in(&headers));
        here.add_to(&mut headers);
        assert!(here.seen_in(&headers));
    }

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_are_removed() {
        let mut headers = HeaderMap::new();
        headers.insert("connection", HeaderValue::from_static("close, x-private"));
        headers.insert("x-private", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        headers.insert("content-type", HeaderValue::from_static("text/plain"));
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key("content-type"));
    }
}
