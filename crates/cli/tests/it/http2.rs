//! HTTP/2 on the proxy port, as curl (cargo's HTTP library) speaks it:
//! with prior knowledge, after an `Upgrade: h2c` on a plain connection
//! (cargo's way over `http://`), and over TLS by ALPN. Many requests share
//! one connection, answered as over HTTP/1.1: from the cache, saying so.

use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use pkgproxy_metrics::ClientCounter;
use pkgproxy_testkit::client::{connect, connect_from, first_status, raw_until_closed, send, tls_raw};
use pkgproxy_testkit::{CrateVersion, FakeCrates, GoModules, Origin};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::inproc::Server;

/// What curl printed: the heads it got (`-D -` before the body), one
/// status line per answer, and the bodies.
struct Curled {
    heads: String,
    bodies: Vec<u8>,
}

/// curl with `args`, then each URL; the heads and bodies it printed.
fn curl(args: &[&str], urls: &[String]) -> Curled {
    let heads = tempfile::NamedTempFile::new().unwrap();
    let output =
        Command::new("curl").args(["-sS", "-D"]).arg(heads.path()).args(args).args(urls).output().expect("curl runs");
    assert!(output.status.success(), "curl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    Curled { heads: std::fs::read_to_string(heads.path()).unwrap(), bodies: output.stdout }
}

/// The status lines of `heads`.
fn status_lines(heads: &str) -> Vec<&str> {
    heads.lines().filter(|line| line.starts_with("HTTP/")).map(str::trim_end).collect()
}

/// A go module's files served through pkgproxy, fetched once over
/// HTTP/1.1 (so every later answer is a hit); their URLs and bytes.
async fn warmed() -> (Origin, Server, Vec<String>, Vec<u8>) {
    let modules = GoModules::standard();
    let origin = Origin::serve(modules.root()).await;
    let server = Server::start(Some(&format!("[go]\nproxies = [\"{}\"]\n", origin.url()))).await;
    let files = ["@v/list", "@v/v1.0.0.info", "@v/v1.0.0.mod"];
    let urls: Vec<String> =
        files.iter().map(|file| format!("http://{}/go/example.com/hello/{file}", server.proxy_addr())).collect();
    let bodies: Vec<u8> = files
        .iter()
        .flat_map(|file| std::fs::read(modules.root().join("example.com/hello").join(file)).unwrap())
        .collect();
    let first = curl(&["--http1.1"], &urls);
    assert!(first.bodies == bodies);
    (origin, server, urls, bodies)
}

#[tokio::test(flavor = "multi_thread")]
async fn curl_speaks_http2_with_prior_knowledge_and_gets_hits() {
    let (origin, _server, urls, bodies) = warmed().await;
    let asked = origin.requests().len();
    // One URL a run: Debian's curl 7.88 fails to reuse a connection it
    // opened with prior knowledge (against nginx too).
    let curled: Vec<Curled> =
        urls.iter().map(|url| curl(&["--http2-prior-knowledge"], std::slice::from_ref(url))).collect();
    assert!(curled.iter().flat_map(|c| c.bodies.clone()).collect::<Vec<u8>>() == bodies, "the same bytes over HTTP/2");
    for curled in &curled {
        assert_eq!(status_lines(&curled.heads), ["HTTP/2 200"], "{}", curled.heads);
        assert!(curled.heads.contains("x-pkgproxy-cache: hit"), "{}", curled.heads);
    }
    assert_eq!(origin.requests().len(), asked, "nothing asked upstream");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_h2c_upgrade_is_answered_in_http2_and_the_connection_carries_the_rest() {
    let (_origin, _server, urls, bodies) = warmed().await;
    let curled = curl(&["--http2"], &urls);
    assert!(curled.bodies == bodies, "the same bytes after the upgrade");
    let statuses = status_lines(&curled.heads);
    assert_eq!(statuses, ["HTTP/1.1 101 Switching Protocols", "HTTP/2 200", "HTTP/2 200", "HTTP/2 200"]);
    assert_eq!(curled.heads.matches("x-pkgproxy-cache: hit").count(), 3, "{}", curled.heads);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_with_a_body_is_answered_in_http1() {
    let (_origin, _server, urls, _bodies) = warmed().await;
    // Its body would have to come before HTTP/2 could start: the upgrade
    // is declined, as a server without HTTP/2 would, and the go side
    // answers the POST it does not take.
    let posted = curl(&["--http2", "--data", "x"], &urls[..1]);
    assert_eq!(status_lines(&posted.heads), ["HTTP/1.1 405 Method Not Allowed"], "{}", posted.heads);
}

#[tokio::test(flavor = "multi_thread")]
async fn over_tls_alpn_chooses_http2() {
    let (_origin, server, urls, bodies) = warmed().await;
    let tls: Vec<String> = urls.iter().map(|url| url.replacen("http://", "https://", 1)).collect();
    let curled = curl(&["--http2", "-k"], &tls);
    assert!(curled.bodies == bodies);
    assert_eq!(status_lines(&curled.heads), ["HTTP/2 200"; 3], "{}", curled.heads);
    let old = curl(&["--http1.1", "-k"], &tls[..1]);
    assert_eq!(status_lines(&old.heads), ["HTTP/1.1 200 OK"], "a client without HTTP/2 keeps HTTP/1.1");
    drop(server);
}

/// How long a test waits for what should come at once.
const PROMPTLY: Duration = Duration::from_secs(10);

/// A crate of 2 MiB or so pkgproxy holds (fetched once over HTTP/1.1),
/// with `server` as the lines of its `[server]` section; the crate's path
/// and length.
async fn held_crate(server: &str) -> (FakeCrates, Server, String, usize) {
    let large = CrateVersion::build("large", "1.0.0", &[], 4 * 1024 * 1024);
    let fake = FakeCrates::start(std::slice::from_ref(&large)).await;
    let server = Server::start(Some(&format!("{}[server]\n{server}", fake.config()))).await;
    // Fetched from another client's address: the test's own client
    // (127.0.0.1) then starts with every place of its budget free, however
    // late pkgproxy sees these connections end.
    let path = format!("/cargo/crates/large/1.0.0/{}", large.sha256);
    for (path, wanted) in [("/cargo/index/config.json", &b""[..]), (path.as_str(), &large.bytes[..])] {
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let elsewhere = connect_from("127.0.0.2".parse().unwrap(), server.proxy_addr()).await;
        let (answer, closed) = raw_until_closed(elsewhere, request.as_bytes(), PROMPTLY).await;
        assert!(closed && first_status(&answer) == 200 && answer.ends_with(wanted), "held: {path}");
    }
    (fake, server, path, large.bytes.len())
}

/// Only plain HTTP/1.1 answers are sent by the kernel: over HTTP/2 (with
/// prior knowledge, after an h2c upgrade, or by ALPN) a body is framed,
/// and over TLS it is encrypted, in user space. None of those may count
/// as sent by the kernel; the same hit over plain HTTP/1.1 does, whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_hit_is_sent_by_the_kernel_over_plain_http1_only() {
    let (_fake, server, path, len) = held_crate("").await;
    let kernel_sent = || async { server.info().await.clients.get(ClientCounter::KernelSentBytes) };
    let plain = format!("http://{}{path}", server.proxy_addr());
    let secure = format!("https://{}{path}", server.proxy_addr());
    let before = kernel_sent().await;
    let copied: [(&[&str], &String); 4] = [
        (&["--http2-prior-knowledge"], &plain),
        (&["--http2"], &plain),
        (&["--http2", "-k"], &secure),
        (&["--http1.1", "-k"], &secure),
    ];
    for (args, url) in copied {
        assert_eq!(curl(args, std::slice::from_ref(url)).bodies.len(), len, "{args:?} {url}");
        assert_eq!(kernel_sent().await, before, "{args:?} {url}: copied, not sent by the kernel");
    }
    assert_eq!(curl(&["--http1.1"], std::slice::from_ref(&plain)).bodies.len(), len);
    assert_eq!(kernel_sent().await - before, len as u64, "plain HTTP/1.1: the whole body sent by the kernel");
}

/// An HTTP/2 connection (prior knowledge) whose client never opens a
/// stream's window (`SETTINGS_INITIAL_WINDOW_SIZE` 0): pkgproxy may send
/// it heads, never a body's byte.
struct Unread {
    /// Each stream's status, or the reset that refused it.
    answers: Vec<Result<u16, Option<h2::Reason>>>,
    /// The bodies, never read.
    _bodies: Vec<h2::RecvStream>,
    /// The connection; it ends when pkgproxy closes it.
    connection: tokio::task::JoinHandle<Result<(), h2::Error>>,
    /// Asks more on the same connection.
    _client: h2::client::SendRequest<Bytes>,
}

impl Unread {
    /// Asks for `path` `streams` times at once, before pkgproxy's settings
    /// are read (so none is held back by its stream limit), and waits for
    /// every answer's head or reset.
    async fn open(addr: &str, path: &str, streams: usize) -> Unread {
        let tcp = connect(addr).await;
        let (mut client, connection) =
            h2::client::Builder::new().initial_window_size(0).handshake::<_, Bytes>(tcp).await.unwrap();
        let asked: Vec<h2::client::ResponseFuture> = (0..streams)
            .map(|_| {
                let request = http::Request::get(format!("http://{addr}{path}")).body(()).unwrap();
                client.send_request(request, true).expect("a stream opened").0
            })
            .collect();
        let connection = tokio::spawn(connection);
        let (mut answers, mut bodies) = (Vec::new(), Vec::new());
        for answer in asked {
            match tokio::time::timeout(PROMPTLY, answer).await.expect("a head or a reset, at once") {
                Ok(response) => {
                    answers.push(Ok(response.status().as_u16()));
                    bodies.push(response.into_body());
                }
                Err(error) => answers.push(Err(error.reason())),
            }
        }
        Unread { answers, _bodies: bodies, connection, _client: client }
    }

    /// How many streams were answered with `status`.
    fn answered(&self, status: u16) -> usize {
        self.answers.iter().filter(|answer| **answer == Ok(status)).count()
    }
}

/// Opens `streams` streams at once on one HTTP/2 connection whose client
/// shuts every stream's window, written as raw frames: a library client
/// keeps to pkgproxy's stream limit once it has read it, a hostile one
/// need not. How many streams got an answer's head, and how many were
/// refused (`REFUSED_STREAM`).
async fn raw_streams(addr: &str, path: &str, streams: u32) -> (usize, usize) {
    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut frame = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        frame.extend_from_slice(&[kind, flags]);
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        frame
    }
    let mut block = Vec::new();
    for (name, value) in [(":method", "GET"), (":scheme", "http"), (":authority", addr), (":path", path)] {
        // A literal field without indexing, its name a literal too.
        block.extend_from_slice(&[0, name.len() as u8]);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    const SETTINGS: u8 = 4;
    const INITIAL_WINDOW_SIZE: [u8; 6] = [0, 4, 0, 0, 0, 0];
    let mut sent = PREFACE_BYTES.to_vec();
    sent.extend(frame(SETTINGS, 0, 0, &INITIAL_WINDOW_SIZE));
    sent.extend(frame(SETTINGS, 1, 0, &[]));
    for stream in 0..streams {
        const HEADERS: u8 = 1;
        const END_STREAM_AND_HEADERS: u8 = 0x5;
        sent.extend(frame(HEADERS, END_STREAM_AND_HEADERS, 2 * stream + 1, &block));
    }
    let mut socket = connect(addr).await;
    socket.write_all(&sent).await.unwrap();
    let (mut answered, mut refused) = (std::collections::HashSet::new(), 0);
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    while answered.len() + refused < streams as usize {
        let mut buf = [0u8; 16 * 1024];
        let n = match tokio::time::timeout_at(deadline, socket.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => break,
        };
        got.extend_from_slice(&buf[..n]);
        while got.len() >= 9 {
            let length = u32::from_be_bytes([0, got[0], got[1], got[2]]) as usize;
            if got.len() < 9 + length {
                break;
            }
            let (kind, stream) = (got[3], u32::from_be_bytes([got[5], got[6], got[7], got[8]]) & 0x7fff_ffff);
            const REFUSED_STREAM: [u8; 4] = [0, 0, 0, 7];
            match kind {
                1 => _ = answered.insert(stream),
                3 if got[9..9 + length] == REFUSED_STREAM => refused += 1,
                _ => {}
            }
            got.drain(..9 + length);
        }
    }
    (answered.len(), refused)
}

/// What an HTTP/2 connection opens with.
const PREFACE_BYTES: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[tokio::test(flavor = "multi_thread")]
async fn streams_over_a_connection_s_limit_are_refused() {
    let (_fake, server, path, _) = held_crate("").await;
    let (answered, refused) = raw_streams(server.proxy_addr(), &path, 150).await;
    assert_eq!((answered, refused), (100, 50), "answered, refused");
}

#[tokio::test(flavor = "multi_thread")]
async fn open_streams_count_against_the_client_s_connection_budget() {
    let (_fake, server, path, _) = held_crate("max_connections_per_client = 30\n").await;
    let addr = server.proxy_addr().to_owned();
    // One place for the connection, one for each stream being answered.
    let first = Unread::open(&addr, &path, 20).await;
    assert_eq!(first.answered(200), 20, "{:?}", first.answers);
    let second = Unread::open(&addr, &path, 20).await;
    assert_eq!((second.answered(200), second.answered(503)), (8, 12), "{:?}", second.answers);
    // Every place is taken: a new connection from the address is refused,
    // another address is served.
    let localhost = "127.0.0.1".parse().unwrap();
    assert_eq!(status_of_a_new_connection(&addr, localhost).await, 503);
    assert_eq!(status_of_a_new_connection(&addr, "127.0.0.2".parse().unwrap()).await, 200);
    drop((first, second));
    pkgproxy_testkit::eventually("the streams' places given back", || async {
        (status_of_a_new_connection(&addr, localhost).await == 200).then_some(())
    })
    .await;
}

/// The status pkgproxy at `addr` answers a `GET /` on a new connection
/// from `from` with (a refused connection is answered before its request
/// is read).
async fn status_of_a_new_connection(addr: &str, from: std::net::IpAddr) -> u16 {
    let request = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let (answer, _) = raw_until_closed(connect_from(from, addr).await, request, PROMPTLY).await;
    first_status(&answer)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_whose_windows_stay_shut_is_closed_after_the_send_timeout() {
    let (_fake, server, path, _) = held_crate("send_timeout = \"1s\"\nmax_connections_per_client = 11\n").await;
    let unread = Unread::open(server.proxy_addr(), &path, 10).await;
    assert_eq!(unread.answered(200), 10, "{:?}", unread.answers);
    let localhost = "127.0.0.1".parse().unwrap();
    assert_eq!(status_of_a_new_connection(server.proxy_addr(), localhost).await, 503, "its streams hold every place");
    let ended = tokio::time::timeout(PROMPTLY, unread.connection).await;
    assert!(ended.is_ok(), "the stalled connection is still open after {PROMPTLY:?}");
    pkgproxy_testkit::eventually("the places given back", || async {
        (status_of_a_new_connection(server.proxy_addr(), localhost).await == 200).then_some(())
    })
    .await;
    pkgproxy_testkit::eventually("the send timeout counted", || async {
        (server.info().await.clients.get(ClientCounter::SendTimeouts) == 1).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_client_whose_window_keeps_opening_outlives_the_send_timeout() {
    const WINDOW: u32 = 256 * 1024;
    let (_fake, server, path, length) = held_crate("send_timeout = \"1s\"\n").await;
    let tcp = connect(server.proxy_addr()).await;
    let (mut client, connection) = h2::client::Builder::new()
        .initial_window_size(WINDOW)
        .initial_connection_window_size(WINDOW)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = http::Request::get(format!("http://{}{path}", server.proxy_addr())).body(()).unwrap();
    let response = client.send_request(request, true).unwrap().0.await.unwrap();
    assert_eq!(response.status(), 200);
    let started = std::time::Instant::now();
    let mut body = response.into_body();
    let (mut received, mut windows) = (0, 0);
    while let Some(data) = body.data().await {
        let data = data.expect("not cut");
        received += data.len();
        // Each window taken, a pause: nothing moves, but not for long.
        if received / WINDOW as usize > windows {
            windows = received / WINDOW as usize;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        body.flow_control().release_capacity(data.len()).unwrap();
    }
    assert_eq!(received, length, "the whole crate");
    assert!(started.elapsed() > Duration::from_secs(2), "longer than the timeout: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn over_tls_an_h2c_upgrade_is_answered_in_http1() {
    let (_origin, server, urls, _bodies) = warmed().await;
    let addr = server.proxy_addr();
    let pem = send(addr, "GET", "/pkgproxy/v1/certificate.pem", &[], b"").await;
    let pem = String::from_utf8(pem.body.to_vec()).unwrap();
    let path = urls[0].trim_start_matches(&format!("http://{addr}")).to_owned();
    // h2c is HTTP/2 in clear (RFC 9113 §3.1): inside TLS, HTTP/2 comes by
    // ALPN alone, and an `Upgrade: h2c` is ignored.
    let raw = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\n\
         HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
    );
    let (answer, alpn) = tls_raw(addr, &pem, "localhost", &["http/1.1"], raw.as_bytes(), PROMPTLY).await;
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    // A preface after ALPN chose HTTP/1.1 is not HTTP/2 either.
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    let (answer, _) = tls_raw(addr, &pem, "localhost", &["http/1.1"], preface, PROMPTLY).await;
    assert!(!answer.starts_with(&[0, 0]), "no HTTP/2 frame: {:?}", String::from_utf8_lossy(&answer));
}
