//! The cache's quota end to end: a daemon given `-cache-max-size` keeps its
//! cache (bodies and index, on disk) within it while more distinct files
//! than fit go through it, keeping the most recently used; an evicted file
//! is fetched again and served correctly.

use std::time::Duration;

use crate::common::{archive, on_disk, PKGPROXY};
use crate::inproc::Server;
use pkgproxy_metrics::CacheGauge;
use pkgproxy_server::config::Overrides;
use pkgproxy_testkit::client::{proxy_get, send};
use pkgproxy_testkit::{eventually, Daemon, FakeSimplestreams, LxdImage};

const MIB: u64 = 1 << 20;

/// `pkgproxyctl ARGS` against `daemon`'s sockets.
fn ctl(daemon: &Daemon, args: &[&str]) -> std::process::Output {
    ctl_at(&daemon.stats_socket(), &daemon.admin_socket(), args)
}

/// `pkgproxyctl ARGS` against the sockets at `stats` and `admin`.
fn ctl_at(stats: &std::path::Path, admin: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .arg("-stats-socket-path")
        .arg(stats)
        .arg("-admin-socket-path")
        .arg(admin)
        .args(args)
        .output()
        .unwrap()
}

/// An origin with `image` published as serial 20240101, and a pkgproxy
/// relaying it as LXD remote `test`, with `[cache]` settings `cache`, that
/// has read the remote's index.
async fn relay(image: &LxdImage, cache: &str) -> (FakeSimplestreams, Daemon, String) {
    let origin = FakeSimplestreams::start().await;
    origin.publish("20240101", image);
    let config =
        format!("[cache]\n{cache}\n[[lxd.remote]]\nname = \"test\"\nmirrors = [\"{}/releases\"]\n", origin.url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let addr = daemon.proxy_addr().to_string();
    assert_eq!(send(&addr, "GET", "/lxd/test/streams/v1/index.json", &[], b"").await.status, 200);
    (origin, daemon, addr)
}

/// The path of serial 20240101's file whose name ends with `suffix`.
fn file_path(origin: &FakeSimplestreams, suffix: &str) -> String {
    let items = origin.items("20240101");
    items.into_iter().find(|(path, _, _)| path.ends_with(suffix)).map(|(path, _, _)| path).expect("the file")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cache_keeps_to_its_quota_keeping_the_most_recently_used() {
    let origin = FakeSimplestreams::start().await;
    let serials: Vec<String> = (1..=10).map(|day| format!("202401{day:02}")).collect();
    let images: Vec<LxdImage> = serials.iter().map(|serial| LxdImage::build(serial, Some(3 * MIB as usize))).collect();
    for (serial, image) in serials.iter().zip(&images) {
        origin.publish(serial, image);
    }
    // Files of 3 MiB, more than the tenth of the quota cached by default.
    let config = format!(
        "[cache]\nmax_object_size = \"4MiB\"\n[[lxd.remote]]\nname = \"test\"\nmirrors = [\"{}/releases\"]\n",
        origin.url()
    );
    let daemon = Daemon::start_with(PKGPROXY, Some(&config), &["-cache-max-size", "16MiB"]).await;
    let addr = daemon.proxy_addr();
    assert_eq!(send(addr, "GET", "/lxd/test/streams/v1/index.json", &[], b"").await.status, 200);
    let squashfs = |serial: &str| {
        let items = origin.items(serial);
        items.into_iter().find(|(path, _, _)| path.ends_with(".squashfs")).map(|(path, _, _)| path).unwrap()
    };

    // 30 MiB of distinct files through a 16 MiB cache (4 MiB of it the
    // index), one after the other, as a client would.
    for (serial, image) in serials.iter().zip(&images) {
        let answer = send(addr, "GET", &format!("/lxd/test/{}", squashfs(serial)), &[], b"").await;
        assert_eq!((answer.status, answer.body.len() as u64), (200, image.squashfs.len() as u64), "{serial}");
        assert!(answer.body == image.squashfs, "{serial}: the right bytes");
    }
    let cache = daemon.cache_dir();
    eventually("the cache to be within its quota", || async { (on_disk(&cache) <= 16 * MIB).then_some(()) }).await;

    origin.clear_requests();
    let newest = send(addr, "GET", &format!("/lxd/test/{}", squashfs(&serials[9])), &[], b"").await;
    assert_eq!(newest.header("x-pkgproxy-cache"), Some("hit"), "the most recently used is kept");
    assert_eq!(origin.file_requests(), 0);
    let oldest_url = format!("/lxd/test/{}", squashfs(&serials[0]));
    let explained = String::from_utf8_lossy(&ctl(&daemon, &["explain", &oldest_url]).stdout).into_owned();
    assert!(explained.contains("evicted ("), "the cache remembers it evicted it: {explained}");
    let oldest = send(addr, "GET", &oldest_url, &[], b"").await;
    assert!(oldest.body == images[0].squashfs, "an evicted file is fetched again, whole");
    let reason = oldest.header("x-pkgproxy-reason");
    assert!(reason.is_some_and(|reason| reason.starts_with("evicted (")), "{reason:?}");
    assert_eq!(origin.file_requests(), 1, "the least recently used was evicted");
    eventually("the eviction to be logged", || async { daemon.log().contains("evicted").then_some(()) }).await;
    let info = daemon.info().await;
    assert_eq!(info.cache.get(CacheGauge::MaxSizeBytes), 16 * MIB);
    assert!(info.cache.get(CacheGauge::DiskBytes) <= 16 * MIB + 4 * MIB, "within the quota and one more file");
    assert_eq!(info.cache.get(CacheGauge::DiskPressure), 0);
    let metrics = daemon.metrics().await;
    assert!(metrics.contains("pkgproxy_cache_disk_pressure 0"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread")]
async fn pkgproxyctl_cache_lists_removes_and_collects_and_last_uses_survive_a_clean_restart() {
    // In process, on a clock the test moves: uses are listed in seconds.
    let origin = FakeSimplestreams::start().await;
    origin.publish("20240101", &LxdImage::build("one", None));
    let config = format!("[[lxd.remote]]\nname = \"test\"\nmirrors = [\"{}/releases\"]\n", origin.url());
    let mut server = Server::start(Some(&config)).await;
    let addr = server.proxy_addr().to_string();
    assert_eq!(send(&addr, "GET", "/lxd/test/streams/v1/index.json", &[], b"").await.status, 200);
    let files = origin.items("20240101");
    for (path, _, _) in &files {
        assert_eq!(send(&addr, "GET", &format!("/lxd/test/{path}"), &[], b"").await.status, 200);
    }
    let ctl = |server: &Server, args: &[&str]| {
        let output = ctl_at(&server.stats_socket(), &server.admin_socket(), args);
        let printed = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), printed)
    };
    let (ok, listed) = ctl(&server, &["cache", "ls", "--side", "lxd", "lxd/file/*"]);
    assert!(ok && listed.contains("3 entries"), "{listed}");
    let (ok, json) = ctl(&server, &["cache", "ls", "--json"]);
    assert!(ok, "{json}");
    let entries: serde_json::Value = serde_json::from_str(&json).unwrap();
    let used = |entries: &serde_json::Value, key: &str| {
        entries.as_array().unwrap().iter().find(|e| e["key"] == key).map(|e| e["last_use"].as_u64().unwrap())
    };
    let index_key = "lxd/test/streams/v1/index.json";
    let before = used(&entries, index_key).expect("the index is listed");

    // A use in a later second (uses are listed in seconds), recorded in
    // memory, written at a clean stop.
    server.clock().advance(Duration::from_secs(2));
    assert_eq!(send(&addr, "GET", "/lxd/test/streams/v1/index.json", &[], b"").await.status, 200);
    server.restart_with(&Overrides::default()).await;
    let (_, json) = ctl(&server, &["cache", "ls", "--json"]);
    let after = used(&serde_json::from_str(&json).unwrap(), index_key).expect("still listed");
    assert!(after > before, "the last use survived the restart: {before} then {after}");

    let (ok, printed) = ctl(&server, &["cache", "rm", "lxd/file/*"]);
    assert!(ok && printed.contains("removed 3 entries"), "{printed}");
    let (ok, listed) = ctl(&server, &["cache", "ls", "lxd/file/*"]);
    assert!(ok && listed.contains("0 entries"), "{listed}");
    let (ok, printed) = ctl(&server, &["cache", "gc"]);
    assert!(ok && printed.contains("evicted 0 entries"), "no quota, nothing to evict: {printed}");
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .arg("-admin-socket-path")
        .arg(server.stats_socket())
        .args(["cache", "gc"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("read-only"), "the stats socket changes nothing: {said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn pkgproxyctl_cache_verify_drops_damaged_bodies_and_a_clean_cache_reports_none() {
    let image = LxdImage::build("one", None);
    let (origin, daemon, addr) = relay(&image, "").await;
    let files = origin.items("20240101");
    for (path, _, _) in &files {
        assert_eq!(send(&addr, "GET", &format!("/lxd/test/{path}"), &[], b"").await.status, 200);
    }
    // Served once checked; the stats socket answers once all is committed.
    assert!(daemon.info().await.cache.get(CacheGauge::Entries) >= files.len() as u64);
    let blob = |sha256: &str| daemon.cache_dir().join("blobs/sha256").join(&sha256[..2]).join(sha256);
    let (squashfs, squashfs_sha, _) = files.iter().find(|(path, _, _)| path.ends_with(".squashfs")).unwrap();
    let (_, disk_sha, _) = files.iter().find(|(path, _, _)| path.ends_with(".img")).unwrap();
    let mut damaged = std::fs::read(blob(squashfs_sha)).unwrap();
    damaged[0] ^= 0xff;
    std::fs::write(blob(squashfs_sha), damaged).unwrap();
    std::fs::remove_file(blob(disk_sha)).unwrap();

    let verify = || ctl(&daemon, &["cache", "verify"]);
    let found = verify();
    let said = String::from_utf8_lossy(&found.stdout);
    assert!(!found.status.success(), "damage found: exit 1");
    assert!(said.contains("2 bad (2 entries dropped)"), "{said}");

    origin.clear_requests();
    let again = send(&addr, "GET", &format!("/lxd/test/{squashfs}"), &[], b"").await;
    assert!(again.body == image.squashfs, "fetched again, right");
    assert_eq!(origin.file_requests(), 1);
    let clean = verify();
    assert!(clean.status.success(), "{}", String::from_utf8_lossy(&clean.stdout));
    assert!(String::from_utf8_lossy(&clean.stdout).contains(" 0 bad"));

    // Its progress, for a progress bar, on either socket: none running now.
    let progress = std::process::Command::new("curl")
        .args(["-s", "--unix-socket"])
        .arg(daemon.stats_socket())
        .arg("http://pkgproxy/pkgproxy/v1/cache/verify")
        .output()
        .unwrap();
    let progress: serde_json::Value = serde_json::from_slice(&progress.stdout).unwrap();
    assert_eq!(progress["running"], false, "{progress}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_entry_evicted_while_a_slow_client_reads_it_still_reaches_that_client_whole() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let image = LxdImage::build("big", Some(32 * MIB as usize));
    let (origin, daemon, addr) = relay(&image, "").await;
    let (path, sha256, size) =
        origin.items("20240101").into_iter().find(|(path, _, _)| path.ends_with(".squashfs")).unwrap();
    assert_eq!(send(&addr, "GET", &format!("/lxd/test/{path}"), &[], b"").await.status, 200, "cached");

    // A slow client: the head and a first bite, then the entry goes while
    // most of the 32 MiB are still to be read from the file (more than the
    // socket buffers hold).
    let mut slow = pkgproxy_testkit::client::connect(&addr).await;
    let request = format!("GET /lxd/test/{path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    slow.write_all(request.as_bytes()).await.unwrap();
    let mut received = vec![0; 64 * 1024];
    let first = slow.read(&mut received).await.unwrap();
    received.truncate(first);

    let removed = ctl(&daemon, &["cache", "rm", "lxd/file/*"]);
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    let blob = daemon.cache_dir().join("blobs/sha256").join(&sha256[..2]).join(&sha256);
    assert!(!blob.exists(), "the bytes left the cache");

    let mut rest = Vec::new();
    slow.read_to_end(&mut rest).await.unwrap();
    received.extend_from_slice(&rest);
    let head_end = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = &received[head_end..];
    assert_eq!(body.len() as u64, size, "the whole body");
    assert!(body == image.squashfs.as_ref(), "and the right one");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_larger_than_the_cache_takes_is_passed_through_and_the_rest_stays_cached() {
    let image = LxdImage::build("big", Some(8 * MIB as usize));
    let (origin, daemon, addr) = relay(&image, "max_object_size = \"4MiB\"").await;
    let big = format!("/lxd/test/{}", file_path(&origin, ".squashfs"));
    let small = format!("/lxd/test/{}", file_path(&origin, "-lxd.tar.xz"));
    for _ in 0..2 {
        let answer = send(&addr, "GET", &big, &[], b"").await;
        assert_eq!((answer.status, answer.complete, answer.body.len()), (200, true, image.squashfs.len()));
        assert!(answer.body == image.squashfs, "whole and right, each time");
        let small = send(&addr, "GET", &small, &[], b"").await;
        assert!(small.body == image.meta);
    }
    assert_eq!(origin.file_requests(), 3, "the big file twice (never cached), the small one once");
    assert!(daemon.log().contains("larger than the cache takes"), "{}", daemon.log());
    let tmp = daemon.cache_dir().join("tmp");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "nothing left behind");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_download_going_on_during_cache_verify_is_unaffected() {
    let image = LxdImage::build("slow", Some(4 * MIB as usize));
    let (origin, daemon, addr) = relay(&image, "").await;
    let path = file_path(&origin, ".squashfs");
    origin.set_trickle(Some(Duration::from_millis(30)));
    let download = {
        let (addr, path) = (addr.clone(), format!("/lxd/test/{path}"));
        tokio::spawn(async move { send(&addr, "GET", &path, &[], b"").await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let verify = ctl(&daemon, &["cache", "verify"]);
    assert!(
        verify.status.success(),
        "a download in progress is not damage: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let downloaded = download.await.unwrap();
    assert!(downloaded.complete && downloaded.body == image.squashfs, "the download went on, whole and right");
    origin.clear_requests();
    let hit = send(&addr, "GET", &format!("/lxd/test/{path}"), &[], b"").await;
    assert_eq!(hit.header("x-pkgproxy-cache"), Some("hit"), "and was cached");
}

#[tokio::test(flavor = "multi_thread")]
async fn after_kill_9_every_entry_is_intact_and_only_recent_uses_may_be_lost() {
    let image = LxdImage::build("kill", None);
    let (origin, mut daemon, addr) = relay(&image, "").await;
    let files = origin.items("20240101");
    for (path, _, _) in &files {
        assert_eq!(send(&addr, "GET", &format!("/lxd/test/{path}"), &[], b"").await.status, 200);
    }
    let before = String::from_utf8_lossy(&ctl(&daemon, &["cache", "ls", "--json"]).stdout).into_owned();
    let before: Vec<serde_json::Value> = serde_json::from_str(&before).unwrap();
    // A hit whose use is only in memory, then no chance to write it.
    let (first, _, _) = &files[0];
    assert_eq!(send(&addr, "GET", &format!("/lxd/test/{first}"), &[], b"").await.status, 200);
    daemon.kill9();
    daemon.start_again().await;
    let addr = daemon.proxy_addr().to_string();

    let after = String::from_utf8_lossy(&ctl(&daemon, &["cache", "ls", "--json"]).stdout).into_owned();
    let after: Vec<serde_json::Value> = serde_json::from_str(&after).unwrap();
    let keys = |entries: &[serde_json::Value]| {
        let mut keys: Vec<String> = entries.iter().map(|e| e["key"].as_str().unwrap().to_string()).collect();
        keys.sort();
        keys
    };
    assert_eq!(keys(&after), keys(&before), "every entry is still there");
    origin.clear_requests();
    for (path, sha256, _) in &files {
        let answer = send(&addr, "GET", &format!("/lxd/test/{path}"), &[], b"").await;
        assert_eq!(answer.header("x-pkgproxy-cache"), Some("hit"), "{path}");
        assert_eq!(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&answer.body)), *sha256, "{path}: its bytes");
    }
    assert_eq!(origin.file_requests(), 0);
    let verified = ctl(&daemon, &["cache", "verify"]);
    assert!(verified.status.success(), "nothing to repair: {}", String::from_utf8_lossy(&verified.stdout));
}

/// The issue of a second's grain: uses in one burst, all within the same
/// second (the in-process server's clock does not move at all), keep their
/// order, so eviction takes the least recently used, not the first key.
#[tokio::test(flavor = "multi_thread")]
async fn within_one_second_eviction_takes_the_least_recently_used_and_keeps_the_most() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (1..=12).map(|n| format!("f{n}.deb")).collect();
    let pool = dir.path().join("debian/pool/main/f");
    std::fs::create_dir_all(&pool).unwrap();
    for (n, name) in names.iter().enumerate() {
        std::fs::write(pool.join(name), vec![n as u8; 3_000_000]).unwrap();
    }
    let origin = pkgproxy_testkit::Origin::serve(dir.path()).await;
    let origin_url = format!("{}/debian", origin.url());
    let config =
        format!("[cache]\nmax_size = \"16MiB\"\nmax_object_size = \"4MiB\"\n{}", archive("local", &[origin_url]));
    let server = crate::inproc::Server::start(Some(&config)).await;
    let get = |name: &str| {
        let (proxy, url) = (server.proxy_addr().to_string(), format!("{}/debian/pool/main/f/{name}", origin.url()));
        async move { proxy_get(&proxy, &url, &[]).await }
    };

    // f1 is fetched again after each other file: it is always the most
    // recently used, and f2 the least.
    for name in &names {
        let answer = get(name).await;
        assert_eq!((answer.status, answer.body.len()), (200, 3_000_000), "{name}");
        assert_eq!(get("f1.deb").await.status, 200);
    }
    eventually("the cache to be within its quota", || async {
        (server.info().await.cache.get(CacheGauge::DiskBytes) <= 16 * MIB).then_some(())
    })
    .await;

    origin.clear_requests();
    let most_recent = get("f1.deb").await;
    assert_eq!(most_recent.header("x-pkgproxy-cache"), Some("hit"), "the most recently used stays");
    assert_eq!(get("f12.deb").await.header("x-pkgproxy-cache"), Some("hit"), "the next most recently used too");
    let least_recent = get("f2.deb").await;
    assert_eq!(least_recent.header("x-pkgproxy-cache"), Some("miss"), "the least recently used went");
    let reason = least_recent.header("x-pkgproxy-reason").unwrap_or_default();
    assert!(reason.starts_with("evicted ("), "{reason}");
    assert!(least_recent.body == vec![1u8; 3_000_000], "fetched again, whole");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_client_s_large_downloads_do_not_flush_everyone_else_s_entries() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("debian/pool/main/f");
    std::fs::create_dir_all(&pool).unwrap();
    let small: Vec<String> = (1..=4).map(|n| format!("small{n}.deb")).collect();
    for (n, name) in small.iter().enumerate() {
        std::fs::write(pool.join(name), vec![n as u8; 1_000_000]).unwrap();
    }
    std::fs::write(pool.join("big1.deb"), vec![7u8; 12 * MIB as usize]).unwrap();
    std::fs::write(pool.join("big2.deb"), vec![8u8; 12 * MIB as usize]).unwrap();
    let origin = pkgproxy_testkit::Origin::serve(dir.path()).await;
    let config = format!("[cache]\nmax_size = \"16MiB\"\n{}", archive("local", &[format!("{}/debian", origin.url())]));
    let server = crate::inproc::Server::start(Some(&config)).await;
    let get = |name: &str| {
        let (proxy, url) = (server.proxy_addr().to_string(), format!("{}/debian/pool/main/f/{name}", origin.url()));
        async move { proxy_get(&proxy, &url, &[]).await }
    };
    for name in &small {
        assert_eq!(get(name).await.status, 200);
    }
    // One client's two downloads of three quarters of the quota each.
    for big in ["big1.deb", "big2.deb"] {
        let answer = get(big).await;
        assert_eq!((answer.status, answer.body.len() as u64), (200, 12 * MIB), "served whole");
    }
    origin.clear_requests();
    for name in &small {
        assert_eq!(get(name).await.header("x-pkgproxy-cache"), Some("hit"), "{name} stays");
    }
    assert_eq!(get("big1.deb").await.header("x-pkgproxy-cache"), Some("miss"), "passed through, not cached");
}
