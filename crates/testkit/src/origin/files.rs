//! How the origin answers for one file: path mapping, validators,
//! conditional requests, single byte ranges and the paced, chunked body.
//!
//! Pure decisions (`resolve`, `parse_range`, the precondition checks) are
//! plain functions over headers so they are tested without sockets. Nothing
//! here reads a whole file into memory.

use std::fs::Metadata;
use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use percent_encoding::percent_decode_str;
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::{bare, empty_body, Body, Shared};

/// Largest piece of a file read and sent at once.
const CHUNK_BYTES: u64 = 64 * 1024;

/// Maps a request path onto a file under `root`; `None` if it tries to
/// climb out with `..` or is not valid percent-encoded UTF-8.
pub(super) fn resolve(root: &Path, uri_path: &str) -> Option<PathBuf> {
    let decoded = percent_decode_str(uri_path).decode_utf8().ok()?;
    let mut path = root.to_path_buf();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => return None,
            s if s.contains('\0') || s.contains('\\') => return None,
            s => path.push(s),
        }
    }
    Some(path)
}

/// Whether the file at `path` is text a CDN would compress: anything but
/// an archive, a package or an image.
pub(super) fn is_text(path: &Path) -> bool {
    const BINARY: [&str; 14] =
        ["deb", "udeb", "zip", "gz", "xz", "bz2", "zst", "lz4", "snap", "squashfs", "tar", "qcow2", "img", "crate"];
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    !BINARY.iter().any(|binary| extension.eq_ignore_ascii_case(binary))
}

/// The validators of one file version.
struct Validators {
    /// File length in bytes.
    size: u64,
    /// Modification time truncated to whole seconds, as HTTP dates carry it.
    modified: SystemTime,
    /// A strong entity tag from size and the full-precision mtime, quoted.
    etag: String,
}

impl Validators {
    fn of(meta: &Metadata) -> Self {
        let mtime = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).unwrap_or_default();
        Validators {
            size: meta.len(),
            modified: UNIX_EPOCH + Duration::from_secs(mtime.as_secs()),
            etag: format!("\"{:x}-{:x}.{:x}\"", meta.len(), mtime.as_secs(), mtime.subsec_nanos()),
        }
    }

    fn last_modified(&self) -> String {
        httpdate::fmt_http_date(self.modified)
    }
}

pub(super) async fn serve_file(
    shared: &Arc<Shared>,
    head_only: bool,
    headers: &HeaderMap,
    path: &Path,
) -> io::Result<Response<Body>> {
    let mut file = File::open(path).await?;
    let meta = file.metadata().await?;
    if !meta.is_file() {
        return Ok(bare(StatusCode::NOT_FOUND));
    }
    let v = Validators::of(&meta);
    if is_not_modified(headers, &v) {
        let mut response = bare(StatusCode::NOT_MODIFIED);
        add_validators(response.headers_mut(), &v);
        return Ok(response);
    }
    let range = match header_str(headers, header::RANGE) {
        Some(value) if if_range_allows(headers, &v) => parse_range(value, v.size),
        _ => RangeRequest::Whole,
    };
    let (status, start, len) = match range {
        RangeRequest::Whole => (StatusCode::OK, 0, v.size),
        RangeRequest::Part { first, last } => (StatusCode::PARTIAL_CONTENT, first, last - first + 1),
        RangeRequest::Unsatisfiable => {
            let mut response = bare(StatusCode::RANGE_NOT_SATISFIABLE);
            let value = format!("bytes */{}", v.size);
            response.headers_mut().insert(header::CONTENT_RANGE, value.parse().unwrap());
            return Ok(response);
        }
    };
    let body = if head_only || len == 0 {
        empty_body()
    } else {
        file.seek(SeekFrom::Start(start)).await?;
        file_body(Arc::clone(shared), file, len)
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let h = response.headers_mut();
    add_validators(h, &v);
    h.insert(header::CONTENT_LENGTH, len.into());
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let octets = HeaderValue::from_static("application/octet-stream");
    h.insert(header::CONTENT_TYPE, octets);
    if status == StatusCode::PARTIAL_CONTENT {
        let value = format!("bytes {}-{}/{}", start, start + len - 1, v.size);
        h.insert(header::CONTENT_RANGE, value.parse().unwrap());
    }
    Ok(response)
}

fn add_validators(h: &mut HeaderMap, v: &Validators) {
    h.insert(header::ETAG, v.etag.parse().unwrap());
    h.insert(header::LAST_MODIFIED, v.last_modified().parse().unwrap());
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// RFC 9110 13.1.2/13.1.3: `If-None-Match` wins over `If-Modified-Since`.
fn is_not_modified(headers: &HeaderMap, v: &Validators) -> bool {
    if let Some(tags) = header_str(headers, header::IF_NONE_MATCH) {
        return tags.split(',').map(str::trim).any(|tag| {
            // Weak comparison, as If-None-Match asks for.
            tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == v.etag
        });
    }
    match header_str(headers, header::IF_MODIFIED_SINCE).map(httpdate::parse_http_date) {
        Some(Ok(since)) => v.modified <= since,
        _ => false,
    }
}

/// `If-Range` (RFC 9110 13.1.5): the range applies only if the validator
/// still matches; an entity tag compares strongly, a date exactly.
fn if_range_allows(headers: &HeaderMap, v: &Validators) -> bool {
    match header_str(headers, header::IF_RANGE) {
        None => true,
        Some(tag) if tag.starts_with('"') || tag.starts_with("W/") => tag == v.etag,
        Some(date) => httpdate::parse_http_date(date).is_ok_and(|d| d == v.modified),
    }
}

/// What a `Range` header asks of a representation of a given size.
#[derive(Debug, PartialEq, Eq)]
enum RangeRequest {
    /// No usable single byte range: send the whole file with 200.
    Whole,
    /// Send bytes `first..=last` with 206.
    Part {
        /// First byte offset.
        first: u64,
        /// Last byte offset, inclusive, already clamped to the size.
        last: u64,
    },
    /// A valid range that lies beyond the end: 416.
    Unsatisfiable,
}

/// Parses a single `bytes=a-b`, `bytes=a-` or `bytes=-n`. Malformed headers
/// and multi-range requests are ignored (allowed by RFC 9110 14.2).
fn parse_range(value: &str, size: u64) -> RangeRequest {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return RangeRequest::Whole;
    };
    if spec.contains(',') {
        return RangeRequest::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeRequest::Whole;
    };
    let number = |s: &str| -> Option<Option<u64>> {
        let s = s.trim();
        if s.is_empty() {
            Some(None)
        } else if s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().ok().map(Some)
        } else {
            None
        }
    };
    match (number(first), number(last)) {
        (Some(Some(first)), Some(last)) => {
            if last.is_some_and(|last| last < first) {
                RangeRequest::Whole
            } else if first >= size {
                RangeRequest::Unsatisfiable
            } else {
                let last = last.map_or(size - 1, |l| l.min(size - 1));
                RangeRequest::Part { first, last }
            }
        }
        (Some(None), Some(Some(suffix))) => {
            if suffix == 0 || size == 0 {
                RangeRequest::Unsatisfiable
            } else {
                let first = size.saturating_sub(suffix);
                RangeRequest::Part { first, last: size - 1 }
            }
        }
        _ => RangeRequest::Whole,
    }
}

