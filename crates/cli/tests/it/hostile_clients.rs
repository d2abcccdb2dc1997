//! Clients that misbehave, against the real daemon: connections that never
//! finish a request's head are let go while others are served; oversized
//! heads and targets and smuggling-shaped bodies are refused with the
//! connection closed; one address cannot take every connection; and an
//! address outside `[server] allow` is refused.

use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::PKGPROXY;
use pkgproxy_metrics::ClientCounter;
use pkgproxy_testkit::client::{connect, connect_from, first_status, get, raw_until_closed};
use pkgproxy_testkit::Daemon;

/// How long a test waits for an answer that should come at once.
const PROMPTLY: Duration = Duration::from_secs(10);

fn other_client() -> IpAddr {
    "127.0.0.2".parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_that_never_finish_a_head_are_let_go_and_others_are_served_throughout() {
    let config = "[server]\nheader_read_timeout = \"1s\"\n";
    let daemon = Daemon::start(PKGPROXY, Some(config)).await;
    let mut slow = Vec::new();
    for _ in 0..200 {
        let mut stream = connect(daemon.proxy_addr()).await;
        stream.write_all(b"GET /go/example.com/m/@v/li").await.unwrap();
        slow.push(stream);
    }
    // Served while they hang.
    assert_eq!(get(daemon.proxy_addr(), "/").await.status, 200);
    for stream in &mut slow {
        let mut buf = [0u8; 1024];
        let read = tokio::time::timeout(PROMPTLY, stream.read(&mut buf)).await.expect("closed, not held");
        assert!(matches!(read, Ok(0) | Err(_)), "closed without an answer: {read:?}");
    }
    assert_eq!(get(daemon.proxy_addr(), "/").await.status, 200, "and after");
    let info = daemon.info().await;
    assert!(info.clients.get(ClientCounter::HeaderTimeouts) >= 200, "{:?}", info.clients);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_head_a_long_target_and_a_transfer_encoding_are_refused_and_the_connection_closed() {
    let daemon = Daemon::start(PKGPROXY, None).await;
    let big_header = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(200 * 1024));
    let long_target = format!("GET /go/{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(9 * 1024));
    let smuggled = "POST /snap/v2/snaps/refresh HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let bad_encoding =
        "POST /snap/v2/snaps/refresh HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked, identity\r\n\r\n";
    for (raw, status) in [(big_header.as_str(), 431), (long_target.as_str(), 414), (smuggled, 400), (bad_encoding, 400)]
    {
        let (answer, closed) = raw_until_closed(connect(daemon.proxy_addr()).await, raw.as_bytes(), PROMPTLY).await;
        assert_eq!(first_status(&answer), status, "{}", String::from_utf8_lossy(&answer));
        assert!(closed, "the connection is closed after the {status}");
        let text = String::from_utf8_lossy(&answer);
        assert_eq!(text.matches("HTTP/1.1 ").count(), 1, "nothing answered after it: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_address_cannot_take_every_connection() {
    let daemon = Daemon::start(PKGPROXY, None).await;
    let mut held = Vec::new();
    for _ in 0..512 {
        held.push(connect(daemon.proxy_addr()).await);
    }
    pkgproxy_testkit::eventually("the 512 connections admitted", || async {
        (daemon.info().await.connections_open >= 512).then_some(())
    })
    .await;
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let (answer, closed) = raw_until_closed(connect(daemon.proxy_addr()).await, request, PROMPTLY).await;
    assert_eq!(first_status(&answer), 503, "{}", String::from_utf8_lossy(&answer));
    assert!(String::from_utf8_lossy(&answer).contains("Retry-After: 1"));
    assert!(closed);
    let other = connect_from(other_client(), daemon.proxy_addr()).await;
    let (answer, _) = raw_until_closed(other, request, Duration::from_secs(2)).await;
    assert_eq!(first_status(&answer), 200, "another address is served");

    // A held connection still works: nothing was cut to make room.
    let mut first = held.swap_remove(0);
    first.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PROMPTLY, first.read_to_end(&mut answer)).await.unwrap().unwrap();
    assert_eq!(first_status(&answer), 200);
    let info = daemon.info().await;
    assert_eq!(info.clients.get(ClientCounter::RefusedClientFull), 1, "{:?}", info.clients);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_address_outside_allow_is_refused() {
    let daemon = Daemon::start(PKGPROXY, Some("[server]\nallow = [\"127.0.0.1/32\"]\n")).await;
    let request = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let outside = connect_from(other_client(), daemon.proxy_addr()).await;
    let (answer, closed) = raw_until_closed(outside, request, PROMPTLY).await;
    assert_eq!(first_status(&answer), 403, "{}", String::from_utf8_lossy(&answer));
    assert!(String::from_utf8_lossy(&answer).contains("[server] allow"));
    assert!(closed);
    let (answer, _) = raw_until_closed(connect(daemon.proxy_addr()).await, request, PROMPTLY).await;
    assert_eq!(first_status(&answer), 200);
    assert_eq!(daemon.info().await.clients.get(ClientCounter::RefusedNotAllowed), 1);
}

/// RFC 9112 §3.2: two `Host` headers, or none on HTTP/1.1, is a `400`; an
/// HTTP/1.0 request, which has no `Host` to give, is served.
#[tokio::test(flavor = "multi_thread")]
async fn two_host_headers_or_none_on_http_1_1_are_a_400() {
    let daemon = Daemon::start(PKGPROXY, None).await;
    for (raw, status) in [
        ("GET /v2/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        ("GET /v2/ HTTP/1.1\r\n\r\n", 400),
        ("GET /v2/ HTTP/1.0\r\n\r\n", 200),
        ("GET /v2/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 200),
    ] {
        let (answer, _) = raw_until_closed(connect(daemon.proxy_addr()).await, raw.as_bytes(), PROMPTLY).await;
        assert_eq!(first_status(&answer), status, "{raw:?}: {}", String::from_utf8_lossy(&answer));
    }
}
