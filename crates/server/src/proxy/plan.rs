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

/// The most ranges one request may ask for: more are answered with the
/// whole body, which RFC 9110 §14.2 allows, so that no client makes
/// pkgproxy do unbounded work for one request (dnf asks for a few hundred
/// zchunk chunks at once).
pub const MAX_RANGES: usize = 1000;

/// The bytes `start..=end` of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// Last byte (inclusive).
    pub end: u64,
}

impl ByteRange {
    /// How many bytes it holds.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }
}

/// The answer to give.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `206` with a `multipart/byteranges` body of these ranges, in the
    /// order they are sent: two or more, none overlapping another.
    Parts(Vec<ByteRange>),
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
        RangeSpec::Several(ranges) => Plan::Parts(ranges),
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
    /// Not a range request we serve: answer with the whole body.
    Ignored,
    Unsatisfiable,
    Bytes {
        start: u64,
        end: u64,
    },
    /// Two or more ranges, as [`Plan::Parts`] sends them.
    Several(Vec<ByteRange>),
}

/// Parses a `Range` header for a body of `length` bytes. A list of ranges
/// is parsed only when the value has a comma, so that a single range costs
/// what it always has (the hit path is measured).
fn parse_range(value: &str, length: u64) -> RangeSpec {
    let Some(spec) = value.trim().strip_prefix("bytes=") else { return RangeSpec::Ignored };
    if spec.contains(',') {
        return parse_ranges(spec, length);
    }
    parse_one(spec, length)
}

