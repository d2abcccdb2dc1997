//! The fake origin on its own: files, validators, ranges, recording, faults.
//! Requests are written by hand on raw sockets so the bytes on the wire are
//! exactly what each test says.

// These tests are the origin's clients; the one-way-out rule is about the
// daemon's own traffic.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::reply::Reply;
use pkgproxy_testkit::Origin;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Parses one response off the front of `bytes`, framed by Content-Length
/// (the origin never sends chunked); `head` means no body follows.
fn parse_reply(bytes: &[u8], head: bool) -> (Reply, &[u8]) {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n").expect("end of response head");
    let text = std::str::from_utf8(&bytes[..end]).unwrap();
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    let mut reply = Reply { status, headers, body: Vec::new() };
    let len: usize = match reply.header("content-length") {
        Some(len) if !head => len.parse().unwrap(),
        _ => 0,
    };
    let rest = &bytes[end + 4..];
    reply.body = rest[..len].to_vec();
    (reply, &rest[len..])
}

/// Sends `raw` on a new connection and reads until the server closes it.
async fn exchange(origin: &Origin, raw: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(origin.addr()).await.unwrap();
    stream.write_all(raw.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).await.unwrap();
    bytes
}

/// One request with `extra` header lines, on its own connection.
async fn request(origin: &Origin, method: &str, path: &str, extra: &[&str]) -> Reply {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: origin.test\r\n");
    for line in extra {
        raw.push_str(line);
        raw.push_str("\r\n");
    }
    raw.push_str("Connection: close\r\n\r\n");
    let bytes = exchange(origin, &raw).await;
    let (reply, rest) = parse_reply(&bytes, method == "HEAD");
    assert!(rest.is_empty(), "trailing bytes after the reply");
    reply
}

/// A served tree with `dir/blob` (200 KiB: several chunks) and a file
/// outside the root that must stay unreachable.
fn tree() -> (TempDir, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let www = tmp.path().join("www");
    fs::create_dir_all(www.join("dir")).unwrap();
    let blob: Vec<u8> = (0..200 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(www.join("dir/blob"), &blob).unwrap();
    fs::write(tmp.path().join("secret"), "outside the root").unwrap();
    (tmp, blob)
}

async fn serve(tmp: &Path) -> Origin {
    Origin::serve(tmp.join("www")).await
}

#[tokio::test]
async fn get_serves_the_file_with_validators_and_records_the_request() {
    let (tmp, blob) = tree();
    let origin = serve(tmp.path()).await;
    let reply = request(&origin, "GET", "/dir/blob?x=1", &["X-Test: one"]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, blob);
    assert_eq!(reply.header("content-length"), Some("204800"));
    assert_eq!(reply.header("content-type"), Some("application/octet-stream"));
    assert!(reply.header("etag").unwrap().starts_with('"'));
    assert!(httpdate::parse_http_date(reply.header("last-modified").unwrap()).is_ok());

    let requests = origin.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].path, "/dir/blob?x=1");
    assert_eq!(requests[0].header("x-test"), Some("one"));
    assert_eq!(origin.count_path("/dir/"), 1);
    assert_eq!(origin.requests_matching("blob").len(), 1);
    origin.clear_requests();
    assert!(origin.requests().is_empty());
}

