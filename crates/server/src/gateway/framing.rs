//! What a request's framing must be before anything reads it. hyper
//! refuses what it cannot parse (a head over the size limit: `431`; a
//! malformed `Transfer-Encoding`: `400`), but it takes a request carrying
//! both `Content-Length` and `Transfer-Encoding` by dropping the length,
//! and no trace of it is left to see: on a connection shared through
//! another proxy that reads the length, the rest of the body would be
//! read as a second request (request smuggling). pkgproxy's clients send
//! bodies only with a `Content-Length` (snapd's `POST`s), so any
//! `Transfer-Encoding` is refused, and the connection closed.
//!
//! The `Host` header is checked as RFC 9112 §3.2 asks: more than one, or
//! none on an HTTP/1.1 request, is a `400` (two proxies could each read
//! another one).

use http::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST, TRANSFER_ENCODING};
use http::{Request, Response, StatusCode};

use crate::body::ResponseBody;

/// The longest request target taken, as nginx's default buffers take.
pub const MAX_URI_LENGTH: usize = 8 * 1024;

/// The most a request's head may hold (request line and headers).
pub const MAX_HEAD_SIZE: usize = 64 * 1024;

/// The answer to a request whose framing is refused, or `None`.
pub fn refused<B>(request: &Request<B>) -> Option<Response<ResponseBody>> {
    let target_length = request.uri().to_string().len();
    if target_length > MAX_URI_LENGTH {
        let reason =
            format!("pkgproxy: the request target is {target_length} bytes; at most {MAX_URI_LENGTH} are taken");
        return Some(closing(StatusCode::URI_TOO_LONG, reason));
    }
    match (request.headers().get_all(HOST).iter().count(), request.version() == http::Version::HTTP_11) {
        (0, true) => {
            return Some(closing(StatusCode::BAD_REQUEST, "pkgproxy: an HTTP/1.1 request needs a Host header".into()))
        }
        (2.., _) => return Some(closing(StatusCode::BAD_REQUEST, "pkgproxy: a request has one Host header".into())),
        _ => {}
    }
    if request.headers().contains_key(TRANSFER_ENCODING) {
        let reason = "pkgproxy: a request body needs a Content-Length; Transfer-Encoding is refused".to_string();
        return Some(closing(StatusCode::BAD_REQUEST, reason));
    }
    None
}

/// Whether `request`'s client wants the connection closed after its
/// answer: `Connection: close`, or HTTP/1.0 without `keep-alive`.
pub fn wants_close<B>(request: &Request<B>) -> bool {
    let says = |word: &str| {
        request
            .headers()
            .get_all(CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|value| value.split(',').any(|token| token.trim().eq_ignore_ascii_case(word)))
    };
    says("close") || (request.version() < http::Version::HTTP_11 && !says("keep-alive"))
}

/// Whether `response` closes its connection (`Connection: close`).
pub fn closes<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|value| value.split(',').any(|token| token.trim().eq_ignore_ascii_case("close")))
}

/// An answer that closes the connection after it.
fn closing(status: StatusCode, reason: String) -> Response<ResponseBody> {
    let body = format!("{reason}\n");
    let mut response = Response::new(ResponseBody::full(body.clone()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_target_and_any_transfer_encoding_are_refused_with_a_close() {
        let long = format!("/go/{}", "a".repeat(MAX_URI_LENGTH));
        let answer = refused(&Request::get(long).header(HOST, "p").body(()).unwrap()).unwrap();
        assert_eq!(answer.status(), StatusCode::URI_TOO_LONG);
        assert_eq!(answer.headers()[CONNECTION], "close");
        let chunked = Request::post("/snap/v2/snaps/refresh")
            .header(HOST, "p")
            .header(TRANSFER_ENCODING, "chunked")
            .body(())
            .unwrap();
        assert_eq!(refused(&chunked).unwrap().status(), StatusCode::BAD_REQUEST);
        let fine =
            Request::post("/snap/v2/snaps/refresh").header(HOST, "p").header(CONTENT_LENGTH, "2").body(()).unwrap();
        assert!(refused(&fine).is_none());
    }

    #[test]
    fn two_host_headers_or_none_on_http_1_1_are_refused() {
        let two = Request::get("/v2/").header(HOST, "a").header(HOST, "b").body(()).unwrap();
        assert_eq!(refused(&two).unwrap().status(), StatusCode::BAD_REQUEST);
        let none = Request::get("/v2/").body(()).unwrap();
        assert_eq!(refused(&none).unwrap().status(), StatusCode::BAD_REQUEST);
        let old = Request::get("/v2/").version(http::Version::HTTP_10).body(()).unwrap();
        assert!(refused(&old).is_none(), "HTTP/1.0 has no Host to give");
        assert!(refused(&Request::get("/v2/").header(HOST, "p").body(()).unwrap()).is_none());
    }
}
