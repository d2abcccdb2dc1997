//! Which answer a request gets from a representation we hold: `304`, `200`,
//! `206` or `416`, by RFC 9110 §13 (conditional requests) and §14 (ranges).
//! Pure: the same rules serve cached entries and downloads in progress.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method};

/// What we know of the representation being served.
#[derive(Debug, Clone, Copy, Default)]
pub struct Representation<'a> {
    /// Its entity tag, verbatim.
    pub etag: Option<&'a str>,
    /// Its `Last-Modified`, verbatim.
    pub last_modified: Option<&'a str>,
    /// Whether `If-Range` may match `last_modified`: only when the date is a
    /// strong validator and a client's partial file of this name cannot
    /// hold other bytes with the same date (see [`last_modified_is_strong`]).
    pub date_validates_ranges: bool,
    /// Its length, when known (a download without `Content-Length` has none).
    pub length: Option<u64>,
}

/// The answer to give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// `304 Not Modified`.
    NotModified,
    /// `200` with the whole body.
    Full,
    /// `206` with bytes `start..=end`.
    Partial {
        /// First byte.
        start: u64,
        /// Last byte (inclusive).
        end: u64,
    },
    /// `416 Range Not Satisfiable`.
    Unsatisfiable,
}

/// Decides the answer to `method` with `headers` for `rep`.
pub fn plan(method: &Method, headers: &HeaderMap, rep: &Representation<'_>) -> Plan {
    if !matches!(*method, Method::GET | Method::HEAD) {
        return Plan::Full;
    }
    if not_modified(headers, rep) {
        return Plan::NotModified;
    }
    if *method != Method::GET || !if_range_holds(headers, rep) {
        return Plan::Full;
    }
    let (Some(range), Some(length)) = (header(headers, http::header::RANGE), rep.length) else {
        return Plan::Full;
    };
    match parse_range(range, length) {
        RangeSpec::Ignored => Plan::Full,
        RangeSpec::Unsatisfiable => Plan::Unsatisfiable,
        RangeSpec::Bytes { start, end } => Plan::Partial { start, end },
    }
}

