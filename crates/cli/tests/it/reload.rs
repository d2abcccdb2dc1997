//! Reading the configuration again while serving: `SIGHUP` and
//! `pkgproxyctl reload` take a new archive mirror for the next miss; a file
//! that does not parse is refused with its reason, and the daemon goes on
//! serving on the settings it had.

use crate::common::{archive, pkgproxyctl, PKGPROXY};
use pkgproxy_testkit::client::{get, proxy_get};
use pkgproxy_testkit::{AptRepo, Daemon, Origin};

/// Waits until the daemon's log has `count` lines holding `needle`.
async fn logged(daemon: &Daemon, needle: &str, count: usize) {
    pkgproxy_testkit::eventually(needle, || async { (daemon.log().matches(needle).count() >= count).then_some(()) })
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_takes_a_new_mirror_for_the_next_miss_and_refuses_a_broken_file() {
    let repo = AptRepo::shared_default();
    let (first, second) = (Origin::serve(repo.root()).await, Origin::serve(repo.root()).await);
    let first_mirror = format!("{}/debian", first.url());
    let mut daemon = Daemon::start(PKGPROXY, Some(&archive("local", std::slice::from_ref(&first_mirror)))).await;
    let proxy = daemon.proxy_addr().to_string();
    let first_base = first.url();
    let url = |name: &str| format!("{first_base}{}", repo.deb_url_path(name));

    assert_eq!(proxy_get(&proxy, &url("pkgproxy-small1"), &[]).await.status, 200);
    assert_eq!(first.count_path(&repo.deb_url_path("pkgproxy-small1")), 1);
    // The first mirror goes away: a miss has nowhere to go.
    let first_url = url("pkgproxy-small2");
    drop(first);
    assert_eq!(proxy_get(&proxy, &first_url, &[]).await.status, 502);

    // A second mirror for the archive, then SIGHUP: the next miss reaches it.
    let both = archive("local", &[first_mirror.clone(), format!("{}/debian", second.url())]);
    daemon.rewrite_config(&format!("{both}[status]\npage = false\n"));
    daemon.signal(libc::SIGHUP);
    logged(&daemon, "configuration reloaded", 1).await;
    let answer = proxy_get(&proxy, &first_url, &[]).await;
    assert_eq!((answer.status, answer.header("x-pkgproxy-cache")), (200, Some("miss")));
    assert_eq!(second.count_path(&repo.deb_url_path("pkgproxy-small2")), 1, "fetched from the new mirror");
    assert_eq!(get(&proxy, "/").await.status, 404, "[status] page = false taken too");

    // A broken file: refused, said, and the settings in use stay.
    daemon.rewrite_config("[[apt.archive]\nname = ");
    daemon.signal(libc::SIGHUP);
    logged(&daemon, "configuration not reloaded", 1).await;
    let said = daemon.log();
    let line = said.lines().find(|line| line.contains("configuration not reloaded")).unwrap();
    assert!(line.contains("pkgproxy.toml"), "the file is named: {line}");
    let answer = proxy_get(&proxy, &url("pkgproxy-hello"), &[]).await;
    assert_eq!(answer.status, 200, "still serving, through the second mirror");
    assert_eq!(second.count_path(&repo.deb_url_path("pkgproxy-hello")), 1);
    assert_eq!(proxy_get(&proxy, &first_url, &[]).await.header("x-pkgproxy-cache"), Some("hit"));
}

#[tokio::test(flavor = "multi_thread")]
async fn pkgproxyctl_reload_says_what_is_wrong_and_what_was_taken() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let mirror = format!("{}/debian", origin.url());
    let mut daemon = Daemon::start(PKGPROXY, Some(&archive("local", std::slice::from_ref(&mirror)))).await;

    daemon
        .rewrite_config(&format!("{}[cache]\nmax_size = \"lots\"\n", archive("local", std::slice::from_ref(&mirror))));
    let refused = pkgproxyctl(&daemon, &["reload"]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("max_size") && said.contains("lots"), "the reason: {said}");
    assert_eq!(daemon.info().await.cache.get(pkgproxy_metrics::CacheGauge::MaxSizeBytes), 0, "unchanged");

    daemon.rewrite_config(&format!("{}[cache]\nmax_size = \"2GiB\"\n", archive("local", &[mirror])));
    let taken = pkgproxyctl(&daemon, &["reload"]);
    assert!(taken.status.success(), "{}", String::from_utf8_lossy(&taken.stderr));
    assert_eq!(String::from_utf8_lossy(&taken.stdout).trim(), "configuration reloaded");
    assert_eq!(daemon.info().await.cache.get(pkgproxy_metrics::CacheGauge::MaxSizeBytes), 2 << 30);
    let path = repo.deb_url_path("pkgproxy-hello");
    assert_eq!(proxy_get(daemon.proxy_addr(), &format!("{}{path}", origin.url()), &[]).await.status, 200);
}
