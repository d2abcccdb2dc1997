//! Mirrors end to end: the real daemon copying apt traffic to recording
//! shadow targets on 127.0.0.1 (one that answers, one that answers 500, a
//! black hole, an unbound port) and to a second pkgproxy.

// The test is the proxy's client; the one-way-out rule is about the daemon.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use crate::common::{archive, revalidating_at_once, Inspected, PKGPROXY};
use crate::inproc::Server;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use pkgproxy_control::ShadowInfo;
use pkgproxy_metrics::{ShadowCounter, UpstreamCounter};
use pkgproxy_testkit::client::{first_status, proxy_get, raw_exchange};
use pkgproxy_testkit::{eventually, AptRepo, Daemon, Origin, RefusingPort, ShadowMode, ShadowRecorder};

const WAIT: Duration = Duration::from_secs(10);

fn config(origin: &Origin, mirrors: &str) -> String {
    revalidating_at_once(&format!("{}\n{mirrors}", archive("local", &[format!("{}/debian", origin.url())])))
}

fn mirror_section(name: &str, target: &str, extra: &str) -> String {
    format!("[mirror.{name}]\ntarget = {target:?}\n{extra}\n")
}

async fn mirror_counters(daemon: &impl Inspected, name: &str) -> ShadowInfo {
    let info = daemon.info().await;
    info.mirrors.into_iter().find(|m| m.name == name).expect("the mirror is shown")
}

/// Polls the daemon's counters of `name` until `done` holds them.
async fn counters_until(daemon: &impl Inspected, name: &str, done: impl Fn(&ShadowInfo) -> bool) -> ShadowInfo {
    let counted = || async { Some(mirror_counters(daemon, name).await).filter(|counters| done(counters)) };
    eventually(&format!("the counters of mirror {name}"), counted).await
}

