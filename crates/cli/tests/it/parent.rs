//! A site's pkgproxy drawing from a regional one (`[upstream] proxy`):
//! real apt through the child, the parent's cache serving a second child,
//! a parent that serves wrong bytes caught by the child, a loop refused,
//! and a parent's refusal opening the child's breaker for the origin host.

use pkgproxy_testkit::client::{get, proxy_get};
use pkgproxy_testkit::{AptRepo, AptSandbox, Behaviour, ChaosUpstream, Daemon, Origin};
use sha2::Digest;

use crate::common::{archive, PKGPROXY};

fn child_of(parent: &str, archive_section: &str) -> String {
    format!("{archive_section}[upstream]\nproxy = \"http://{parent}\"\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn apt_through_a_child_is_served_by_its_parent_and_a_second_child_by_the_parent_s_cache() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let apt_archive = archive("local", std::slice::from_ref(&source));
    let parent = Daemon::start(PKGPROXY, Some(&apt_archive)).await;
    let child = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &apt_archive))).await;

    let apt = AptSandbox::new(Some(&child.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    apt.download(&["pkgproxy-hello"]).assert_success();
    let got = std::fs::read(apt.downloaded("pkgproxy-hello")).unwrap();
    assert_eq!(
        sha2::Sha256::digest(&got),
        sha2::Sha256::digest(std::fs::read(repo.deb_path("pkgproxy-hello")).unwrap())
    );
    // Everything the origin saw came from the parent.
    let parent_sent = parent.info().await.upstream.get(pkgproxy_metrics::UpstreamCounter::Requests);
    assert_eq!(parent_sent, origin.requests().len() as u64, "the origin saw the parent's requests only");
    let deb = repo.deb_url_path("pkgproxy-hello");
    assert_eq!(origin.count_path(&deb), 1);

    // A second child, with a cache of its own: the parent's cache answers.
    let second = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &apt_archive))).await;
    let answer = proxy_get(second.proxy_addr(), &format!("{}{deb}", origin.url()), &[]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body.as_ref(), got.as_slice());
    assert_eq!(origin.count_path(&deb), 1, "the parent's cache served the second child");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_that_serves_wrong_bytes_is_caught_and_nothing_wrong_is_cached() {
    let repo = AptRepo::shared_default();
    // A "parent" that serves the repository, and the package wrong.
    let parent = ChaosUpstream::start().await;
    for (path, body) in pkgproxy_testkit::tree::files(repo.root()) {
        let path = path.strip_prefix(repo.root()).expect("under the root");
        parent.put(&format!("/{}", path.display()), body);
    }
    let deb = repo.deb_url_path("pkgproxy-hello");
    parent.set_path_behaviour(&deb, Behaviour::WrongBytes);
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let child = Daemon::start(
        PKGPROXY,
        Some(&child_of(&parent.addr().to_string(), &archive("local", std::slice::from_ref(&source)))),
    )
    .await;
    let apt = AptSandbox::new(Some(&child.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    apt.download(&["pkgproxy-hello"]).assert_failure();
    assert!(parent.requests_for(&deb) >= 1, "the child asked its parent");
    assert_eq!(origin.requests().len(), 0, "and nobody else");
    let again = proxy_get(child.proxy_addr(), &format!("{}{deb}", origin.url()), &[]).await;
    assert_ne!(again.status, 200, "nothing wrong was cached");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_whose_parent_is_itself_refuses_the_loop() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).unwrap().port();
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let me = format!("127.0.0.1:{port}");
    let config = child_of(&me, &archive("local", std::slice::from_ref(&source)));
    let looped = Daemon::start_with(PKGPROXY, Some(&config), &["-addr", &me]).await;
    let deb = repo.deb_url_path("pkgproxy-hello");
    let answer = proxy_get(looped.proxy_addr(), &format!("{}{deb}", origin.url()), &[]).await;
    assert_ne!(answer.status, 200);
    assert!(looped.log().contains("request loop") || answer.status == 508, "{}: {}", answer.status, looped.log());
    assert_eq!(origin.requests().len(), 0);
    assert_eq!(get(looped.proxy_addr(), "/pkgproxy/v1/status").await.status, 200, "still serving");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_s_overloaded_answer_opens_the_child_s_breaker_for_the_origin_host() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    // The origin by name, the parent by address: the child's breaker must
    // name the origin.
    let source = format!("http://localhost:{}/debian", origin.addr().port());
    let apt_archive = archive("local", std::slice::from_ref(&source));
    let overloaded = ["-offline-mode", "store-overloaded"];
    let parent = Daemon::start_with(PKGPROXY, Some(&apt_archive), &overloaded).await;
    let child = Daemon::start_with(PKGPROXY, Some(&child_of(parent.proxy_addr(), &apt_archive)), &overloaded).await;
    let (busy, other) = (repo.deb_url_path("pkgproxy-hello"), repo.deb_url_path("pkgproxy-small1"));
    origin.set_status_override(&busy, Some(429));
    origin.set_retry_after(Some("120"));
    let url = |path: &str| format!("http://localhost:{}{path}", origin.addr().port());
    let answer = proxy_get(child.proxy_addr(), &url(&busy), &[]).await;
    assert_eq!(answer.status, 429, "the store's answer passed on through both");
    let parent_sent = parent.info().await.upstream.get(pkgproxy_metrics::UpstreamCounter::Requests);

    let refused = proxy_get(child.proxy_addr(), &url(&other), &[]).await;
    assert_eq!(refused.status, 503, "the child leaves the origin alone itself");
    assert_eq!(parent.info().await.upstream.get(pkgproxy_metrics::UpstreamCounter::Requests), parent_sent);
    assert_eq!(origin.count_path(&other), 0);
    let open: Vec<String> = child.info().await.offline.upstreams.iter().map(|u| u.host.clone()).collect();
    assert_eq!(open, ["localhost"], "the breaker is the origin host's, not the parent's");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_offline_parent_says_so_in_a_header_the_child_passes_on() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let apt_archive = archive("local", std::slice::from_ref(&source));
    let parent = Daemon::start_with(PKGPROXY, Some(&apt_archive), &["-offline"]).await;
    let child = Daemon::start(PKGPROXY, Some(&child_of(parent.proxy_addr(), &apt_archive))).await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-small2"));
    let answer = proxy_get(child.proxy_addr(), &url, &[]).await;
    assert_eq!(answer.status, 503);
    assert_eq!(answer.header("x-pkgproxy-refused"), Some("offline"), "{:?}", answer.headers);
    assert_eq!(origin.requests().len(), 0);
}
