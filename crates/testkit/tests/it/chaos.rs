//! The chaos upstream on its own: one test per behaviour, plus bodies,
//! ranges and counters, over TCP and over handed in-memory streams.
//! Requests are written by hand on raw streams so each test sees exactly
//! what reaches the wire, and when the connection closes.

// These tests are the upstream's clients; the one-way-out rule is about the
// daemon's own traffic.
#![allow(clippy::disallowed_methods)]

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use crate::reply::Reply;
use pkgproxy_testkit::{Behaviour, ChaosUpstream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::timeout;

/// A 10 000-byte body whose bytes differ from their neighbours.
fn blob() -> Vec<u8> {
    (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

async fn connect(up: &ChaosUpstream) -> TcpStream {
    TcpStream::connect(up.addr()).await.unwrap()
}

/// Writes one request for `path` with `extra` header lines.
async fn send(stream: &mut (impl AsyncWrite + Unpin), method: &str, path: &str, extra: &[&str]) {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: chaos.test\r\n");
    for line in extra {
        raw.push_str(line);
        raw.push_str("\r\n");
    }
    raw.push_str("\r\n");
    stream.write_all(raw.as_bytes()).await.unwrap();
}

/// Reads up to the end of a response head; the bytes after it stay in `rest`.
async fn read_head(stream: &mut (impl AsyncRead + Unpin), rest: &mut Vec<u8>) -> Reply {
    let end = loop {
        if let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        assert_ne!(stream.read_buf(rest).await.unwrap(), 0, "EOF inside the response head");
    };
    let text = String::from_utf8(rest.drain(..end + 4).collect()).unwrap();
    let mut lines = text.trim_end().split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    Reply { status, headers, body: Vec::new() }
}

/// Reads one whole response framed by `Content-Length` (none after a `HEAD`).
async fn read_reply(stream: &mut (impl AsyncRead + Unpin), head_only: bool) -> Reply {
    let mut rest = Vec::new();
    let mut reply = read_head(stream, &mut rest).await;
    let len: usize = if head_only { 0 } else { reply.header("content-length").unwrap().parse().unwrap() };
    while rest.len() < len {
        assert_ne!(stream.read_buf(&mut rest).await.unwrap(), 0, "EOF inside the body");
    }
    assert_eq!(rest.len(), len, "bytes after the body");
    reply.body = rest;
    reply
}

/// One GET on a fresh connection.
async fn get(up: &ChaosUpstream, path: &str, extra: &[&str]) -> Reply {
    let mut stream = connect(up).await;
    send(&mut stream, "GET", path, extra).await;
    read_reply(&mut stream, false).await
}

/// Reads until EOF or a reset; the bytes read and whether it ended in a reset.
async fn read_until_closed(stream: &mut (impl AsyncRead + Unpin)) -> (Vec<u8>, bool) {
    let mut bytes = Vec::new();
    loop {
        match stream.read_buf(&mut bytes).await {
            Ok(0) => return (bytes, false),
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::ConnectionReset);
                return (bytes, true);
            }
        }
    }
}

/// Asserts nothing arrives on `stream` within `wait` (and it stays open).
async fn assert_silent(stream: &mut (impl AsyncRead + Unpin), wait: Duration) {
    let mut byte = [0u8; 1];
    assert!(timeout(wait, stream.read(&mut byte)).await.is_err(), "got bytes or EOF");
}

/// Waits until `cond` holds.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let cond = &cond;
    pkgproxy_testkit::eventually(what, move || async move { cond().then_some(()) }).await;
}

