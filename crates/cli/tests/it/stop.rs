//! A graceful stop: on SIGTERM, pkgproxy stops accepting, lets a download
//! in flight finish within its grace period (the client gets the whole
//! file and the entry is cached), then exits 0; past the grace, or on a
//! second signal, it exits without waiting, and nothing partial is kept.

use std::time::{Duration, Instant};

use crate::common::{archive, sha256, sha256_file};
use pkgproxy_testkit::client::proxy_get;
use pkgproxy_testkit::{eventually, AptRepo, Daemon, Origin};

/// The shared repository's 20 MiB package, served at `rate` bytes a
/// second, through a daemon given `args`.
async fn slow_download(rate: u64, args: &[&str]) -> (&'static AptRepo, Origin, Daemon, String) {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    origin.set_rate_limit(Some(rate));
    let config = archive("local", &[format!("{}/debian", origin.url())]);
    let daemon = Daemon::start_with(crate::common::PKGPROXY, Some(&config), args).await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-big"));
    (repo, origin, daemon, url)
}

/// Once the daemon is fetching the package from `origin`: the download
/// is in flight, and a stop now must reckon with it.
async fn in_flight(origin: &Origin) {
    eventually("the download to be in flight", || async { (origin.count_path("pkgproxy-big") > 0).then_some(()) })
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_a_download_in_flight_finish_whole_and_cached_then_exits_0() {
    let (repo, origin, mut daemon, url) = slow_download(5 * 1024 * 1024, &["-shutdown-grace", "20s"]).await;
    let download = tokio::spawn({
        let (addr, url) = (daemon.proxy_addr().to_string(), url.clone());
        async move { proxy_get(&addr, &url, &[]).await }
    });
    in_flight(&origin).await;
    let asked = Instant::now();
    let status = tokio::task::spawn_blocking(move || (daemon.stop(), daemon)).await.unwrap();
    let (status, mut daemon) = status;
    assert_eq!(status.and_then(|status| status.code()), Some(0), "exit 0");
    assert!(asked.elapsed() < Duration::from_secs(20), "within the grace: {:?}", asked.elapsed());
    assert!(asked.elapsed() > Duration::from_secs(2), "after the download, not before: {:?}", asked.elapsed());
    let answer = download.await.unwrap();
    assert_eq!((answer.status, answer.complete), (200, true));
    assert_eq!(sha256(&answer.body), sha256_file(&repo.deb_path("pkgproxy-big")), "the whole file, right");

    origin.set_rate_limit(None);
    daemon.start_again().await;
    let again = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert_eq!(again.header("x-pkgproxy-cache"), Some("hit"), "and cached");
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_grace_it_exits_anyway_and_keeps_nothing_partial() {
    let (_, origin, mut daemon, url) = slow_download(1024 * 1024, &["-shutdown-grace", "1s"]).await;
    let download = tokio::spawn({
        let (addr, url) = (daemon.proxy_addr().to_string(), url.clone());
        async move { proxy_get(&addr, &url, &[]).await }
    });
    in_flight(&origin).await;
    let asked = Instant::now();
    let (status, mut daemon) = tokio::task::spawn_blocking(move || (daemon.stop(), daemon)).await.unwrap();
    assert_eq!(status.and_then(|status| status.code()), Some(0));
    assert!(asked.elapsed() < Duration::from_secs(5), "the grace is kept: {:?}", asked.elapsed());
    assert!(!download.await.unwrap().complete, "the client sees a cut transfer, not a short file");
    assert!(daemon.log().contains("stopping anyway"), "{}", daemon.log());

    origin.set_rate_limit(None);
    daemon.start_again().await;
    let again = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert_ne!(again.header("x-pkgproxy-cache"), Some("hit"), "nothing partial was kept");
    assert_eq!((again.status, again.complete), (200, true));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_signal_exits_at_once() {
    let (_, origin, daemon, url) = slow_download(1024 * 1024, &["-shutdown-grace", "60s"]).await;
    let download = tokio::spawn({
        let (addr, url) = (daemon.proxy_addr().to_string(), url.clone());
        async move { proxy_get(&addr, &url, &[]).await }
    });
    in_flight(&origin).await;
    let pid = daemon.pid().unwrap() as libc::pid_t;
    let asked = Instant::now();
    // SAFETY: signalling the daemon this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    // The first signal taken (its stop begun, the second one awaited).
    eventually("the daemon to begin its stop", || async { daemon.log().contains("shutting down").then_some(()) }).await;
    unsafe { libc::kill(pid, libc::SIGINT) };
    pkgproxy_testkit::eventually("the daemon to exit", || async {
        let gone = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| stat.contains(") Z "));
        gone.then_some(())
    })
    .await;
    assert!(asked.elapsed() < Duration::from_secs(10), "not the 60 s grace: {:?}", asked.elapsed());
    assert!(!download.await.unwrap().complete);
    assert!(daemon.log().contains("second stop signal"), "{}", daemon.log());
}
