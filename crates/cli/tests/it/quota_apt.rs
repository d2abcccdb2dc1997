//! The cache's quota under the real `apt-get`: more distinct packages
//! than fit go through a small cache, which keeps to its limit on disk and
//! keeps the most recently used; and what apt can never ask for again (the
//! index files of an older Release) goes before anything a client may
//! still want.

use std::time::Duration;

use crate::common::{archive, on_disk, PKGPROXY, REVALIDATE_FLOOR};
use crate::inproc::Server;
use pkgproxy_control::CacheEntry;
use pkgproxy_metrics::CacheGauge;
use pkgproxy_server::config::Overrides;
use pkgproxy_testkit::client::proxy_get;
use pkgproxy_testkit::{eventually, AptRepo, AptSandbox, Daemon, Origin};

const MIB: u64 = 1 << 20;

/// The entries `daemon` lists, over its admin socket.
fn listed(daemon: &Daemon) -> Vec<CacheEntry> {
    listed_at(&daemon.admin_socket())
}

/// The entries a pkgproxy lists over its admin socket at `admin`.
pub(crate) fn listed_at(admin: &std::path::Path) -> Vec<CacheEntry> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .arg("-admin-socket-path")
        .arg(admin)
        .args(["cache", "ls", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// apt's state for `repo` through `daemon`.
fn apt(daemon: &Daemon, origin: &Origin, repo: &AptRepo) -> AptSandbox {
    apt_at(&daemon.proxy_url(), origin, repo)
}

/// apt's state for `repo` through the pkgproxy at `proxy_url`.
fn apt_at(proxy_url: &str, origin: &Origin, repo: &AptRepo) -> AptSandbox {
    AptSandbox::new(Some(proxy_url), &format!("{}/debian", origin.url()), repo.keyring())
        .option("Acquire::Retries", "0")
}

#[tokio::test(flavor = "multi_thread")]
async fn apt_get_through_a_10_mib_cache_keeps_it_within_its_quota_and_the_most_recent_packages() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (1..=12).map(|n| format!("pkgproxy-q{n:02}")).collect();
    let mut builder = AptRepo::builder();
    for name in &names {
        builder = builder.package(name, "1.0-1", 5 * MIB / 2);
    }
    let repo = builder.build(&dir.path().join("r"));
    let origin = Origin::serve(repo.root()).await;
    // Packages of 2.5 MiB, more than the tenth of the quota cached by default.
    let config =
        format!("[cache]\nmax_object_size = \"4MiB\"\n{}", archive("local", &[format!("{}/debian", origin.url())]));
    // The quota counts the index file too: about 4 MB on a new cache (the
    // room redb sets aside), so 10 MiB leave room for two or three
    // packages.
    let daemon = Daemon::start_with(PKGPROXY, Some(&config), &["-cache-max-size", "10MiB"]).await;
    let apt = apt(&daemon, &origin, &repo);
    apt.update().assert_success();

    // 30 MiB of distinct packages, one after the other: their uses keep
    // that order, however close together (uses are stamped finer than the
    // second, each after the one before).
    for name in &names {
        apt.download(&[name]).assert_success();
        assert_eq!(std::fs::read(apt.downloaded(name)).unwrap(), std::fs::read(repo.deb_path(name)).unwrap());
    }
    let cache = daemon.cache_dir();
    eventually("the cache to be within its quota", || async { (on_disk(&cache) <= 10 * MIB).then_some(()) }).await;
    let info = daemon.info().await;
    assert!(info.cache.get(CacheGauge::DiskBytes) <= 10 * MIB, "as the daemon counts it too");

    let cached: Vec<String> = listed(&daemon).into_iter().map(|entry| entry.key).collect();
    let is_cached = |name: &str| cached.iter().any(|key| key.ends_with(&repo.deb_filename(name)));
    assert!(is_cached(&names[11]), "the most recently used is kept: {cached:?}");
    assert!(!is_cached(&names[0]) && !is_cached(&names[1]), "the least recently used are gone: {cached:?}");
    let kept = names.iter().filter(|name| is_cached(name)).count();
    assert!((1..=3).contains(&kept), "{kept} packages of 2.5 MiB kept in 10 MiB: {cached:?}");

    // An evicted package is fetched again, and apt checks it.
    origin.clear_requests();
    std::fs::remove_file(apt.downloaded(&names[0])).unwrap();
    let again = apt.download(&[&names[0]]);
    again.assert_success();
    assert_eq!(std::fs::read(apt.downloaded(&names[0])).unwrap(), std::fs::read(repo.deb_path(&names[0])).unwrap());
    assert_eq!(origin.count_path(&repo.deb_filename(&names[0])), 1, "fetched again");
    let newest = format!("{}{}", origin.url(), repo.deb_url_path(&names[11]));
    assert_eq!(proxy_get(daemon.proxy_addr(), &newest, &[]).await.header("x-pkgproxy-cache"), Some("hit"));
}

#[tokio::test(flavor = "multi_thread")]
async fn index_files_of_an_older_release_are_evicted_before_an_older_package() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = AptRepo::builder()
        .package("pkgproxy-old", "1.0-1", MIB)
        .package("pkgproxy-other", "1.0-1", 1024)
        .build(&dir.path().join("r"));
    let origin = Origin::serve(repo.root()).await;
    let config = archive("local", &[format!("{}/debian", origin.url())]);
    // In process, on a clock the test moves: uses are listed in seconds.
    let mut server = Server::start(Some(&config)).await;
    let apt = apt_at(&format!("http://{}", server.proxy_addr()), &origin, &repo);
    apt.update().assert_success();
    apt.download(&["pkgproxy-old"]).assert_success();
    let by_hash_of = |entries: &[CacheEntry]| -> Vec<CacheEntry> {
        entries.iter().filter(|entry| entry.key.contains("/by-hash/")).cloned().collect()
    };
    // Another client reads the same indexes after the package was fetched,
    // in a later second (uses are listed in seconds).
    server.clock().advance(Duration::from_secs(2));
    apt_at(&format!("http://{}", server.proxy_addr()), &origin, &repo).update().assert_success();
    let superseded = by_hash_of(&listed_at(&server.admin_socket()));
    assert!(!superseded.is_empty(), "apt fetched its indexes by hash");

    // A newer Release: apt fetches its indexes; the old ones can never be
    // asked for again, though used after the package.
    repo.add_package("pkgproxy-new", "1.0-1", 2048);
    server.clock().advance(REVALIDATE_FLOOR);
    apt.update().assert_success();
    let current: Vec<CacheEntry> = by_hash_of(&listed_at(&server.admin_socket()))
        .into_iter()
        .filter(|entry| !superseded.iter().any(|s| s.key == entry.key))
        .collect();
    assert!(!current.is_empty(), "the new indexes are cached");
    let old_package = listed_at(&server.admin_socket()).into_iter().find(|entry| entry.key.ends_with(".deb")).unwrap();
    assert!(superseded.iter().all(|entry| entry.last_use > old_package.last_use), "{superseded:?}");

    // A quota that needs less freed than the superseded files hold (the
    // Packages of both architectures are the same bytes, so a quarter of
    // what is listed); the cleanly stopped server keeps the size it had.
    server.restart_with(&Overrides::default()).await;
    let usage = server.info().await.cache.get(CacheGauge::DiskBytes);
    let superseded_bytes: u64 = superseded.iter().map(|entry| entry.size).sum();
    let max_size = (usage - superseded_bytes / 4) / 90 * 100;
    server.restart_with(&Overrides { cache_max_size: Some(max_size.to_string()), ..Overrides::default() }).await;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .arg("-admin-socket-path")
        .arg(server.admin_socket())
        .args(["cache", "gc"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{printed}");

    let after = listed_at(&server.admin_socket());
    let still = |key: &str| after.iter().any(|entry| entry.key == key);
    assert!(superseded.iter().any(|entry| !still(&entry.key)), "superseded index files went: {printed}");
    assert!(still(&old_package.key), "the older package stays: {printed}");
    assert!(current.iter().all(|entry| still(&entry.key)), "the current indexes stay");
    let package = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-old"));
    assert_eq!(proxy_get(server.proxy_addr(), &package, &[]).await.header("x-pkgproxy-cache"), Some("hit"));
    origin.clear_requests();
    apt_at(&format!("http://{}", server.proxy_addr()), &origin, &repo).update().assert_success();
    assert_eq!(origin.count_path("/by-hash/"), 0, "a client finds every index it now needs cached");
}
