//! A side added with only its folder, its variant, its entry in the list of
//! sides and its route line (the `toy` feature builds it) serves a cached
//! file end to end: this test is built with it, so a server that named
//! every side itself would not compile.

use std::sync::Arc;
use std::time::SystemTime;

use pkgproxy_cache::ManualClock;
use pkgproxy_server::config::{ConfigFile, Overrides};
use pkgproxy_server::{Listeners, Settings};
use pkgproxy_testkit::client::get;
use pkgproxy_testkit::Origin;

#[tokio::test(flavor = "multi_thread")]
async fn a_side_that_is_only_its_folder_serves_a_cached_file_and_asks_the_origin_once() {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("hello.txt"), "hello from the toy origin\n").unwrap();
    let origin = Origin::serve(files.path()).await;

    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::parse(&format!("[toy]\nmirrors = [\"{}\"]\n", origin.url())).unwrap();
    let mut settings = Settings::new(dir.path().join("cache"), &file, &Overrides::default()).unwrap();
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
    assert_eq!(origin.count_path("/hello.txt"), 1, "the origin is asked once");
    let refused = get(&addr, "/toy/%2e%2e/etc/passwd").await;
    assert!(refused.status >= 400, "{}", refused.status);

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
