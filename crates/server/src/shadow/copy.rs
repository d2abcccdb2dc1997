//! The copy of a request, as the mirror's target gets it: the request's
//! headers less the hop-by-hop ones, the client's `X-Forwarded-*`, and the
//! marker that keeps a copy from being mirrored again.

use std::net::IpAddr;

use http::header::{HeaderMap, HeaderName, HeaderValue, HOST};

use crate::headers::strip_hop_by_hop;

/// Marks a copy; a request carrying it is never mirrored.
pub const MARKER: HeaderName = HeaderName::from_static("x-pkgproxy-mirror");

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// True for a request that is itself a copy.
pub fn is_copy(headers: &HeaderMap) -> bool {
    headers.contains_key(MARKER)
}

/// The headers of the copy of a request with `headers` from `client`.
/// `Authorization` and cookies are copied like the rest: the mirror is to
/// be trusted as the upstream is. `Content-Length` is the body's business.
pub fn copy_headers(headers: &HeaderMap, client: Option<IpAddr>, host: Option<&HeaderValue>) -> HeaderMap {
    let mut copy = headers.clone();
    strip_hop_by_hop(&mut copy);
    copy.remove(http::header::CONTENT_LENGTH);
    // A cluster peer's credential is for this node, not a shadow target.
    copy.remove(pkgproxy_cluster::peer::TOKEN_HEADER);
    copy.remove(pkgproxy_cluster::peer::TIME_HEADER);
    if let Some(client) = client {
        let ip = client.to_string();
        let forwarded = match headers.get(X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
            Some(earlier) => format!("{earlier}, {ip}"),
            None => ip.clone(),
        };
        if let Ok(value) = HeaderValue::from_str(&forwarded) {
            copy.insert(X_FORWARDED_FOR, value);
        }
        if let Ok(value) = HeaderValue::from_str(&ip) {
            copy.insert(X_REAL_IP, value);
        }
    }
    copy.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    if let Some(host) = host {
        copy.insert(HOST, host.clone());
    }
    copy.insert(MARKER, HeaderValue::from_static("1"));
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_keeps_end_to_end_headers_and_says_who_asked() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "deb.debian.org"),
            ("user-agent", "Debian APT-HTTP/1.3"),
            ("authorization", "Bearer t"),
            ("cookie", "a=b"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("proxy-authorization", "Basic x"),
            ("keep-alive", "timeout=5"),
            ("x-forwarded-for", "10.0.0.1"),
            ("content-length", "3"),
        ] {
            headers.append(HeaderName::from_static(name), HeaderValue::from_static(value));
        }
        let copy = copy_headers(&headers, Some("192.0.2.7".parse().unwrap()), None);
        for kept in ["host", "user-agent", "authorization", "cookie"] {
            assert_eq!(copy.get(kept), headers.get(kept), "{kept}");
        }
        for dropped in ["connection", "x-private", "proxy-authorization", "keep-alive", "content-length"] {
            assert!(!copy.contains_key(dropped), "{dropped}");
        }
        assert_eq!(copy["x-forwarded-for"], "10.0.0.1, 192.0.2.7");
        assert_eq!(copy["x-real-ip"], "192.0.2.7");
        assert_eq!(copy["x-forwarded-proto"], "http");
        assert_eq!(copy["x-pkgproxy-mirror"], "1");
        assert!(is_copy(&copy));
        let hosted = copy_headers(&headers, None, Some(&HeaderValue::from_static("shadow.lan")));
        assert_eq!(hosted["host"], "shadow.lan");
    }
}