/// One `first-last`, `first-` or `-suffix` of a body of `length` bytes.
fn parse_one(spec: &str, length: u64) -> RangeSpec {
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

/// A list of ranges (RFC 9110 §14.1.2): empty elements are skipped, one
/// malformed range makes the whole header ignored, unsatisfiable ones are
/// dropped and overlapping ones coalesced ([`coalesced`]). A list longer
/// than [`MAX_RANGES`], or whose ranges add up to more than twice the body,
/// is answered with the whole body: the work of an answer stays bounded
/// by the body's length, whatever the client asks.
fn parse_ranges(spec: &str, length: u64) -> RangeSpec {
    let (mut ranges, mut listed) = (Vec::new(), 0usize);
    for (n, element) in spec.split(',').enumerate() {
        if n == MAX_RANGES {
            return RangeSpec::Ignored;
        }
        let element = element.trim();
        if element.is_empty() {
            continue;
        }
        listed += 1;
        match parse_one(element, length) {
            RangeSpec::Bytes { start, end } => ranges.push(ByteRange { start, end }),
            RangeSpec::Unsatisfiable => {}
            _ => return RangeSpec::Ignored,
        }
    }
    let asked = ranges.iter().fold(0u64, |sum, range| sum.saturating_add(range.len()));
    if asked > length.saturating_mul(2) {
        return RangeSpec::Ignored;
    }
    let parts = coalesced(ranges);
    match parts[..] {
        [] if listed == 0 => RangeSpec::Ignored,
        [] => RangeSpec::Unsatisfiable,
        [one] => RangeSpec::Bytes { start: one.start, end: one.end },
        _ => RangeSpec::Several(parts),
    }
}

/// `ranges` with every group of overlapping ones made one, which takes the
/// place of its first in the client's order (RFC 9110 §14.6: parts are
/// sent in the order asked, less those coalesced into others). Ranges
/// that only touch stay apart: each is a part the client asked for.
fn coalesced(mut ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    if ranges.len() < 2 {
        return ranges;
    }
    // Each range with its place in the client's order, by start: a group
    // of overlapping ranges is then a run of neighbours.
    let mut by_start: Vec<(ByteRange, usize)> = ranges.drain(..).zip(0..).collect();
    by_start.sort_unstable_by_key(|&(range, place)| (range.start, place));
    let mut groups: Vec<(ByteRange, usize)> = Vec::with_capacity(by_start.len());
    for (range, place) in by_start {
        match groups.last_mut() {
            Some((group, first)) if range.start <= group.end => {
                group.end = group.end.max(range.end);
                *first = (*first).min(place);
            }
            _ => groups.push((range, place)),
        }
    }
    groups.sort_unstable_by_key(|&(_, first)| first);
    ranges.extend(groups.into_iter().map(|(range, _)| range));
    ranges
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
        assert_eq!(p("bytes=0-1,5-6"), Plan::Parts(vec![r(0, 1), r(5, 6)]));
        assert_eq!(p("bytes=5-1"), Plan::Full);
        assert_eq!(p("items=0-1"), Plan::Full);
        assert_eq!(plan(&Method::HEAD, &with(&[("range", "bytes=0-1")]), &rep()), Plan::Full);
    }

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    fn get_ranges(range: &str) -> Plan {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::RANGE, HeaderValue::from_str(range).unwrap());
        plan(&Method::GET, &headers, &rep())
    }

    #[test]
    fn a_list_of_ranges_is_parsed_in_every_form_with_whitespace_around_commas() {
        let parts = Plan::Parts(vec![r(0, 9), r(20, 29), r(900, 999)]);
        assert_eq!(get_ranges("bytes=0-9,20-29,900-,-50"), parts, "the last two overlap");
        assert_eq!(get_ranges("bytes=0-9,20-29,-50"), Plan::Parts(vec![r(0, 9), r(20, 29), r(950, 999)]));
        assert_eq!(get_ranges("bytes=0-9 , 20-29,\t100-199"), Plan::Parts(vec![r(0, 9), r(20, 29), r(100, 199)]));
        assert_eq!(get_ranges("bytes=0-9,,20-29,"), Plan::Parts(vec![r(0, 9), r(20, 29)]), "empty elements");
        assert_eq!(get_ranges("bytes=990-5000,0-0"), Plan::Parts(vec![r(990, 999), r(0, 0)]), "the client's order");
        assert_eq!(get_ranges("bytes=-5000,0-0"), Plan::Partial { start: 0, end: 999 }, "one left once coalesced");
    }

    #[test]
    fn a_malformed_list_gives_the_whole_body() {
        for range in
            ["bytes=0-9,x", "bytes=0-9,5-1", "bytes=0-9,-", "bytes=0-9,1", "bytes=,", "bytes=0-9,-x", "items=0-1,2-3"]
        {
            assert_eq!(get_ranges(range), Plan::Full, "{range}");
        }
    }

    #[test]
    fn unsatisfiable_ranges_of_a_list_are_dropped_and_one_left_is_a_single_range() {
        assert_eq!(get_ranges("bytes=0-9,1000-,2000-2999"), Plan::Partial { start: 0, end: 9 });
        assert_eq!(get_ranges("bytes=1000-,-0,5-"), Plan::Partial { start: 5, end: 999 });
        assert_eq!(get_ranges("bytes=1000-,-0,2000-2999"), Plan::Unsatisfiable);
        assert_eq!(get_ranges("bytes=1000-,0-1,5000-,998-"), Plan::Parts(vec![r(0, 1), r(998, 999)]));
        let empty = Representation { length: Some(0), ..rep() };
        let headers = with(&[("range", "bytes=0-1,-5")]);
        assert_eq!(plan(&Method::GET, &headers, &empty), Plan::Unsatisfiable);
    }

    #[test]
    fn overlapping_ranges_are_coalesced_in_place_of_the_first_and_touching_ones_kept() {
        assert_eq!(get_ranges("bytes=0-9,5-19"), Plan::Partial { start: 0, end: 19 });
        assert_eq!(get_ranges("bytes=0-9,10-19"), Plan::Parts(vec![r(0, 9), r(10, 19)]), "touching");
        assert_eq!(
            get_ranges("bytes=500-599,0-9,100-199,550-650,5-7"),
            Plan::Parts(vec![r(500, 650), r(0, 9), r(100, 199)]),
        );
        assert_eq!(
            get_ranges("bytes=300-399,0-9,390-420,200-310"),
            Plan::Parts(vec![r(200, 420), r(0, 9)]),
            "a group joined through a later range takes the place of its first",
        );
        assert_eq!(get_ranges("bytes=0-,0-"), Plan::Partial { start: 0, end: 999 });
    }

    #[test]
    fn too_many_ranges_or_too_many_bytes_give_the_whole_body() {
        let many = |n: usize| format!("bytes={}", (0..n).map(|i| format!("{i}-{i}")).collect::<Vec<_>>().join(","));
        assert!(matches!(get_ranges(&many(MAX_RANGES)), Plan::Parts(parts) if parts.len() == MAX_RANGES));
        assert_eq!(get_ranges(&many(MAX_RANGES + 1)), Plan::Full);
        assert_eq!(get_ranges("bytes=0-,0-"), Plan::Partial { start: 0, end: 999 }, "twice the body is allowed");
        assert_eq!(get_ranges("bytes=0-,0-,0-0"), Plan::Full, "more than twice is not");
        assert_eq!(get_ranges("bytes=0-99,-999999999999,200-299"), Plan::Partial { start: 0, end: 999 });
    }

    #[test]
    fn a_list_of_ranges_follows_if_range_and_is_not_applied_to_head() {
        let get = Method::GET;
        let ok = with(&[("range", "bytes=0-1,5-6"), ("if-range", "\"abc\"")]);
        assert_eq!(plan(&get, &ok, &rep()), Plan::Parts(vec![r(0, 1), r(5, 6)]));
        let stale = with(&[("range", "bytes=0-1,5-6"), ("if-range", "\"old\"")]);
        assert_eq!(plan(&get, &stale, &rep()), Plan::Full);
        assert_eq!(plan(&Method::HEAD, &with(&[("range", "bytes=0-1,5-6")]), &rep()), Plan::Full);
        let unknown = Representation { length: None, ..rep() };
        assert_eq!(plan(&get, &with(&[("range", "bytes=0-1,5-6")]), &unknown), Plan::Full);
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
