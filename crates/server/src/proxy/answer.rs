//! Building answers: from a cached entry, from a download in progress, from
//! an upstream answer passed on, and plain-text errors. Every answer built
//! here carries `Via`, and each is an [`Answer`]: the response, with how
//! it was served (and the stored body it reads) noted beside it.

use std::sync::Arc;
use std::time::SystemTime;

use http::header::{HeaderValue, ACCEPT_RANGES, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, LAST_MODIFIED};
use http::{HeaderMap, Method, Response, StatusCode};
use pkgproxy_cache::{Entry, Fetch, Head, PassedAnswer};
use pkgproxy_sides::{DatedResume, Etag, LocalAnswer, Piece, Reply, StoredBody};

use super::multipart::Multipart;
use super::outcome::{Answer, Served};
use super::plan::{last_modified_is_strong, plan, ByteRange, Plan, Representation};
use crate::body::{ChainedBody, FileBody, PiecedBody, ResponseBody};
use crate::context::Exchange;
use crate::headers::{add_via, strip_hop_by_hop, VIA};

/// A plain-text answer of pkgproxy's own (a loop, a request for no side).
pub fn text(status: StatusCode, message: &str) -> Response<ResponseBody> {
    super::outcome::local(LocalAnswer::text(status, message))
}

/// Answers from a cached entry. Returns the answer and the body bytes it
/// sends.
pub fn from_entry(
    exchange: &Exchange<'_>,
    entry: &Entry,
    file: Arc<std::fs::File>,
    served: Served,
    reply: &Reply,
) -> (Answer, u64) {
    let last_modified = entry.validators.last_modified.as_deref();
    let own_etag;
    let etag = match reply.etag {
        Etag::Upstream => entry.validators.etag.as_deref(),
        Etag::Content => {
            own_etag = content_etag(&entry.sha256);
            Some(own_etag.as_str())
        }
    };
    let rep = Representation {
        etag,
        last_modified,
        date_validates_ranges: date_validates_ranges(reply.dated_resume, last_modified, entry.fetched_at_time()),
        length: Some(entry.size),
    };
    let decided = plan(exchange.method, exchange.headers, &rep);
    let mut response = Response::new(ResponseBody::Empty);
    describe(response.headers_mut(), &entry.headers, &rep);
    let mut stored = None;
    let sent = match decided {
        Plan::NotModified => not_modified(&mut response),
        Plan::Unsatisfiable => unsatisfiable(&mut response, entry.size),
        Plan::Full => {
            set_length(&mut response, entry.size);
            if reply.rewrite.is_some() {
                // What a side that keeps a compressed form reads it by.
                stored = Some(StoredBody { sha256: entry.sha256.clone(), size: entry.size, file: Arc::clone(&file) });
            }
            body_if_get(exchange, &mut response, || ResponseBody::File(FileBody::new(file, 0, entry.size)), entry.size)
        }
        Plan::Partial { start, end } => {
            partial(&mut response, start, end, entry.size);
            let len = end - start + 1;
            body_if_get(exchange, &mut response, || ResponseBody::File(FileBody::new(file, start, len)), len)
        }
        Plan::Parts(ranges) => {
            let (multipart, len) = multipart(&mut response, ranges, entry.size);
            let body = || ResponseBody::Pieced(Box::new(PiecedBody::of(file, Box::new(multipart.pieces()))));
            body_if_get(exchange, &mut response, body, len)
        }
    };
    (Answer { stored, ..Answer::served(response, served) }, sent)
}

/// pkgproxy's own strong entity tag for a body of SHA-256 `sha256`.
fn content_etag(sha256: &str) -> String {
    format!("\"{}\"", &sha256[..sha256.len().min(32)])
}

/// Answers from a download in progress.
pub fn from_fetch(exchange: &Exchange<'_>, fetch: &Arc<Fetch>, head: &Arc<Head>, dated_resume: DatedResume) -> Answer {
    let last_modified = head.validators.last_modified.as_deref();
    let rep = Representation {
        etag: head.validators.etag.as_deref(),
        last_modified,
        date_validates_ranges: date_validates_ranges(dated_resume, last_modified, head.received_at),
        length: head.content_length,
    };
    let decided = plan(exchange.method, exchange.headers, &rep);
    let mut response = Response::new(ResponseBody::Empty);
    describe(response.headers_mut(), &head.headers, &rep);
    match decided {
        Plan::NotModified => {
            not_modified(&mut response);
        }
        Plan::Unsatisfiable => {
            unsatisfiable(&mut response, head.content_length.unwrap_or(0));
        }
        Plan::Full => {
            if let Some(length) = head.content_length {
                set_length(&mut response, length);
            }
            body_if_get(exchange, &mut response, || ResponseBody::Fetch(fetch.body(head, 0, None)), 0);
        }
        Plan::Partial { start, end } => {
            partial(&mut response, start, end, head.content_length.unwrap_or(end + 1));
            body_if_get(exchange, &mut response, || ResponseBody::Fetch(fetch.body(head, start, Some(end + 1))), 0);
        }
        Plan::Parts(ranges) => {
            // A plan of parts is made only for a body of known length.
            let (multipart, _) = multipart(&mut response, ranges, head.content_length.unwrap_or(0));
            body_if_get(exchange, &mut response, || fetched_parts(multipart, fetch, head), 0);
        }
    }
    Answer::served(response, Served::Miss)
}

