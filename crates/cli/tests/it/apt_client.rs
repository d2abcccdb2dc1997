//! The real `apt-get` through pkgproxy, against a signed repository with
//! by-hash indexes served by a recording origin.

use crate::common::{
    origin_and_daemon, origin_and_revalidating_daemon, origin_and_server, sha256_file, upstream_counts,
    REVALIDATE_FLOOR,
};
use pkgproxy_metrics::{CacheGauge, SideCounter};
use pkgproxy_testkit::AptSandbox;

const PACKAGES: [&str; 4] = ["pkgproxy-hello", "pkgproxy-big", "pkgproxy-small1", "pkgproxy-small2"];

#[tokio::test(flavor = "multi_thread")]
async fn apt_update_and_download_through_pkgproxy_get_the_repository_s_bytes() {
    let (repo, origin, daemon) = origin_and_daemon().await;
    let source = format!("{}/debian", origin.url());
    let apt = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    apt.download(&PACKAGES).assert_success();
    for name in PACKAGES {
        assert_eq!(
            sha256_file(&apt.downloaded(name)),
            sha256_file(&repo.deb_path(name)),
            "{name} differs from the repository's"
        );
    }
    // apt asked for by-hash indexes, and pkgproxy passed them on.
    assert!(origin.count_path("/by-hash/") > 0, "apt should fetch indexes by hash");

    // The one way out: everything the origin saw came through the counted
    // transport, and nothing else reached it.
    let (requests, connections) = upstream_counts(&daemon).await;
    assert_eq!(requests, origin.requests().len() as u64, "requests the origin saw vs sent by the transport");
    assert_eq!(connections, origin.connections(), "connections the origin accepted vs opened by the transport");

    // The same counters for Prometheus, on the stats socket.
    let info = daemon.info().await;
    let metrics = daemon.metrics().await;
    let entries = format!("pkgproxy_cache_entries {}", info.cache.get(CacheGauge::Entries));
    assert!(metrics.contains(&entries), "{metrics}");
    let requests = format!("pkgproxy_upstream_requests_total {requests}");
    assert!(metrics.contains(&requests), "{metrics}");
    assert!(metrics.contains("pkgproxy_offline_mode{mode=\"never\"} 1"), "{metrics}");
    assert!(metrics.contains("# TYPE pkgproxy_hits_total counter"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_fresh_apt_reaches_the_origin_only_to_revalidate() {
    let (repo, origin, daemon) = origin_and_revalidating_daemon().await;
    let source = format!("{}/debian", origin.url());
    let first = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    first.update().assert_success();
    first.download(&PACKAGES).assert_success();
    origin.clear_requests();

    let second = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    second.update().assert_success();
    second.download(&PACKAGES).assert_success();
    for name in PACKAGES {
        assert_eq!(sha256_file(&second.downloaded(name)), sha256_file(&repo.deb_path(name)));
    }
    let seen = origin.requests();
    assert!(!seen.is_empty(), "apt-get update's max-age=0 should revalidate InRelease");
    for request in &seen {
        assert!(!request.path.contains("/pool/"), "pool file fetched twice: {}", request.path);
        assert!(!request.path.contains("/by-hash/"), "by-hash file fetched twice: {}", request.path);
        let conditional = request.header("if-none-match").is_some() || request.header("if-modified-since").is_some();
        assert!(conditional, "unconditional request on a warm cache: {} {}", request.method, request.path);
    }
    let info = daemon.info().await;
    assert!(info.sides["apt"].get(SideCounter::Revalidations) >= 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unchanged_in_release_is_a_hit_for_apt() {
    let (repo, origin, daemon) = origin_and_daemon().await;
    let source = format!("{}/debian", origin.url());
    let apt = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    // apt's second update sends If-Modified-Since; pkgproxy answers 304 from
    // its revalidated entry and apt prints "Hit:".
    let again = apt.update();
    again.assert_success();
    assert!(again.stdout.contains("Hit:"), "{again}");
}

/// A fleet's `apt-get update`s (each asking `max-age=0`) within
/// `revalidate_floor` of each other share one revalidation of each file.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_s_apt_get_updates_share_one_revalidation_per_floor() {
    let (repo, origin, server) = origin_and_server().await;
    let source = format!("{}/debian", origin.url());
    let proxy_url = format!("http://{}", server.proxy_addr());
    AptSandbox::new(Some(&proxy_url), &source, repo.keyring()).update().assert_success();
    let updates = |count: usize| {
        let fleet: Vec<AptSandbox> =
            (0..count).map(|_| AptSandbox::new(Some(&proxy_url), &source, repo.keyring())).collect();
        std::thread::scope(|scope| {
            let running: Vec<_> = fleet.iter().map(|apt| scope.spawn(|| apt.update())).collect();
            for update in running {
                update.join().unwrap().assert_success();
            }
        });
    };

    origin.clear_requests();
    updates(6);
    assert_eq!(origin.requests().len(), 0, "within the floor: {:#?}", origin.requests());

    server.clock().advance(REVALIDATE_FLOOR);
    updates(6);
    let in_release = origin.count_path("/dists/testing/InRelease");
    assert_eq!(in_release, 1, "six updates past the floor: {:#?}", origin.requests());
}
