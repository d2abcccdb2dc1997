//! Request bodies pkgproxy passes on to an upstream (an npm publish, the
//! registry's `/-/` API): streamed as the client sends them, not held
//! whole first, with the side's limit applied as they pass.

// The test's own upstream listens on 127.0.0.1, and its client connects
// to pkgproxy as npm would.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::inproc::Server;

/// How long a test waits for what should come at once.
const PROMPTLY: Duration = Duration::from_secs(10);

/// What the upstream saw of the one request it was sent.
#[derive(Debug)]
struct Received {
    /// The request's head.
    head: String,
    /// How many body bytes came.
    body_len: usize,
}

/// An npm registry that takes one `PUT`, says when its body's first bytes
/// arrive, reads the rest (as many bytes as its `Content-Length` says) and
/// answers `201`.
struct Upstream {
    url: String,
    first_bytes: oneshot::Receiver<()>,
    received: mpsc::Receiver<Received>,
}

impl Upstream {
    async fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (first_tx, first_bytes) = oneshot::channel();
        let (received_tx, received) = mpsc::channel(1);
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0; 64 * 1024];
            let head_end = loop {
                if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                    break end + 4;
                }
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed before the head ended");
                got.extend_from_slice(&buf[..n]);
            };
            let head = String::from_utf8_lossy(&got[..head_end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .and_then(|value| value.parse().ok())
                .unwrap_or(0);
            let mut body_len = got.len() - head_end;
            let mut first = Some(first_tx);
            while body_len < length {
                if body_len > 0 {
                    first.take().map(|first| first.send(()));
                }
                let n = stream.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                body_len += n;
            }
            stream.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n").await.unwrap();
            received_tx.send(Received { head, body_len }).await.unwrap();
        });
        Upstream { url, first_bytes, received }
    }
}

/// pkgproxy's npm side in front of `upstream`, with `more` configuration.
async fn npm_in_front_of(upstream: &Upstream, more: &str) -> Server {
    Server::start(Some(&format!("[npm]\nmirrors = [\"{}\"]\n{more}", upstream.url))).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_publish_reaches_the_registry_as_the_client_sends_it() {
    const LENGTH: usize = 8 * 1024 * 1024;
    let mut upstream = Upstream::start().await;
    let server = npm_in_front_of(&upstream, "").await;
    let mut client = TcpStream::connect(server.proxy_addr()).await.unwrap();
    let head = format!(
        "PUT /npm/big-package HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {LENGTH}\r\n\r\n"
    );
    client.write_all(head.as_bytes()).await.unwrap();
    let part = vec![b'x'; 1024 * 1024];
    client.write_all(&part).await.unwrap();
    // The registry has the first bytes while the client holds back the
    // rest: nothing waits for the whole body.
    let first = tokio::time::timeout(PROMPTLY, &mut upstream.first_bytes).await;
    assert!(first.is_ok(), "the registry got nothing before the client sent its last byte");
    for _ in 1..LENGTH / part.len() {
        client.write_all(&part).await.unwrap();
    }
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(PROMPTLY, client.read(&mut answer)).await.expect("an answer").unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let received = upstream.received.recv().await.unwrap();
    assert_eq!(received.body_len, LENGTH, "the whole body");
    let head = received.head.to_ascii_lowercase();
    assert!(head.starts_with("put /big-package http/1.1"), "{head}");
    assert!(head.contains(&format!("content-length: {LENGTH}")), "sent with its length: {head}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_announced_over_the_limit_is_refused_at_once_and_nothing_is_sent() {
    let mut upstream = Upstream::start().await;
    let server = npm_in_front_of(&upstream, "").await;
    let mut client = TcpStream::connect(server.proxy_addr()).await.unwrap();
    let head =
        "PUT /npm/huge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 300000000\r\n\r\n";
    client.write_all(head.as_bytes()).await.unwrap();
    client.write_all(&[b'x'; 64 * 1024]).await.unwrap();
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(PROMPTLY, client.read(&mut answer)).await.expect("an answer at once").unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("larger than the 268435456 bytes"), "says why: {answer}");
    assert!(upstream.received.try_recv().is_err(), "nothing sent to the registry");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_slower_than_the_wait_for_an_answer_is_not_cut_while_it_passes() {
    const LENGTH: usize = 4 * 1024 * 1024;
    let mut upstream = Upstream::start().await;
    let timeouts = "[upstream]\nfirst_byte_timeout = \"1s\"\nretry_timeout = \"1s\"\n";
    let server = npm_in_front_of(&upstream, timeouts).await;
    let mut client = TcpStream::connect(server.proxy_addr()).await.unwrap();
    let head = format!("PUT /npm/slow HTTP/1.1\r\nHost: x\r\nContent-Length: {LENGTH}\r\n\r\n");
    client.write_all(head.as_bytes()).await.unwrap();
    // Three seconds of upload: the answer's wait runs from its last byte.
    let part = vec![b'x'; LENGTH / 8];
    for _ in 0..8 {
        client.write_all(&part).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(PROMPTLY, client.read(&mut answer)).await.expect("an answer").unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(upstream.received.recv().await.unwrap().body_len, LENGTH);
}