/// The body of `multipart` from a download in progress: each part's bytes
/// read as a single range is, waiting for them as they arrive (a part
/// early in the body is sent before the download ends), and made only
/// when the parts before it are sent.
fn fetched_parts(multipart: Multipart, fetch: &Arc<Fetch>, head: &Arc<Head>) -> ResponseBody {
    let (fetch, head) = (Arc::clone(fetch), Arc::clone(head));
    let parts = multipart.pieces().map(move |piece| match piece {
        Piece::Bytes(bytes) => ResponseBody::full(bytes),
        Piece::File { offset, len } => ResponseBody::Fetch(fetch.body(&head, offset, Some(offset + len))),
    });
    ResponseBody::Chained(Box::new(ChainedBody::new(parts)))
}

/// Passes on an upstream answer that was not cached: as it came (a miss),
/// or as the side remembers it (a hit: nothing was asked).
pub fn passed(exchange: &Exchange<'_>, answer: &PassedAnswer, served: Served) -> Answer {
    let mut response = Response::new(ResponseBody::Empty);
    *response.status_mut() = answer.status;
    let headers = response.headers_mut();
    for (name, value) in &answer.headers {
        if let (Ok(name), Ok(value)) = (http::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            headers.append(name, value);
        }
    }
    strip_hop_by_hop(headers);
    add_via(headers);
    let bodiless = answer.status == StatusCode::NOT_MODIFIED || answer.status == StatusCode::NO_CONTENT;
    if !bodiless {
        set_length(&mut response, answer.body.len() as u64);
        if *exchange.method == Method::GET {
            *response.body_mut() = ResponseBody::full(answer.body.clone());
        }
    }
    Answer::served(response, served)
}

/// Whether an `If-Range` date may resume a body received at `received`.
fn date_validates_ranges(dated_resume: DatedResume, last_modified: Option<&str>, received: SystemTime) -> bool {
    dated_resume == DatedResume::Honoured && last_modified.is_some_and(|lm| last_modified_is_strong(lm, received))
}

fn describe(headers: &mut HeaderMap, kept: &[(String, String)], rep: &Representation<'_>) {
    for (name, value) in kept {
        if let (Ok(name), Ok(value)) = (http::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            headers.append(name, value);
        }
    }
    if !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    }
    if let Some(etag) = rep.etag.and_then(|v| HeaderValue::from_str(v).ok()) {
        headers.insert(ETAG, etag);
    }
    if let Some(lm) = rep.last_modified.and_then(|v| HeaderValue::from_str(v).ok()) {
        headers.insert(LAST_MODIFIED, lm);
    }
    if rep.length.is_some() {
        headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    }
    headers.insert(http::header::VIA, VIA);
}

fn set_length(response: &mut Response<ResponseBody>, length: u64) {
    response.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(length));
}

fn body_if_get(
    exchange: &Exchange<'_>,
    response: &mut Response<ResponseBody>,
    body: impl FnOnce() -> ResponseBody,
    len: u64,
) -> u64 {
    if *exchange.method == Method::GET {
        *response.body_mut() = body();
        len
    } else {
        0
    }
}

fn not_modified(response: &mut Response<ResponseBody>) -> u64 {
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    let headers = response.headers_mut();
    headers.remove(CONTENT_TYPE);
    headers.remove(ACCEPT_RANGES);
    0
}

fn unsatisfiable(response: &mut Response<ResponseBody>, length: u64) -> u64 {
    *response.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
    let headers = response.headers_mut();
    headers.insert(CONTENT_RANGE, HeaderValue::from_str(&format!("bytes */{length}")).expect("digits"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(0));
    0
}

/// Makes `response` a `206` of `ranges` of a body of `length` bytes, as a
/// multipart body whose parts have the type the body had; returns its
/// layout and its length.
fn multipart(response: &mut Response<ResponseBody>, ranges: Vec<ByteRange>, length: u64) -> (Multipart, u64) {
    *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    let headers = response.headers_mut();
    let own_type = headers.get(CONTENT_TYPE).and_then(|value| value.to_str().ok());
    let multipart = Multipart::new(ranges, length, own_type.unwrap_or("application/octet-stream"));
    let len = multipart.length();
    headers.insert(CONTENT_TYPE, multipart.content_type());
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    (multipart, len)
}

fn partial(response: &mut Response<ResponseBody>, start: u64, end: u64, length: u64) {
    *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    let headers = response.headers_mut();
    let range = format!("bytes {start}-{end}/{length}");
    headers.insert(CONTENT_RANGE, HeaderValue::from_str(&range).expect("digits"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(end - start + 1));
}
