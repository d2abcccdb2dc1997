//! What the pages pkgproxy draws for people (the status page, the cache's
//! page) share: text made safe for HTML, figures written as people write
//! them, and how a page is sent. No state, no I/O.

use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};

use crate::body::ResponseBody;

/// One of pkgproxy's own pages or its JSON, `body` of `content_type`, as
/// every page is sent: kept by no cache between, its type not guessed,
/// and allowed to load and run only what `policy` names.
pub fn page(content_type: &'static str, policy: &'static str, body: bytes::Bytes) -> Response<ResponseBody> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("content-security-policy", HeaderValue::from_static(policy));
    local(StatusCode::OK, headers, body)
}

/// An answer of pkgproxy's own, `status` with `headers` and `body`, its
/// length said.
pub fn local(status: StatusCode, mut headers: HeaderMap, body: bytes::Bytes) -> Response<ResponseBody> {
    headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// `text` safe inside an element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// Bytes in binary units, one decimal (`page.js`'s `bytes` too).
pub fn bytes(count: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = count as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{count} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

/// A share as a percentage, one decimal; a dash before there is one.
pub fn ratio(share: Option<f64>) -> String {
    share.map_or_else(|| "–".to_string(), |share| format!("{:.1} %", share * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(5 * 1024 * 1024 * 1024), "5.0 GiB");
        assert_eq!(ratio(None), "–");
        assert_eq!(ratio(Some(0.5)), "50.0 %");
    }

    #[test]
    fn markup_in_text_is_shown_not_run() {
        assert_eq!(escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
    }
}