async fn setup(mirrors: impl FnOnce(&Origin) -> String) -> (&'static AptRepo, Origin, Daemon) {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let daemon = Daemon::start(PKGPROXY, Some(&config(&origin, &mirrors(&origin)))).await;
    (repo, origin, daemon)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_copy_carries_the_request_line_end_to_end_headers_the_client_and_the_body() {
    let shadow = ShadowRecorder::start(ShadowMode::Answer(200)).await;
    let extra = "methods = [\"GET\", \"POST\"]\nmax_body_size = \"64kb\"";
    let (_, origin, daemon) = setup(|_| mirror_section("shadow", &shadow.url(), extra)).await;
    let url = format!("{}/debian/dists/testing/InRelease?probe=1", origin.url());
    let headers = [
        ("authorization", "Bearer secret"),
        ("cookie", "session=1"),
        ("x-forwarded-for", "10.1.2.3"),
        ("connection", "keep-alive, x-hop"),
        ("x-hop", "1"),
        ("user-agent", "Debian APT-HTTP/1.3 (2.6.1)"),
    ];
    assert_eq!(proxy_get(daemon.proxy_addr(), &url, &headers).await.status, 200);
    shadow.wait_for(1).await;
    let copy = &shadow.hits()[0];
    assert_eq!(copy.method, "GET");
    assert_eq!(copy.target, url, "a proxy request with the absolute URI apt asked for, query included");
    assert_eq!(copy.header("host"), Some(origin.url().trim_start_matches("http://")));
    assert_eq!(copy.header("authorization"), Some("Bearer secret"));
    assert_eq!(copy.header("cookie"), Some("session=1"));
    assert_eq!(copy.header("user-agent"), Some("Debian APT-HTTP/1.3 (2.6.1)"));
    assert_eq!(copy.header("x-hop"), None, "a header the client's Connection names is hop-by-hop");
    assert_ne!(copy.header("connection"), Some("keep-alive, x-hop"));
    assert_eq!(copy.header("x-forwarded-for"), Some("10.1.2.3, 127.0.0.1"));
    assert_eq!(copy.header("x-real-ip"), Some("127.0.0.1"));
    assert_eq!(copy.header("x-forwarded-proto"), Some("http"));
    assert_eq!(copy.header("x-pkgproxy-mirror"), Some("1"));
    assert!(copy.body.is_empty());

    let upload = format!(
        "POST {}/debian/upload HTTP/1.1\r\nHost: {}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        origin.url(),
        origin.url().trim_start_matches("http://")
    );
    let answered = raw_exchange(daemon.proxy_addr(), upload.as_bytes(), WAIT).await;
    assert_eq!(first_status(&answered), 405, "pkgproxy itself takes GET and HEAD only");
    shadow.wait_for(2).await;
    let copy = &shadow.hits()[1];
    assert_eq!((copy.method.as_str(), copy.body.as_slice()), ("POST", &b"hello"[..]));
    assert_eq!(copy.header("content-length"), Some("5"));

    let counters = counters_until(&daemon, "shadow", |c| c.get(ShadowCounter::Answered) == 2).await;
    assert_eq!((counters.get(ShadowCounter::Sent), counters.get(ShadowCounter::Answered)), (2, 2), "{counters:?}");
    assert_eq!(counters.get(ShadowCounter::Sent) as usize, shadow.count(), "the counters match what the target saw");
    let upstream = daemon.info().await.upstream;
    let copies = upstream.get(UpstreamCounter::ShadowRequests);
    assert_eq!(copies, 2, "the copies went out through the mirrors' own client: {upstream:?}");
    assert_eq!(upstream.get(UpstreamCounter::Requests), 1, "one upstream request, for the GET's miss");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_black_holed_target_holds_at_most_max_inflight_copies_and_never_the_client() {
    let shadow = ShadowRecorder::start(ShadowMode::BlackHole).await;
    let extra = "max_inflight = 4\ntimeout = \"60s\"";
    let (repo, origin, daemon) = setup(|_| mirror_section("hole", &shadow.url(), extra)).await;
    let path = repo.deb_url_path("pkgproxy-hello");
    let url = format!("{}{path}", origin.url());
    let expected = std::fs::read(repo.deb_path("pkgproxy-hello")).unwrap();
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let (proxy, url) = (daemon.proxy_addr().to_string(), url.clone());
        clients.spawn(async move { proxy_get(&proxy, &url, &[]).await });
        if clients.len() >= 10 {
            let answer = clients.join_next().await.unwrap().unwrap();
            assert_eq!((answer.status, answer.body.as_ref()), (200, expected.as_slice()));
        }
    }
    while let Some(answer) = clients.join_next().await {
        let answer = answer.unwrap();
        assert_eq!((answer.status, answer.body.as_ref()), (200, expected.as_slice()));
    }
    // Each copy's task counts itself as sent or skipped: wait for all 200.
    let settled = |c: &ShadowInfo| c.get(ShadowCounter::Sent) + c.get(ShadowCounter::SkippedInflight) == 200;
    let counters = counters_until(&daemon, "hole", settled).await;
    assert_eq!(counters.in_flight, 4, "{counters:?}");
    shadow.wait_for(4).await;
    assert_eq!(shadow.max_held(), 4, "the target never held more than max_inflight copies");
    assert_eq!(shadow.count(), 4);
    assert_eq!(counters.get(ShadowCounter::Sent), 4, "{counters:?}");
    assert_eq!(counters.get(ShadowCounter::SkippedInflight), 196, "{counters:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_request_on_a_keep_alive_connection_does_not_wait_for_the_copy_of_the_first() {
    let shadow = ShadowRecorder::start(ShadowMode::BlackHole).await;
    let (repo, origin, daemon) = setup(|_| mirror_section("hole", &shadow.url(), "timeout = \"60s\"")).await;
    let stream = tokio::net::TcpStream::connect(daemon.proxy_addr()).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    for (round, name) in ["pkgproxy-hello", "pkgproxy-big"].into_iter().enumerate() {
        let url = format!("{}{}", origin.url(), repo.deb_url_path(name));
        let request = http::Request::get(&url)
            .header("host", origin.url().trim_start_matches("http://"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        sender.ready().await.unwrap();
        let answer = sender.send_request(request).await.unwrap();
        assert_eq!(answer.status(), 200);
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.as_ref(), std::fs::read(repo.deb_path(name)).unwrap().as_slice());
        shadow.wait_for(round + 1).await;
        assert_eq!(shadow.held(), round + 1, "the copies are still held while the client goes on");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_pkgproxies_mirroring_to_each_other_pass_a_request_on_once() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    // b's port is bound before a is told of it, and stays bound.
    let listener_of_b = Server::bind();
    let to_b = mirror_section("b", &format!("http://{}", listener_of_b.local_addr().unwrap()), "");
    let a = Server::start(Some(&config(&origin, &to_b))).await;
    let to_a = mirror_section("a", &format!("http://{}", a.proxy_addr()), "");
    let b = Server::start_on(listener_of_b, Some(&config(&origin, &to_a))).await;

    let path = repo.deb_url_path("pkgproxy-hello");
    assert_eq!(proxy_get(a.proxy_addr(), &format!("{}{path}", origin.url()), &[]).await.status, 200);
    let from_a = counters_until(&a, "b", |c| c.get(ShadowCounter::Answered) == 1).await;
    assert_eq!(from_a.get(ShadowCounter::Sent), 1, "{from_a:?}");
    // b answered a's copy, so b decided on copying it back before that.
    assert_eq!(mirror_counters(&b, "a").await.get(ShadowCounter::Sent), 0, "b does not copy a copy back");
    assert_eq!(mirror_counters(&a, "b").await.get(ShadowCounter::Sent), 1);
    assert_eq!(origin.count_path(&path), 2, "a fetched it for the client, b for the copy; nothing more");
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_are_logged_on_the_first_second_and_fourth() {
    let refusing = RefusingPort::new();
    let unbound = refusing.url();
    let (repo, origin, daemon) = setup(|_| mirror_section("down", &unbound, "")).await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    for _ in 0..7 {
        assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 200);
    }
    let counters = counters_until(&daemon, "down", |c| c.get(ShadowCounter::Failed) == 7).await;
    assert_eq!((counters.get(ShadowCounter::Sent), counters.get(ShadowCounter::Failed)), (7, 7), "{counters:?}");
    let log = daemon.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("a copy to the mirror failed")).collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    for (line, count) in lines.iter().zip([1, 2, 4]) {
        assert!(line.contains(&format!("failures={count}")), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn compare_logs_a_differing_miss_and_nothing_for_hits_refusals_failures_or_revalidations() {
    let shadow = ShadowRecorder::start(ShadowMode::Answer(500)).await;
    let (repo, origin, daemon) = setup(|_| mirror_section("cmp", &shadow.url(), "compare = true")).await;
    let url = format!("{}{}?x=1", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 200, "a miss: the upstream answered 200");
    let counters = counters_until(&daemon, "cmp", |c| c.get(ShadowCounter::Compared) == 1).await;
    assert_eq!((counters.get(ShadowCounter::Compared), counters.get(ShadowCounter::Differing)), (1, 1), "{counters:?}");
    let log = daemon.log();
    let line = log.lines().find(|l| l.contains("the mirror answered with another status")).expect("a compare line");
    for part in ["method=GET", "status=200", "mirror_status=500", "skipped=0", "request_id="] {
        assert!(line.contains(part), "{part} in {line}");
    }
    assert!(line.contains(&format!("path=\"{}\"", repo.deb_url_path("pkgproxy-hello"))), "no query: {line}");

    // A hit, a refused request, an upstream that cannot be reached, and a
    // revalidation answered 304: copied, never compared.
    assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.header("x-pkgproxy-cache"), Some("hit"));
    let refused = proxy_get(daemon.proxy_addr(), &format!("{}/debian/README", origin.url()), &[]).await;
    assert_eq!(refused.status, 403);
    let release = format!("{}/debian/dists/testing/InRelease", origin.url());
    assert_eq!(proxy_get(daemon.proxy_addr(), &release, &[]).await.status, 200);
    let revalidated = proxy_get(daemon.proxy_addr(), &release, &[("cache-control", "max-age=0")]).await;
    assert_eq!(revalidated.header("x-pkgproxy-cache"), Some("revalidated"));
    let never_fetched = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-big"));
    drop(origin);
    assert_eq!(proxy_get(daemon.proxy_addr(), &never_fetched, &[]).await.status, 502, "the origin is gone");
    let counters = counters_until(&daemon, "cmp", |c| c.get(ShadowCounter::Answered) == 6).await;
    assert_eq!(counters.get(ShadowCounter::Answered), 6, "{counters:?}");
    assert_eq!(counters.get(ShadowCounter::Compared), 2, "the first miss and the InRelease miss only: {counters:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_upstream_step_copies_misses_and_revalidations_not_hits() {
    let shadow = ShadowRecorder::start(ShadowMode::Answer(200)).await;
    let (repo, origin, daemon) = setup(|_| mirror_section("up", &shadow.url(), "step = \"upstream\"")).await;
    let deb = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    let release = format!("{}/debian/dists/testing/InRelease", origin.url());
    for _ in 0..3 {
        assert_eq!(proxy_get(daemon.proxy_addr(), &deb, &[]).await.status, 200);
    }
    assert_eq!(proxy_get(daemon.proxy_addr(), &release, &[]).await.status, 200);
    let revalidated = proxy_get(daemon.proxy_addr(), &release, &[("cache-control", "max-age=0")]).await;
    assert_eq!(revalidated.header("x-pkgproxy-cache"), Some("revalidated"));
    // Every copy was decided, and counted, before its client was answered.
    assert_eq!(mirror_counters(&daemon, "up").await.get(ShadowCounter::Sent), 3);
    shadow.wait_for(3).await;
    let hits = shadow.hits();
    let targets: Vec<&str> = hits.iter().map(|h| h.target.as_str()).collect();
    assert_eq!(targets, [deb.as_str(), release.as_str(), release.as_str()], "two misses and a revalidation");
    assert!(hits[2].header("if-none-match").is_some() || hits[2].header("if-modified-since").is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_copied_while_offline() {
    let shadow = ShadowRecorder::start(ShadowMode::Answer(200)).await;
    let (repo, origin, daemon) = setup(|_| mirror_section("off", &shadow.url(), "")).await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 200);
    shadow.wait_for(1).await;
    daemon.set_offline_mode("offline").await;
    for _ in 0..5 {
        assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 200, "served from the cache");
    }
    let counters = mirror_counters(&daemon, "off").await;
    assert_eq!(
        (counters.get(ShadowCounter::Sent), counters.get(ShadowCounter::SkippedOffline)),
        (1, 5),
        "{counters:?}"
    );
    assert_eq!(shadow.count(), 1, "as many as were sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_https_target_gets_its_copies_over_verified_tls() {
    let shadow = ShadowRecorder::start_tls(ShadowMode::Answer(200)).await;
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let config = config(&origin, &mirror_section("tls", &shadow.url(), ""));
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));

    let certificate = shadow.certificate().unwrap();
    let trusting = [("SSL_CERT_FILE", certificate.to_str().unwrap())];
    let daemon = Daemon::start_with_env(PKGPROXY, Some(&config), &[], &trusting).await;
    assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 200);
    shadow.wait_for(1).await;
    assert_eq!(shadow.hits()[0].target, url);
    assert_eq!(
        counters_until(&daemon, "tls", |c| c.get(ShadowCounter::Answered) == 1).await.get(ShadowCounter::Answered),
        1
    );

    // A daemon that does not trust the certificate sends nothing to it.
    let no_roots = tempfile::tempdir().unwrap();
    let empty = no_roots.path().join("none.pem");
    std::fs::write(&empty, "").unwrap();
    let distrusting = [("SSL_CERT_FILE", empty.to_str().unwrap()), ("SSL_CERT_DIR", no_roots.path().to_str().unwrap())];
    let daemon = Daemon::start_with_env(PKGPROXY, Some(&config), &[], &distrusting).await;
    assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 200);
    assert_eq!(
        counters_until(&daemon, "tls", |c| c.get(ShadowCounter::Failed) == 1).await.get(ShadowCounter::Failed),
        1
    );
    assert_eq!(shadow.count(), 1, "no request got through an unverified handshake");
    assert!(daemon.log().contains("TLS with 127.0.0.1 failed"), "{}", daemon.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_go_request_is_copied_below_the_target_s_path_prefix() {
    let shadow = ShadowRecorder::start(ShadowMode::Answer(200)).await;
    let modules = pkgproxy_testkit::GoModules::standard();
    let upstream = Origin::serve(modules.root()).await;
    let target = format!("{}/shadow-prefix", shadow.url());
    let config = format!(
        "[go]\nproxies = [\"{}\"]\nsumdb = \"off\"\n{}",
        upstream.url(),
        mirror_section("go", &target, "sides = [\"go\"]")
    );
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let path = "/go/example.com/hello/@v/list?x=1";
    assert_eq!(pkgproxy_testkit::client::get(daemon.proxy_addr(), path).await.status, 200);
    shadow.wait_for(1).await;
    assert_eq!(shadow.hits()[0].target, format!("/shadow-prefix{path}"));
    // apt requests are not this mirror's side.
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let _ = proxy_get(daemon.proxy_addr(), &format!("{}/debian/dists/testing/InRelease", origin.url()), &[]).await;
    assert_eq!(mirror_counters(&daemon, "go").await.get(ShadowCounter::Sent), 1, "the apt request was not copied");
    assert_eq!(shadow.count(), 1);
}