fn header(headers: &HeaderMap, name: http::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `If-None-Match` (weak comparison), else `If-Modified-Since`.
fn not_modified(headers: &HeaderMap, rep: &Representation<'_>) -> bool {
    if let Some(inm) = header(headers, http::header::IF_NONE_MATCH) {
        // `*`: any current representation, tagged or not (RFC 9110 §13.1.2).
        if inm.trim() == "*" {
            return true;
        }
        let Some(etag) = rep.etag else { return false };
        return inm.split(',').any(|tag| weak_eq(tag.trim(), etag));
    }
    let (Some(ims), Some(lm)) = (header(headers, http::header::IF_MODIFIED_SINCE), rep.last_modified) else {
        return false;
    };
    match (httpdate::parse_http_date(ims), httpdate::parse_http_date(lm)) {
        (Ok(since), Ok(modified)) => modified <= since,
        _ => false,
    }
}

fn weak_eq(a: &str, b: &str) -> bool {
    a.trim_start_matches("W/") == b.trim_start_matches("W/")
}

/// `If-Range`: the range applies only if the validator still matches
/// (strong comparison for tags; an exact match for dates, where a date may
/// validate at all), else the whole body is sent (RFC 9110 §13.1.5).
fn if_range_holds(headers: &HeaderMap, rep: &Representation<'_>) -> bool {
    let Some(if_range) = header(headers, http::header::IF_RANGE) else { return true };
    let if_range = if_range.trim();
    if if_range.starts_with('"') || if_range.starts_with("W/") {
        return !if_range.starts_with("W/") && rep.etag == Some(if_range);
    }
    if !rep.date_validates_ranges {
        return false;
    }
    match (httpdate::parse_http_date(if_range), rep.last_modified.map(httpdate::parse_http_date)) {
        (Ok(date), Some(Ok(modified))) => date == modified,
        _ => false,
    }
}

/// Whether `last_modified` is a strong validator of a representation
/// received at `received` (RFC 9110 §8.8.2.2): only when it was received at
/// least a second after that date. Dates have one-second resolution, so two
/// versions written within one second carry the same one.
pub fn last_modified_is_strong(last_modified: &str, received: SystemTime) -> bool {
    httpdate::parse_http_date(last_modified).is_ok_and(|modified| received >= modified + Duration::from_secs(1))
}

#[derive(Debug, PartialEq, Eq)]
enum RangeSpec {
    /// Not a single byte range we serve: answer with the whole body.
    Ignored,
    Unsatisfiable,
    Bytes {
        start: u64,
        end: u64,
    },
}

/// Parses a `Range` header for a body of `length` bytes. Several ranges are
/// answered with the whole body, which RFC 9110 allows.
fn parse_range(value: &str, length: u64) -> RangeSpec {
    let Some(spec) = value.trim().strip_prefix("bytes=") else { return RangeSpec::Ignored };
    if spec.contains(',') {
        return RangeSpec::Ignored;
    }
    let Some((first, last)) = spec.trim().split_once('-') else { return RangeSpec::Ignored };
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        let Ok(suffix) = last.parse::<u64>() else { return RangeSpec::Ignored };
        if suffix == 0 || length == 0 {
            return RangeSpec::Unsatisfiable;
        }
        return RangeSpec::Bytes { start: length.saturating_sub(suffix), end: length - 1 };
    }
    let Ok(start) = first.parse::<u64>() else { return RangeSpec::Ignored };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match last.parse::<u64>() {
            Ok(end) if end >= start => end,
            _ => return RangeSpec::Ignored,
        }
    };
    if start >= length {
        return RangeSpec::Unsatisfiable;
    }
    RangeSpec::Bytes { start, end: end.min(length - 1) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    const LM: &str = "Wed, 01 Jan 2025 00:00:00 GMT";

    fn rep() -> Representation<'static> {
        Representation {
            etag: Some("\"abc\""),
            last_modified: Some(LM),
            date_validates_ranges: true,
            length: Some(1000),
        }
    }

    fn with(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn ranges() {
        let get = Method::GET;
        let p = |range| plan(&get, &with(&[("range", range)]), &rep());
        assert_eq!(p("bytes=0-99"), Plan::Partial { start: 0, end: 99 });
        assert_eq!(p("bytes=900-"), Plan::Partial { start: 900, end: 999 });
        assert_eq!(p("bytes=-100"), Plan::Partial { start: 900, end: 999 });
        assert_eq!(p("bytes=-5000"), Plan::Partial { start: 0, end: 999 });
        assert_eq!(p("bytes=990-5000"), Plan::Partial { start: 990, end: 999 });
        assert_eq!(p("bytes=1000-"), Plan::Unsatisfiable);
        assert_eq!(p("bytes=-0"), Plan::Unsatisfiable);
        assert_eq!(p("bytes=0-1,5-6"), Plan::Full);
        assert_eq!(p("bytes=5-1"), Plan::Full);
        assert_eq!(p("items=0-1"), Plan::Full);
        assert_eq!(plan(&Method::HEAD, &with(&[("range", "bytes=0-1")]), &rep()), Plan::Full);
    }

    #[test]
    fn a_range_of_unknown_length_is_answered_whole() {
        let rep = Representation { length: None, ..rep() };
        assert_eq!(plan(&Method::GET, &with(&[("range", "bytes=0-1")]), &rep), Plan::Full);
    }

    #[test]
    fn if_range_with_a_changed_validator_gives_the_whole_body() {
        let get = Method::GET;
        let ok = with(&[("range", "bytes=10-"), ("if-range", "\"abc\"")]);
        assert_eq!(plan(&get, &ok, &rep()), Plan::Partial { start: 10, end: 999 });
        let stale = with(&[("range", "bytes=10-"), ("if-range", "\"old\"")]);
        assert_eq!(plan(&get, &stale, &rep()), Plan::Full);
        let date = with(&[("range", "bytes=10-"), ("if-range", LM)]);
        assert_eq!(plan(&get, &date, &rep()), Plan::Partial { start: 10, end: 999 });
        let other_date = with(&[("range", "bytes=10-"), ("if-range", "Thu, 02 Jan 2025 00:00:00 GMT")]);
        assert_eq!(plan(&get, &other_date, &rep()), Plan::Full);
    }

    #[test]
    fn an_if_range_date_that_cannot_validate_gives_the_whole_body_and_a_tag_still_resumes() {
        let get = Method::GET;
        let weak = Representation { date_validates_ranges: false, ..rep() };
        let date = with(&[("range", "bytes=10-"), ("if-range", LM)]);
        assert_eq!(plan(&get, &date, &weak), Plan::Full);
        let tag = with(&[("range", "bytes=10-"), ("if-range", "\"abc\"")]);
        assert_eq!(plan(&get, &tag, &weak), Plan::Partial { start: 10, end: 999 });
        assert_eq!(plan(&get, &with(&[("range", "bytes=10-")]), &weak), Plan::Partial { start: 10, end: 999 });
    }

    #[test]
    fn a_last_modified_is_strong_only_a_second_before_its_receipt() {
        let modified = httpdate::parse_http_date(LM).unwrap();
        assert!(!last_modified_is_strong(LM, modified));
        assert!(!last_modified_is_strong(LM, modified + Duration::from_millis(999)));
        assert!(last_modified_is_strong(LM, modified + Duration::from_secs(1)));
        assert!(last_modified_is_strong(LM, modified + Duration::from_secs(86_400)));
        assert!(!last_modified_is_strong(LM, modified - Duration::from_secs(5)), "a date in the future");
        assert!(!last_modified_is_strong("yesterday", modified + Duration::from_secs(5)));
    }

    #[test]
    fn conditionals() {
        let get = Method::GET;
        assert_eq!(plan(&get, &with(&[("if-none-match", "\"abc\"")]), &rep()), Plan::NotModified);
        assert_eq!(plan(&get, &with(&[("if-none-match", "\"x\", W/\"abc\"")]), &rep()), Plan::NotModified);
        assert_eq!(plan(&get, &with(&[("if-none-match", "\"x\"")]), &rep()), Plan::Full);
        assert_eq!(plan(&get, &with(&[("if-modified-since", LM)]), &rep()), Plan::NotModified);
        let later = "Thu, 02 Jan 2025 00:00:00 GMT";
        assert_eq!(plan(&get, &with(&[("if-modified-since", later)]), &rep()), Plan::NotModified);
        let earlier = "Tue, 31 Dec 2024 00:00:00 GMT";
        assert_eq!(plan(&get, &with(&[("if-modified-since", earlier)]), &rep()), Plan::Full);
        // If-None-Match wins over If-Modified-Since.
        let both = with(&[("if-none-match", "\"x\""), ("if-modified-since", later)]);
        assert_eq!(plan(&get, &both, &rep()), Plan::Full);
        assert_eq!(plan(&get, &with(&[("if-modified-since", "garbage")]), &rep()), Plan::Full);
        // `*` matches whatever is held, with an entity tag or without.
        let star = with(&[("if-none-match", "*"), ("range", "bytes=0-1")]);
        assert_eq!(plan(&get, &star, &rep()), Plan::NotModified);
        let untagged = Representation { etag: None, ..rep() };
        assert_eq!(plan(&get, &with(&[("if-none-match", " * ")]), &untagged), Plan::NotModified);
        assert_eq!(plan(&get, &with(&[("if-none-match", "\"abc\"")]), &untagged), Plan::Full);
    }
}
