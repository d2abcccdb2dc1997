//! Header rules of an HTTP/1.1 proxy (RFC 9110 §7.6): hop-by-hop fields are
//! not forwarded, and `Via` names pkgproxy on what it relays.

use http::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION};

/// The `Via` value pkgproxy adds.
pub const VIA: HeaderValue = HeaderValue::from_static("1.1 pkgproxy");

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

#[cfg(test)]
mod tests {
    use super::*;

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
