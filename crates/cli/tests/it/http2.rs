//! HTTP/2 on the proxy port, as curl (cargo's HTTP library) speaks it:
//! with prior knowledge, after an `Upgrade: h2c` on a plain connection
//! (cargo's way over `http://`), and over TLS by ALPN. Many requests share
//! one connection, answered as over HTTP/1.1: from the cache, saying so.

use std::process::Command;

use pkgproxy_testkit::{GoModules, Origin};

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