#[tokio::test]
async fn head_sends_the_headers_of_get_without_a_body() {
    let (tmp, _) = tree();
    let origin = serve(tmp.path()).await;
    let reply = request(&origin, "HEAD", "/dir/blob", &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-length"), Some("204800"));
    assert!(reply.body.is_empty());
}

#[tokio::test]
async fn conditional_requests_get_304_while_the_file_is_unchanged() {
    let (tmp, blob) = tree();
    let origin = serve(tmp.path()).await;
    let first = request(&origin, "GET", "/dir/blob", &[]).await;
    let etag = first.header("etag").unwrap().to_owned();
    let date = first.header("last-modified").unwrap().to_owned();

    let by_date = request(&origin, "GET", "/dir/blob", &[&format!("If-Modified-Since: {date}")]).await;
    assert_eq!((by_date.status, by_date.body.len()), (304, 0));
    assert_eq!(by_date.header("etag"), Some(etag.as_str()));
    let by_tag = request(&origin, "GET", "/dir/blob", &[&format!("If-None-Match: {etag}")]).await;
    assert_eq!(by_tag.status, 304);

    let old = "If-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT";
    assert_eq!(request(&origin, "GET", "/dir/blob", &[old]).await.status, 200);
    let other = request(&origin, "GET", "/dir/blob", &["If-None-Match: \"other\""]).await;
    assert_eq!((other.status, other.body), (200, blob));
}

#[tokio::test]
async fn single_ranges_get_206_and_ranges_past_the_end_get_416() {
    let (tmp, blob) = tree();
    let origin = serve(tmp.path()).await;
    let size = blob.len();
    for (range, first, last) in
        [("bytes=2-5", 2, 5), ("bytes=100000-", 100_000, size - 1), ("bytes=-3", size - 3, size - 1)]
    {
        let reply = request(&origin, "GET", "/dir/blob", &[&format!("Range: {range}")]).await;
        assert_eq!(reply.status, 206, "{range}");
        assert_eq!(reply.body, &blob[first..=last], "{range}");
        let expected = format!("bytes {first}-{last}/{size}");
        assert_eq!(reply.header("content-range"), Some(expected.as_str()));
    }
    let past = request(&origin, "GET", "/dir/blob", &["Range: bytes=999999-"]).await;
    assert_eq!(past.status, 416);
    assert_eq!(past.header("content-range"), Some("bytes */204800"));

    // apt resumes with If-Range: <Last-Modified>; a stale validator means 200.
    let date = request(&origin, "HEAD", "/dir/blob", &[]).await;
    let date = date.header("last-modified").unwrap().to_owned();
    let fresh = ["Range: bytes=10-", &format!("If-Range: {date}")];
    assert_eq!(request(&origin, "GET", "/dir/blob", &fresh).await.status, 206);
    let stale = ["Range: bytes=10-", "If-Range: Mon, 01 Jan 2001 00:00:00 GMT"];
    let stale = request(&origin, "GET", "/dir/blob", &stale).await;
    assert_eq!((stale.status, stale.body.len()), (200, size));
}

#[tokio::test]
async fn missing_files_and_escapes_from_root_get_404() {
    let (tmp, _) = tree();
    let origin = serve(tmp.path()).await;
    for path in ["/nope", "/dir", "/../secret", "/dir/%2e%2e/%2e%2e/secret"] {
        assert_eq!(request(&origin, "GET", path, &[]).await.status, 404, "{path}");
    }
    assert_eq!(request(&origin, "POST", "/dir/blob", &[]).await.status, 405);
}

#[tokio::test]
async fn pipelined_requests_share_one_counted_connection() {
    let (tmp, blob) = tree();
    let origin = serve(tmp.path()).await;
    let raw = "GET /dir/blob HTTP/1.1\r\nHost: o\r\n\r\n\
               GET /nope HTTP/1.1\r\nHost: o\r\nConnection: close\r\n\r\n";
    let bytes = exchange(&origin, raw).await;
    let (first, rest) = parse_reply(&bytes, false);
    let (second, rest) = parse_reply(rest, false);
    assert_eq!((first.status, first.body), (200, blob));
    assert_eq!(second.status, 404);
    assert!(rest.is_empty());
    assert_eq!(origin.connections(), 1);
    assert_eq!(origin.requests().len(), 2);
    request(&origin, "GET", "/dir/blob", &[]).await;
    assert_eq!(origin.connections(), 2);
}

#[tokio::test]
async fn status_override_replaces_the_file_until_cleared() {
    let (tmp, _) = tree();
    let origin = serve(tmp.path()).await;
    origin.set_status_override("/dir/blob", Some(503));
    assert_eq!(request(&origin, "GET", "/dir/blob?q", &[]).await.status, 503);
    assert_eq!(origin.count_path("/dir/blob"), 1, "overridden requests are recorded");
    origin.set_status_override("/dir/blob", None);
    assert_eq!(request(&origin, "GET", "/dir/blob", &[]).await.status, 200);
}

#[tokio::test]
async fn rate_limit_paces_the_body() {
    let (tmp, blob) = tree();
    let origin = serve(tmp.path()).await;
    // 200 KiB at 400 KiB/s: about half a second.
    origin.set_rate_limit(Some(400 * 1024));
    let start = Instant::now();
    let reply = request(&origin, "GET", "/dir/blob", &[]).await;
    let paced = start.elapsed();
    assert_eq!(reply.body, blob);
    assert!(paced >= Duration::from_millis(450), "took only {paced:?}");
    assert!(paced < Duration::from_secs(5), "took {paced:?}");

    origin.set_rate_limit(None);
    let start = Instant::now();
    request(&origin, "GET", "/dir/blob", &[]).await;
    assert!(start.elapsed() < Duration::from_millis(400));
}

#[tokio::test]
async fn dropping_the_origin_stops_it_listening() {
    let (tmp, _) = tree();
    let origin = serve(tmp.path()).await;
    let addr = origin.addr();
    assert_eq!(origin.url(), format!("http://{addr}"));
    drop(origin);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(TcpStream::connect(addr).await.is_err());
}