#[tokio::test]
async fn ok_serves_bodies_with_validators_and_ranges_on_one_connection() {
    let up = ChaosUpstream::start().await;
    assert_eq!(up.url(), format!("http://127.0.0.1:{}", up.addr().port()));
    up.put("/a", blob());
    let mut stream = connect(&up).await;

    send(&mut stream, "GET", "/a?x=1", &[]).await;
    let full = read_reply(&mut stream, false).await;
    assert_eq!(full.status, 200);
    assert_eq!(full.body, blob());
    assert_eq!(full.header("content-length"), Some("10000"));
    let etag = full.header("etag").unwrap().to_owned();
    assert!(etag.starts_with('"'));
    assert!(httpdate::parse_http_date(full.header("last-modified").unwrap()).is_ok());

    send(&mut stream, "GET", "/a", &["Range: bytes=4000-", &format!("If-Range: {etag}")]).await;
    let tail = read_reply(&mut stream, false).await;
    assert_eq!(tail.status, 206);
    assert_eq!(tail.header("content-range"), Some("bytes 4000-9999/10000"));
    assert_eq!(tail.body, &blob()[4000..]);
    assert_eq!(tail.header("etag"), Some(etag.as_str()));

    send(&mut stream, "GET", "/a", &["Range: bytes=10-19"]).await;
    let middle = read_reply(&mut stream, false).await;
    assert_eq!((middle.status, middle.body.as_slice()), (206, &blob()[10..20]));

    send(&mut stream, "GET", "/a", &["Range: bytes=4000-", "If-Range: \"stale\""]).await;
    assert_eq!(read_reply(&mut stream, false).await.status, 200);

    send(&mut stream, "GET", "/a", &["Range: bytes=10000-"]).await;
    let beyond = read_reply(&mut stream, false).await;
    assert_eq!((beyond.status, beyond.header("content-range")), (416, Some("bytes */10000")));

    send(&mut stream, "HEAD", "/a", &[]).await;
    let head = read_reply(&mut stream, true).await;
    assert_eq!((head.status, head.header("content-length")), (200, Some("10000")));

    send(&mut stream, "GET", "/missing", &[]).await;
    assert_eq!(read_reply(&mut stream, false).await.status, 404);

    assert_eq!((up.requests(), up.requests_for("/a"), up.requests_for("/missing"), up.accepted()), (7, 6, 1, 1));
    up.reset_counters();
    assert_eq!((up.requests(), up.requests_for("/a"), up.accepted()), (0, 0, 0));
}

#[tokio::test]
async fn status_answers_with_retry_after_for_its_path_only() {
    let up = ChaosUpstream::start().await;
    up.put("/a", "aaa");
    up.put("/b", "bbb");
    up.set_path_behaviour("/a", Behaviour::Status { code: 503, retry_after: Some("7".into()) });
    let busy = get(&up, "/a", &[]).await;
    assert_eq!((busy.status, busy.header("retry-after"), busy.body.len()), (503, Some("7"), 0));
    assert_eq!(get(&up, "/b", &[]).await.body, b"bbb");

    up.set_behaviour(Behaviour::Status { code: 429, retry_after: None });
    let limited = get(&up, "/b", &[]).await;
    assert_eq!((limited.status, limited.header("retry-after")), (429, None));
    up.clear_path_behaviour("/a");
    assert_eq!(get(&up, "/a", &[]).await.status, 429);
}

