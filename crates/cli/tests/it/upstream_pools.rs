//! The configured mirrors of an archive as one upstream pool, end to end:
//! the real apt-get through an archive whose first mirror is dead, and a
//! large download that breaks half way and is resumed from another mirror.

use crate::common::{archive, sha256, sha256_file, PKGPROXY};
use pkgproxy_testkit::client::proxy_get;
use pkgproxy_testkit::{AptRepo, AptSandbox, Behaviour, ChaosUpstream, Daemon, Origin, RefusingPort};

#[tokio::test(flavor = "multi_thread")]
async fn apt_updates_and_downloads_through_an_archive_whose_first_mirror_is_dead() {
    let repo = AptRepo::shared_default();
    let live = Origin::serve(repo.root()).await;
    let refusing = RefusingPort::new();
    let dead = format!("{}/debian", refusing.url());
    let config = archive("local", &[dead.clone(), format!("{}/debian", live.url())]);
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;

    // apt names the dead mirror: its sources.list has only that one.
    let apt = AptSandbox::new(Some(&daemon.proxy_url()), &dead, repo.keyring());
    apt.update().assert_success();
    apt.download(&["pkgproxy-hello", "pkgproxy-big"]).assert_success();
    assert_eq!(sha256_file(&apt.downloaded("pkgproxy-big")), sha256_file(&repo.deb_path("pkgproxy-big")));

    // The spread favours the mirror that answers fast: revalidate, a few
    // requests at a time, until load has sent one to the dead mirror too.
    let mut info = daemon.info().await;
    for _ in 0..100 {
        let pool = info.pools.iter().find(|p| p.name == "local").expect("the pool is shown");
        if pool.instances[0].failures >= 1 {
            break;
        }
        let revalidations = ["InRelease", "Release", "Release.gpg", "main/binary-amd64/Packages"].map(|file| {
            let url = format!("{dead}/dists/testing/{file}");
            let proxy = daemon.proxy_addr().to_string();
            tokio::spawn(async move { proxy_get(&proxy, &url, &[("cache-control", "max-age=0")]).await })
        });
        for answer in revalidations {
            let answer = answer.await.unwrap();
            assert_ne!(answer.status, 502, "a request that found the dead mirror moved on to the live one");
        }
        info = daemon.info().await;
    }
    let pool = info.pools.iter().find(|p| p.name == "local").unwrap();
    let instances = &pool.instances;
    assert_eq!(instances[0].url, dead.as_str());
    assert!(instances[0].failures >= 1, "{pool:?}");
    assert_eq!(instances[1].failures, 0, "{pool:?}");
    assert_eq!(instances[1].state, "healthy");

    let metrics = daemon.metrics().await;
    let live_failures =
        format!("pkgproxy_upstream_instance_failures{{pool=\"local\",instance=\"{}/debian\"}} 0", live.url());
    assert!(metrics.contains(&live_failures), "{metrics}");
    assert!(metrics.contains(&format!("pkgproxy_upstream_instance_in_flight{{pool=\"local\",instance=\"{dead}\"}} 0")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_50_mb_download_whose_mirror_dies_at_60_percent_is_resumed_from_the_other_and_verified() {
    let body: Vec<u8> = (0..50_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let digest = sha256(&body);
    let path = format!("/debian/dists/stable/main/binary-amd64/by-hash/SHA256/{digest}");
    let mut mirrors = Vec::new();
    for _ in 0..2 {
        let mirror = ChaosUpstream::start().await;
        mirror.put(&path, body.clone());
        // Whichever mirror is asked first breaks at 60 %; the range asked of
        // the other one to resume is shorter than that, so it completes.
        mirror.set_behaviour(Behaviour::ResetMidBody { after_bytes: 30_000_000 });
        mirrors.push(mirror);
    }
    let urls: Vec<String> = mirrors.iter().map(|m| format!("{}/debian", m.url())).collect();
    let daemon = Daemon::start(PKGPROXY, Some(&archive("big", &urls))).await;

    let url = format!("{}{path}", mirrors[0].url());
    let answer = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert_eq!(answer.status, 200);
    assert!(answer.complete, "the client's transfer was not broken");
    assert_eq!(answer.body.len(), body.len());
    assert_eq!(sha256(&answer.body), digest, "the client got the right bytes");
    let asked: Vec<u64> = mirrors.iter().map(|m| m.requests_for(&path)).collect();
    assert!(asked.iter().all(|&n| n >= 1), "the body was resumed from the other mirror: {asked:?}");

    let again = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert_eq!(again.header("x-pkgproxy-cache"), Some("hit"), "the resumed body was verified and cached");
    assert_eq!(sha256(&again.body), digest);
    let asked_after: Vec<u64> = mirrors.iter().map(|m| m.requests_for(&path)).collect();
    assert_eq!(asked_after, asked);
}

#[tokio::test(flavor = "multi_thread")]
async fn apt_fetches_through_an_https_mirror_it_never_names() {
    let repo = AptRepo::shared_default();
    let secure = Origin::serve_tls(repo.root()).await;
    // apt names a plain-http mirror of the archive that is down; the
    // configured https mirror is the pool's live instance.
    let refusing = RefusingPort::new();
    let named = format!("{}/debian", refusing.url());
    let config = archive("local", &[format!("{}/debian", secure.url()), named.clone()]);
    let certificate = secure.certificate().unwrap();
    let env = [("SSL_CERT_FILE", certificate.to_str().unwrap())];
    let daemon = Daemon::start_with_env(PKGPROXY, Some(&config), &[], &env).await;

    let apt = AptSandbox::new(Some(&daemon.proxy_url()), &named, repo.keyring());
    apt.update().assert_success();
    apt.download(&["pkgproxy-hello"]).assert_success();
    assert_eq!(sha256_file(&apt.downloaded("pkgproxy-hello")), sha256_file(&repo.deb_path("pkgproxy-hello")));
    assert!(secure.count_path("/pool/") >= 1, "fetched over TLS from the https mirror");
}
