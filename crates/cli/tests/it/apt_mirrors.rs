//! Mirror normalisation: every mirror of one archive fills and hits one
//! cache entry, and the configured mirrors of an archive are the instances
//! its requests are spread over.

use crate::common::{archive, sha256_file, PKGPROXY};
use pkgproxy_metrics::CacheGauge;
use pkgproxy_testkit::client::proxy_get;
use pkgproxy_testkit::{AptRepo, AptSandbox, Daemon, Origin};

#[tokio::test(flavor = "multi_thread")]
async fn two_mirrors_of_a_configured_archive_fill_and_hit_one_entry() {
    let repo = AptRepo::shared_default();
    let (a, b) = (Origin::serve(repo.root()).await, Origin::serve(repo.root()).await);
    let config = archive("local", &[format!("{}/debian", a.url()), format!("{}/debian", b.url())]);
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let path = repo.deb_url_path("pkgproxy-hello");

    let from_a = proxy_get(daemon.proxy_addr(), &format!("{}{path}", a.url()), &[]).await;
    assert_eq!(from_a.header("x-pkgproxy-cache"), Some("miss"));
    let from_b = proxy_get(daemon.proxy_addr(), &format!("{}{path}", b.url()), &[]).await;
    assert_eq!(from_b.header("x-pkgproxy-cache"), Some("hit"));
    assert_eq!(from_a.body, from_b.body);
    assert_eq!(a.count_path(&path) + b.count_path(&path), 1, "one upstream request, from either mirror");

    // apt pointed at mirror b after a fetched everything through mirror a.
    let apt_a = AptSandbox::new(Some(&daemon.proxy_url()), &format!("{}/debian", a.url()), repo.keyring());
    apt_a.update().assert_success();
    apt_a.download(&["pkgproxy-hello", "pkgproxy-big"]).assert_success();
    let by_hash = a.count_path("/by-hash/") + b.count_path("/by-hash/");
    let apt_b = AptSandbox::new(Some(&daemon.proxy_url()), &format!("{}/debian", b.url()), repo.keyring());
    apt_b.update().assert_success();
    apt_b.download(&["pkgproxy-hello", "pkgproxy-big"]).assert_success();
    assert_eq!(sha256_file(&apt_b.downloaded("pkgproxy-big")), sha256_file(&repo.deb_path("pkgproxy-big")));
    assert_eq!(a.count_path("/pool/") + b.count_path("/pool/"), 2, "each .deb fetched once, from either mirror");
    assert_eq!(a.count_path("/by-hash/") + b.count_path("/by-hash/"), by_hash, "no index fetched twice");
}

#[tokio::test(flavor = "multi_thread")]
async fn built_in_debian_mirror_names_share_one_entry() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    // Two public mirror names, both pinned to the test's origin.
    let config =
        format!("[upstream]\nresolve = [\"deb.debian.org:80:{0}\", \"ftp.de.debian.org:80:{0}\"]\n", origin.addr());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let path = repo.deb_url_path("pkgproxy-small1");
    let first = proxy_get(daemon.proxy_addr(), &format!("http://deb.debian.org{path}"), &[]).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let second = proxy_get(daemon.proxy_addr(), &format!("http://ftp.de.debian.org{path}"), &[]).await;
    assert_eq!(second.header("x-pkgproxy-cache"), Some("hit"));
    assert_eq!(origin.count_path(&path), 1);
    assert_eq!(daemon.info().await.cache.get(CacheGauge::Entries), 1);
}