#[tokio::test]
async fn delay_holds_the_head_back() {
    let up = ChaosUpstream::start().await;
    up.put("/a", "aaa");
    up.set_behaviour(Behaviour::Delay(Duration::from_millis(150)));
    let started = Instant::now();
    assert_eq!(get(&up, "/a", &[]).await.body, b"aaa");
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn close_before_headers_ends_the_connection_without_a_byte() {
    let up = ChaosUpstream::start().await;
    up.put("/a", blob());
    up.set_behaviour(Behaviour::CloseBeforeHeaders);
    let mut stream = connect(&up).await;
    send(&mut stream, "GET", "/a", &[]).await;
    assert_eq!(read_until_closed(&mut stream).await, (Vec::new(), false));
    assert_eq!(up.requests(), 1);
}

#[tokio::test]
async fn reset_mid_body_sends_exactly_n_body_bytes_then_resets() {
    let up = ChaosUpstream::start().await;
    up.put("/a", blob());
    up.set_behaviour(Behaviour::ResetMidBody { after_bytes: 1234 });
    let mut stream = connect(&up).await;
    send(&mut stream, "GET", "/a", &[]).await;
    let mut rest = Vec::new();
    let reply = read_head(&mut stream, &mut rest).await;
    assert_eq!((reply.status, reply.header("content-length")), (200, Some("10000")));
    let (more, reset) = read_until_closed(&mut stream).await;
    rest.extend_from_slice(&more);
    assert_eq!(rest, &blob()[..1234]);
    assert!(reset, "the connection ended with a FIN, not a reset");
}

#[tokio::test]
async fn reset_mid_body_delivers_every_byte_sent_even_to_a_slow_reader() {
    let up = ChaosUpstream::start().await;
    let big: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    up.put("/big", big.clone());
    up.set_behaviour(Behaviour::ResetMidBody { after_bytes: 3 * 1024 * 1024 });
    let mut stream = connect(&up).await;
    send(&mut stream, "GET", "/big", &[]).await;
    // Let the socket buffers fill before reading anything.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut rest = Vec::new();
    assert_eq!(read_head(&mut stream, &mut rest).await.status, 200);
    let (more, reset) = read_until_closed(&mut stream).await;
    rest.extend_from_slice(&more);
    assert_eq!(rest.len(), 3 * 1024 * 1024);
    assert!(rest == big[..3 * 1024 * 1024] && reset);
}

#[tokio::test]
async fn black_hole_accepts_and_reads_but_never_answers() {
    let up = ChaosUpstream::start().await;
    up.put("/a", "aaa");
    up.set_behaviour(Behaviour::BlackHole);
    let mut stream = connect(&up).await;
    send(&mut stream, "GET", "/a", &[]).await;
    assert_silent(&mut stream, Duration::from_millis(300)).await;
    assert_eq!((up.accepted(), up.requests(), up.open_connections()), (1, 1, 1));
}

#[tokio::test]
async fn stall_body_sends_n_bytes_then_nothing() {
    let up = ChaosUpstream::start().await;
    up.put("/a", blob());
    up.set_path_behaviour("/a", Behaviour::StallBody { after_bytes: 500 });
    let mut stream = connect(&up).await;
    send(&mut stream, "GET", "/a", &[]).await;
    let mut rest = Vec::new();
    assert_eq!(read_head(&mut stream, &mut rest).await.status, 200);
    while rest.len() < 500 {
        stream.read_buf(&mut rest).await.unwrap();
    }
    assert_eq!(rest, &blob()[..500]);
    assert_silent(&mut stream, Duration::from_millis(200)).await;
    assert_eq!(up.open_connections(), 1);
}

#[tokio::test]
async fn slow_body_trickles_but_arrives_complete() {
    let up = ChaosUpstream::start().await;
    up.put("/a", blob());
    up.set_behaviour(Behaviour::SlowBody { bytes_per_chunk: 1000, interval: Duration::from_millis(10) });
    let started = Instant::now();
    let mut stream = connect(&up).await;
    send(&mut stream, "GET", "/a", &["Range: bytes=2000-"]).await;
    let reply = read_reply(&mut stream, false).await;
    assert_eq!((reply.status, reply.body.as_slice()), (206, &blob()[2000..]));
    assert!(started.elapsed() >= Duration::from_millis(80), "8 pieces 10 ms apart came in {:?}", started.elapsed());
    // The connection is still good for another request.
    send(&mut stream, "GET", "/missing", &[]).await;
    assert_eq!(read_reply(&mut stream, false).await.status, 404);
}

#[tokio::test]
async fn drop_reused_connections_answers_only_the_first_request_per_connection() {
    let up = ChaosUpstream::start().await;
    up.put("/a", "aaa");
    up.set_behaviour(Behaviour::DropReusedConnections);
    let mut stream = connect(&up).await;
    send(&mut stream, "GET", "/a", &[]).await;
    assert_eq!(read_reply(&mut stream, false).await.body, b"aaa");
    send(&mut stream, "GET", "/a", &[]).await;
    assert_eq!(read_until_closed(&mut stream).await, (Vec::new(), false));

    assert_eq!(get(&up, "/a", &[]).await.body, b"aaa");
    assert_eq!((up.requests(), up.accepted()), (3, 2));
}

#[tokio::test]
async fn open_connections_falls_when_the_client_closes() {
    let up = ChaosUpstream::start().await;
    up.put("/a", "aaa");
    let mut first = connect(&up).await;
    let mut second = connect(&up).await;
    for stream in [&mut first, &mut second] {
        send(stream, "GET", "/a", &[]).await;
        assert_eq!(read_reply(stream, false).await.status, 200);
    }
    assert_eq!(up.open_connections(), 2);
    drop(first);
    eventually("one connection is left", || up.open_connections() == 1).await;
    drop(second);
    eventually("no connection is left", || up.open_connections() == 0).await;
    assert_eq!(up.accepted(), 2);
}

#[tokio::test]
async fn dropping_the_upstream_closes_its_connections() {
    let up = ChaosUpstream::start().await;
    up.set_behaviour(Behaviour::BlackHole);
    let mut stream = connect(&up).await;
    send(&mut stream, "GET", "/a", &[]).await;
    eventually("the request is read", || up.requests() == 1).await;
    drop(up);
    let (bytes, _) = timeout(Duration::from_secs(2), read_until_closed(&mut stream)).await.unwrap();
    assert!(bytes.is_empty());
}

/// A chaos upstream on streams handed to it, and the way to make them: an
/// in-memory network of one address, built from plain tokio parts.
struct Handed {
    up: ChaosUpstream,
    connections: mpsc::UnboundedSender<DuplexStream>,
}

impl Handed {
    fn start() -> Handed {
        let (connections, incoming) = mpsc::unbounded_channel();
        let up = ChaosUpstream::serve_streams("127.0.0.1:8080".parse().unwrap(), incoming);
        Handed { up, connections }
    }

    /// A new connection: the client's end of a pipe whose other end the
    /// upstream serves.
    fn connect(&self) -> DuplexStream {
        let (client, server) = tokio::io::duplex(64 * 1024);
        self.connections.send(server).unwrap();
        client
    }
}

#[tokio::test(start_paused = true)]
async fn handed_streams_are_served_counted_and_timed_like_connections() {
    let handed = Handed::start();
    let up = &handed.up;
    assert_eq!(up.url(), "http://127.0.0.1:8080");
    up.put("/a", blob());
    up.set_behaviour(Behaviour::Delay(Duration::from_millis(150)));
    let mut stream = handed.connect();
    let started = tokio::time::Instant::now();
    send(&mut stream, "GET", "/a", &["Range: bytes=4000-"]).await;
    let tail = read_reply(&mut stream, false).await;
    assert_eq!((tail.status, tail.body.as_slice()), (206, &blob()[4000..]));
    assert_eq!(started.elapsed(), Duration::from_millis(150), "on the paused clock, exactly the delay");
    send(&mut stream, "HEAD", "/a", &[]).await;
    assert_eq!(read_reply(&mut stream, true).await.status, 200);
    let mut second = handed.connect();
    send(&mut second, "GET", "/missing", &[]).await;
    assert_eq!(read_reply(&mut second, false).await.status, 404);
    assert_eq!((up.requests(), up.requests_for("/a"), up.accepted(), up.open_connections()), (3, 2, 2, 2));
    drop(stream);
    eventually("one connection is left", || up.open_connections() == 1).await;
    drop(second);
    eventually("no connection is left", || up.open_connections() == 0).await;
}

#[tokio::test]
async fn on_a_handed_stream_a_reset_is_an_abrupt_end_after_what_was_sent() {
    let handed = Handed::start();
    handed.up.put("/a", blob());
    handed.up.set_behaviour(Behaviour::ResetBeforeHeaders);
    let mut stream = handed.connect();
    send(&mut stream, "GET", "/a", &[]).await;
    assert_eq!(read_until_closed(&mut stream).await, (Vec::new(), false), "closed without a byte");

    handed.up.set_behaviour(Behaviour::ResetMidBody { after_bytes: 1234 });
    let mut stream = handed.connect();
    send(&mut stream, "GET", "/a", &[]).await;
    let mut rest = Vec::new();
    let reply = read_head(&mut stream, &mut rest).await;
    assert_eq!((reply.status, reply.header("content-length")), (200, Some("10000")));
    let (more, _) = read_until_closed(&mut stream).await;
    rest.extend_from_slice(&more);
    assert_eq!(rest, &blob()[..1234], "exactly the bytes sent, then the end");
    assert_eq!(handed.up.requests(), 2);
}

#[tokio::test]
async fn on_handed_streams_a_reused_connection_is_dropped_and_a_black_hole_stays_open() {
    let handed = Handed::start();
    handed.up.put("/a", "aaa");
    handed.up.set_behaviour(Behaviour::DropReusedConnections);
    let mut stream = handed.connect();
    send(&mut stream, "GET", "/a", &[]).await;
    assert_eq!(read_reply(&mut stream, false).await.body, b"aaa");
    send(&mut stream, "GET", "/a", &[]).await;
    assert_eq!(read_until_closed(&mut stream).await, (Vec::new(), false));

    handed.up.set_behaviour(Behaviour::BlackHole);
    let mut stream = handed.connect();
    send(&mut stream, "GET", "/a", &[]).await;
    assert_silent(&mut stream, Duration::from_millis(100)).await;
    assert_eq!((handed.up.requests(), handed.up.accepted(), handed.up.open_connections()), (3, 2, 1));
    drop(handed.up);
    let (bytes, _) = timeout(Duration::from_secs(2), read_until_closed(&mut stream)).await.unwrap();
    assert!(bytes.is_empty(), "dropping the upstream closed the black hole's connection");
}
