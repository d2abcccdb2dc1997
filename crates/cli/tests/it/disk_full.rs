//! A full disk: a download that does not fit is passed through, complete and
//! checked, and not cached (nothing partial is kept), and pkgproxy goes on
//! caching and serving what fits. The cache lives on a small tmpfs the test
//! mounts; skipped, saying why, where mounting is not allowed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{origin_and_daemon, sha256, sha256_file};
use pkgproxy_metrics::CacheGauge;
use pkgproxy_testkit::client::proxy_get;
use pkgproxy_testkit::{eventually, Daemon};

/// A tmpfs mounted over a folder, unmounted when dropped.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> Result<SmallDisk, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
        }
        Ok(SmallDisk { at: at.to_path_buf() })
    }
}

impl SmallDisk {
    /// Restarts `daemon` with its cache on an 8 MiB tmpfs, keeping the
    /// default 5 % of it free; `None` (said as a skip) where mounting is
    /// not allowed.
    async fn under(daemon: &mut Daemon) -> Option<SmallDisk> {
        daemon.kill9();
        match SmallDisk::mount(&daemon.cache_dir(), "8m") {
            Ok(disk) => {
                daemon.start_again_with(&["-cache-min-free", "5%"]).await;
                Some(disk)
            }
            Err(why) => {
                eprintln!("SKIPPED: cannot mount a small tmpfs for the cache ({why})");
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_download_that_does_not_fit_is_passed_through_whole_and_the_rest_is_cached() {
    let (repo, origin, mut daemon) = origin_and_daemon().await;
    let Some(_disk) = SmallDisk::under(&mut daemon).await else { return };

    let big = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-big"));
    let answer = proxy_get(daemon.proxy_addr(), &big, &[]).await;
    assert_eq!((answer.status, answer.complete), (200, true), "passed through whole");
    assert_eq!(sha256(&answer.body), sha256_file(&repo.deb_path("pkgproxy-big")), "and right");
    assert!(daemon.log().contains("disk is full"), "the log says why:\n{}", daemon.log());
    let tmp = daemon.cache_dir().join("tmp");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "the partial download was removed");
    let again = proxy_get(daemon.proxy_addr(), &big, &[]).await;
    assert_eq!((again.status, again.complete), (200, true));
    assert_ne!(again.header("x-pkgproxy-cache"), Some("hit"), "not cached");
    assert_eq!(daemon.log().matches("disk is full").count(), 1, "said once, not per download");

    let small = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-small1"));
    let answer = proxy_get(daemon.proxy_addr(), &small, &[]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(sha256(&answer.body), sha256_file(&repo.deb_path("pkgproxy-small1")));
    let again = proxy_get(daemon.proxy_addr(), &small, &[]).await;
    assert_eq!(again.header("x-pkgproxy-cache"), Some("hit"));

    // Something else fills the disk: pressure is reported, and clears
    // once the space comes back.
    let free = daemon.info().await.cache.get(CacheGauge::FreeBytes);
    let ballast = daemon.cache_dir().join("ballast");
    std::fs::write(&ballast, vec![0u8; free.saturating_sub(64 * 1024) as usize]).unwrap();
    eventually("disk pressure to be reported", || async {
        (daemon.info().await.cache.get(CacheGauge::DiskPressure) == 1).then_some(())
    })
    .await;
    eventually("disk pressure in the log", || async { daemon.log().contains("disk pressure: ").then_some(()) }).await;
    std::fs::remove_file(&ballast).unwrap();
    eventually("disk pressure to clear", || async {
        (daemon.info().await.cache.get(CacheGauge::DiskPressure) == 0).then_some(())
    })
    .await;
    eventually("its end in the log", || async { daemon.log().contains("disk pressure is over").then_some(()) }).await;
    let log = daemon.log();
    assert_eq!(log.matches("disk pressure: ").count(), 1, "said once:\n{log}");
    daemon.kill9();
}

/// Fills the file system holding `dir` to the last byte; the file is
/// returned, to be removed.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let ballast = dir.join("ballast");
    let mut file = std::fs::File::create(&ballast).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    while file.write_all(&chunk).is_ok() {}
    while file.write_all(&chunk[..512]).is_ok() {}
    ballast
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disk_full_to_the_last_byte_costs_the_cache_nothing_once_space_comes_back() {
    let (repo, origin, mut daemon) = origin_and_daemon().await;
    let Some(_disk) = SmallDisk::under(&mut daemon).await else { return };
    let url = |name: &str| format!("{}{}", origin.url(), repo.deb_url_path(name));
    let cached = proxy_get(daemon.proxy_addr(), &url("pkgproxy-small1"), &[]).await;
    assert_eq!(cached.status, 200);
    // Its body is committed after its answer: held before the disk fills.
    eventually("the first download to be held", || async {
        let again = proxy_get(daemon.proxy_addr(), &url("pkgproxy-small1"), &[]).await;
        (again.header("x-pkgproxy-cache") == Some("hit")).then_some(())
    })
    .await;

    // Not a byte left: neither a body nor the index can be written.
    let ballast = fill(&daemon.cache_dir());
    for _ in 0..2 {
        let answer = proxy_get(daemon.proxy_addr(), &url("pkgproxy-small2"), &[]).await;
        assert_eq!((answer.status, answer.complete), (200, true), "passed through whole");
        assert_eq!(sha256(&answer.body), sha256_file(&repo.deb_path("pkgproxy-small2")), "and right");
        let hit = proxy_get(daemon.proxy_addr(), &url("pkgproxy-small1"), &[]).await;
        assert_eq!(hit.header("x-pkgproxy-cache"), Some("hit"), "hits go on being served");
        assert_eq!(sha256(&hit.body), sha256_file(&repo.deb_path("pkgproxy-small1")));
    }

    std::fs::remove_file(&ballast).unwrap();
    eventually("a download to be cached again", || async {
        let answer = proxy_get(daemon.proxy_addr(), &url("pkgproxy-small2"), &[]).await;
        assert_eq!(sha256(&answer.body), sha256_file(&repo.deb_path("pkgproxy-small2")));
        (answer.header("x-pkgproxy-cache") == Some("hit")).then_some(())
    })
    .await;
    let log = daemon.log();
    assert!(!log.contains("panicked"), "{log}");
    daemon.kill9();
    daemon.restart().await;
    let after = proxy_get(daemon.proxy_addr(), &url("pkgproxy-small2"), &[]).await;
    assert_eq!(after.header("x-pkgproxy-cache"), Some("hit"), "and kept across a restart");
    daemon.kill9();
}

/// The most memory the process `pid` has held, from `/proc`.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_many_times_the_free_space_passes_through_whole_in_bounded_memory() {
    const MIB: usize = 1 << 20;
    let image = pkgproxy_testkit::LxdImage::build("large", Some(160 * MIB));
    let origin = pkgproxy_testkit::FakeSimplestreams::start().await;
    origin.publish("20240101", &image);
    let config = format!("[[lxd.remote]]\nname = \"test\"\nmirrors = [\"{}/releases\"]\n", origin.url());
    let mut daemon = Daemon::start(crate::common::PKGPROXY, Some(&config)).await;
    let Some(_disk) = SmallDisk::under(&mut daemon).await else { return };
    let addr = daemon.proxy_addr().to_string();
    let send = pkgproxy_testkit::client::send;
    let index = send(&addr, "GET", "/lxd/test/streams/v1/index.json", &[], b"").await;
    assert_eq!(index.status, 200, "{}", daemon.log());
    let items = origin.items("20240101");
    let (path, _, _) = items.iter().find(|(path, _, _)| path.ends_with(".squashfs")).unwrap();

    // Two clients at once: the download goes as fast as the slower reads.
    let url = format!("/lxd/test/{path}");
    let (first, second) = tokio::join!(send(&addr, "GET", &url, &[], b""), send(&addr, "GET", &url, &[], b""));
    for answer in [&first, &second] {
        assert_eq!((answer.status, answer.complete), (200, true));
        assert!(answer.body == image.squashfs, "the whole body, right");
    }
    let peak = peak_rss(daemon.pid().unwrap());
    assert!(peak < 120 * MIB as u64, "memory stays within the spill's window: {} MiB", peak >> 20);
    assert!(daemon.log().contains("disk is full"), "{}", daemon.log());
    daemon.kill9();
}
