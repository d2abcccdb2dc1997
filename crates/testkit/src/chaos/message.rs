//! The HTTP/1.1 messages of the chaos upstream, apart from any I/O: parsing
//! a request head, the normal answer to a request (a body, a range of it,
//! 404, 405 or 416), and the bytes of a response head. What the server does
//! with the wire (when to answer, close or reset) is the parent module's.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::StatusCode;
use sha2::{Digest, Sha256};

/// One served body and its fixed validators.
pub(super) struct Entry {
    body: Bytes,
    /// A strong, quoted tag from the body's SHA-256.
    etag: String,
    /// The time the entry was made, as an HTTP date.
    last_modified: String,
}

impl Entry {
    /// `body` with validators from its content and the current time.
    pub(super) fn new(body: Bytes) -> Entry {
        let digest = Sha256::digest(&body);
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        Entry {
            etag: format!("\"{}\"", hex::encode(&digest[..12])),
            last_modified: httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs)),
            body,
        }
    }
}

/// The parts of a request head the server acts on.
pub(super) struct RequestHead {
    pub(super) method: String,
    /// Path without query (for an absolute-form target, only its path).
    pub(super) path: String,
    /// Header lines; names are lower case.
    headers: Vec<(String, String)>,
    pub(super) keep_alive: bool,
}

impl RequestHead {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Parses a request head (without its blank line) into the head and its body length.
pub(super) fn parse_head(text: &str) -> Option<(RequestHead, usize)> {
    let mut lines = text.trim_start_matches("\r\n").split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") {
        return None;
    }
    let headers = lines
        .map(|l| l.split_once(':').map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())))
        .collect::<Option<Vec<_>>>()?;
    let target = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let path = target.split('?').next().unwrap_or("/").to_owned();
    let mut head = RequestHead { method: method.to_owned(), path, headers, keep_alive: version != "HTTP/1.0" };
    if let Some(connection) = head.header("connection").map(str::to_ascii_lowercase) {
        head.keep_alive = connection.contains("keep-alive") || (head.keep_alive && !connection.contains("close"));
    }
    if head.header("transfer-encoding").is_some() {
        return None;
    }
    let body_len = match head.header("content-length") {
        Some(len) => len.parse().ok()?,
        None => 0,
    };
    Some((head, body_len))
}

/// A response before delivery.
pub(super) struct Reply {
    status: u16,
    /// Headers besides `Content-Length` and `Connection`.
    headers: Vec<(&'static str, String)>,
    pub(super) body: Bytes,
    /// How the body's length is told.
    length: Length,
}

/// How a reply tells its body's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Length {
    /// `Content-Length`, the body's own.
    Actual,
    /// `Content-Length`, this one (a lie).
    Declared(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

impl Reply {
    fn bare(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), body: Bytes::new(), length: Length::Actual }
    }

    /// One more header.
    pub(super) fn add_header(&mut self, name: &'static str, value: String) {
        self.headers.push((name, value));
    }

    /// Tells `length` as the body's length, whatever the body is.
    pub(super) fn declare_length(&mut self, length: u64) {
        self.length = Length::Declared(length);
    }

    /// Tells no length: the body goes chunked.
    pub(super) fn chunked(&mut self) {
        self.length = Length::Chunked;
    }

    /// The body gzipped, said in `Content-Encoding`.
    pub(super) fn gzip(&mut self) {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = encoder.write_all(&self.body);
        self.body = encoder.finish().unwrap_or_default().into();
        self.headers.push(("Content-Encoding", "gzip".to_owned()));
    }

    /// Every body byte flipped, the length kept.
    pub(super) fn flip_bytes(&mut self) {
        self.body = self.body.iter().map(|byte| !byte).collect::<Vec<u8>>().into();
    }

    /// A `206` whose `Content-Range` names a representation one byte longer.
    pub(super) fn misstate_total(&mut self) {
        for (name, value) in &mut self.headers {
            if *name == "Content-Range" {
                if let Some((range, total)) = value.rsplit_once('/') {
                    let total: u64 = total.parse().unwrap_or(0);
                    *value = format!("{range}/{}", total + 1);
                }
            }
        }
    }