/// Progress of one streamed body.
struct BodyState {
    /// The open file, positioned at the next byte to send.
    file: File,
    /// Bytes still to send.
    remaining: u64,
    /// Where the rate limit is read before each chunk.
    shared: Arc<Shared>,
}

/// Streams `len` bytes from `file` in chunks. Under a rate limit each chunk
/// is held back for its share of a second, so `n` bytes take `n / rate`.
fn file_body(shared: Arc<Shared>, file: File, len: u64) -> Body {
    let state = BodyState { file, remaining: len, shared };
    let chunks = futures_util::stream::unfold(state, |mut st| async move {
        if st.remaining == 0 {
            return None;
        }
        let rate = st.shared.rate_limit();
        // Under a cap, send about four chunks a second so pacing looks smooth.
        let chunk = rate.map_or(CHUNK_BYTES, |r| (r / 4).clamp(1, CHUNK_BYTES));
        let mut buf = vec![0u8; st.remaining.min(chunk) as usize];
        let item = match st.file.read(&mut buf).await {
            Ok(0) => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being served")),
            Ok(n) => {
                if let Some(rate) = rate {
                    let share = Duration::from_secs_f64(n as f64 / rate as f64);
                    tokio::time::sleep(share).await;
                }
                buf.truncate(n);
                st.remaining -= n as u64;
                Ok(Frame::data(Bytes::from(buf)))
            }
            Err(e) => Err(e),
        };
        if item.is_err() {
            st.remaining = 0;
        }
        Some((item, st))
    });
    StreamBody::new(chunks).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_range_covers_the_single_range_forms() {
        let part = |first, last| RangeRequest::Part { first, last };
        assert_eq!(parse_range("bytes=0-9", 100), part(0, 9));
        assert_eq!(parse_range("bytes=10-", 100), part(10, 99));
        assert_eq!(parse_range("bytes=-10", 100), part(90, 99));
        assert_eq!(parse_range("bytes=-1000", 100), part(0, 99));
        assert_eq!(parse_range("bytes=90-1000", 100), part(90, 99));
        assert_eq!(parse_range("bytes=100-", 100), RangeRequest::Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), RangeRequest::Unsatisfiable);
        assert_eq!(parse_range("bytes=0-", 0), RangeRequest::Unsatisfiable);
    }

    #[test]
    fn parse_range_ignores_what_it_does_not_support() {
        assert_eq!(parse_range("bytes=5-1", 100), RangeRequest::Whole);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), RangeRequest::Whole);
        assert_eq!(parse_range("items=0-1", 100), RangeRequest::Whole);
        assert_eq!(parse_range("bytes=a-b", 100), RangeRequest::Whole);
        assert_eq!(parse_range("bytes=-", 100), RangeRequest::Whole);
    }

    #[test]
    fn resolve_never_climbs_out_of_root() {
        let root = Path::new("/srv/root");
        assert_eq!(resolve(root, "/a/./b"), Some(root.join("a/b")));
        assert_eq!(resolve(root, "/a/%2e%2e/b"), None);
        assert_eq!(resolve(root, "/../etc/passwd"), None);
        assert_eq!(resolve(root, "/a%2f..%2f..%2fx"), None);
        assert_eq!(resolve(root, "/pkg_1.0%2b1.deb"), Some(root.join("pkg_1.0+1.deb")));
    }
}
