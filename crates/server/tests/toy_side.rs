//! A side added with only its folder, its variant, its entry in the list of
//! sides and its route line (the `toy` feature builds it) serves a cached
//! file end to end, checked by its fetching role and rewritten by its
//! rewriting role: this test is built with it, so a server that named
//! every side itself, or a role by side, would not compile.

use std::sync::Arc;
use std::time::SystemTime;

use pkgproxy_cache::ManualClock;
use pkgproxy_server::config::{ConfigFile, Overrides};
use pkgproxy_server::{Listeners, Settings};
use pkgproxy_testkit::client::get;
use pkgproxy_testkit::Origin;

/// Lower-case hex SHA-256 of `bytes`, as a mirror publishes it.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_side_that_is_only_its_folder_serves_a_cached_file_and_asks_the_origin_once() {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("hello.txt"), "hello from the toy origin\n").unwrap();
    let checked = b"a file its mirror publishes a checksum for\n";
    std::fs::write(files.path().join("checked.txt"), checked).unwrap();
    std::fs::write(files.path().join("checked.txt.sha256"), format!("{}  checked.txt\n", sha256_hex(checked))).unwrap();
    std::fs::write(files.path().join("lying.txt"), "not the bytes the checksum is of\n").unwrap();
    std::fs::write(files.path().join("lying.txt.sha256"), format!("{}  lying.txt\n", sha256_hex(b"other"))).unwrap();
    std::fs::write(files.path().join("here.link"), "fetch it from @PKGPROXY@/hello.txt\n").unwrap();
    let origin = Origin::serve(files.path()).await;

    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::parse(&format!("[toy]\nmirrors = [\"{}\"]\n", origin.url())).unwrap();
    // The test machine's disk, short of free space, must not evict what
    // the test cached.
    let overrides = Overrides { cache_min_free: Some("0".to_string()), ..Overrides::default() };
    let mut settings = Settings::new(dir.path().join("cache"), &file, &overrides).unwrap();
    settings.clock = Arc::new(ManualClock::new(SystemTime::now()));
    settings.proxy_threads = 1;
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    proxy.set_nonblocking(true).unwrap();
    let addr = proxy.local_addr().unwrap().to_string();
    let listeners = Listeners {
        proxy,
        stats: tokio::net::UnixListener::bind(dir.path().join("stats.sock")).unwrap(),
        admin: tokio::net::UnixListener::bind(dir.path().join("admin.sock")).unwrap(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let server = tokio::spawn(pkgproxy_server::run(settings, listeners, shutdown, |_| {}));

    let first = pkgproxy_testkit::eventually("the toy side to answer", || async {
        let answer = get(&addr, "/toy/hello.txt").await;
        (answer.status == 200).then_some(answer)
    })
    .await;
    assert_eq!(first.body.as_ref(), b"hello from the toy origin\n");
    assert_eq!(first.header("x-pkgproxy-cache"), Some("miss"));
    let second = get(&addr, "/toy/hello.txt").await;
    assert_eq!((second.status, second.header("x-pkgproxy-cache")), (200, Some("hit")));
    assert_eq!(second.body, first.body);
    assert_eq!(origin.count(|asked| asked.path == "/hello.txt"), 1, "the origin is asked once");
    let refused = get(&addr, "/toy/%2e%2e/etc/passwd").await;
    assert_eq!(refused.status, 400, "a path that climbs out is refused");

    // The fetching role: the checksum beside a file is fetched first, and
    // a file that does not match it is never served nor kept.
    let good = get(&addr, "/toy/checked.txt").await;
    assert_eq!((good.status, good.body.as_ref()), (200, &checked[..]));
    assert_eq!(origin.count_path("/checked.txt.sha256"), 1, "the checksum is fetched first");
    for _ in 0..2 {
        let lying = get(&addr, "/toy/lying.txt").await;
        assert_eq!(lying.status, 502, "a body that does not match its checksum is refused");
        assert!(!lying.body.starts_with(b"not the bytes"), "nothing of it reaches the client");
    }
    assert_eq!(origin.count(|asked| asked.path == "/lying.txt"), 2, "nothing of a refused body is kept");

    // The rewriting role: a `.link` file names pkgproxy as this client
    // reached it, and the cache keeps the mirror's bytes.
    let link = get(&addr, "/toy/here.link").await;
    assert_eq!(link.status, 200);
    assert_eq!(std::str::from_utf8(&link.body).unwrap(), format!("fetch it from http://{addr}/toy/hello.txt\n"));
    let again = get(&addr, "/toy/here.link").await;
    assert_eq!((again.header("x-pkgproxy-cache"), again.body.clone()), (Some("hit"), link.body.clone()));

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