    /// A `206` for the range one byte later than the one asked for (its
    /// bytes and its `Content-Range`).
    pub(super) fn shift_range(&mut self, entries: &HashMap<String, Entry>, req: &RequestHead) {
        let Some(entry) = entries.get(&req.path) else { return };
        let len = entry.body.len() as u64;
        for (name, value) in &mut self.headers {
            if *name != "Content-Range" {
                continue;
            }
            let Some((first, last)) = value
                .strip_prefix("bytes ")
                .and_then(|rest| rest.split_once('/'))
                .and_then(|(range, _)| range.split_once('-'))
                .and_then(|(first, last)| Some((first.parse::<u64>().ok()?, last.parse::<u64>().ok()?)))
            else {
                return;
            };
            let (first, last) = ((first + 1).min(len - 1), last);
            *value = format!("bytes {first}-{last}/{len}");
            self.body = entry.body.slice(first as usize..=last as usize);
        }
    }

    /// An empty answer with `status` and, when given, `Retry-After`.
    pub(super) fn status(status: u16, retry_after: Option<&str>) -> Reply {
        let mut reply = Reply::bare(status);
        reply.headers.extend(retry_after.map(|v| ("Retry-After", v.to_owned())));
        reply
    }

    /// The status line and headers, through the blank line.
    pub(super) fn head(&self, keep_alive: bool) -> Vec<u8> {
        let reason = StatusCode::from_u16(self.status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Unknown");
        let mut head = format!("HTTP/1.1 {} {reason}\r\n", self.status);
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        match self.length {
            Length::Actual => head.push_str(&format!("Content-Length: {}\r\n", self.body.len())),
            Length::Declared(length) => head.push_str(&format!("Content-Length: {length}\r\n")),
            Length::Chunked => head.push_str("Transfer-Encoding: chunked\r\n"),
        }
        if !keep_alive {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

/// The normal answer to `req` from `entries`: the body (or its range), 404 or 405.
pub(super) fn respond(entries: &HashMap<String, Entry>, req: &RequestHead) -> Reply {
    if req.method != "GET" && req.method != "HEAD" {
        let mut reply = Reply::bare(405);
        reply.headers.push(("Allow", "GET, HEAD".to_owned()));
        return reply;
    }
    let Some(entry) = entries.get(&req.path) else {
        return Reply::bare(404);
    };
    let len = entry.body.len() as u64;
    let mut reply = Reply::bare(200);
    reply.headers.push(("Accept-Ranges", "bytes".to_owned()));
    reply.headers.push(("ETag", entry.etag.clone()));
    reply.headers.push(("Last-Modified", entry.last_modified.clone()));
    let if_range_ok = req.header("if-range").is_none_or(|v| v == entry.etag || v == entry.last_modified);
    match req.header("range").filter(|_| if_range_ok).and_then(|r| parse_range(r, len)) {
        None => reply.body = entry.body.clone(),
        Some(Some((first, last))) => {
            reply.status = 206;
            reply.headers.push(("Content-Range", format!("bytes {first}-{last}/{len}")));
            reply.body = entry.body.slice(first as usize..=last as usize);
        }
        Some(None) => {
            reply.status = 416;
            reply.headers.push(("Content-Range", format!("bytes */{len}")));
        }
    }
    reply
}

/// A single `bytes=` range over `len` bytes: `None` to ignore the header
/// (malformed or several ranges), `Some(None)` if unsatisfiable, else the
/// inclusive first and last byte.
fn parse_range(value: &str, len: u64) -> Option<Option<(u64, u64)>> {
    let spec = value.trim().strip_prefix("bytes=")?;
    let (first, last) = spec.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        let suffix: u64 = last.parse().ok()?;
        return Some((suffix > 0 && len > 0).then(|| (len.saturating_sub(suffix), len - 1)));
    }
    let first: u64 = first.parse().ok()?;
    let last = if last.is_empty() { u64::MAX } else { last.parse().ok()? };
    if last < first {
        return None;
    }
    Some((first < len).then(|| (first, last.min(len - 1))))
}
