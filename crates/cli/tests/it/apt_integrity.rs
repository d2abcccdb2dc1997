//! Nothing that fails its published checksum is cached or served: the real
//! `apt-get` against a repository the test changes under it (a mirror caught
//! mid-sync, a lagging mirror, corrupted packages), through pkgproxy.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{archive, revalidating_at_once, PKGPROXY, REVALIDATE_FLOOR};
use pkgproxy_metrics::CacheGauge;
use pkgproxy_testkit::client::proxy_get;
use pkgproxy_testkit::{eventually, AptOutput, AptRepo, AptSandbox, Daemon, Origin};

const INDEX_DIR: &str = "debian/dists/testing/main/binary-amd64";

/// A repository of its own (tests change it), with a copy of its first
/// generation that an origin serves from `live`.
struct Mirror {
    _dir: tempfile::TempDir,
    repo: AptRepo,
    live: PathBuf,
    generations: Vec<PathBuf>,
}

impl Mirror {
    fn new() -> Mirror {
        let dir = tempfile::Builder::new().prefix("pp-int").tempdir().unwrap();
        let repo = AptRepo::builder()
            .package("pkgproxy-hello", "1.0-1", 4096)
            .package("pkgproxy-small1", "1.0-1", 2048)
            .build(&dir.path().join("r"));
        let live = dir.path().join("live");
        let mut mirror = Mirror { _dir: dir, repo, live, generations: vec![] };
        let first = mirror.snapshot();
        mirror.publish(&first);
        mirror
    }

    /// Copies the repository as it is now; returns the copy's root.
    fn snapshot(&mut self) -> PathBuf {
        let to = self._dir.path().join(format!("gen{}", self.generations.len() + 1));
        copy_tree(self.repo.root(), &to);
        self.generations.push(to.clone());
        to
    }

    /// Makes the live tree exactly `tree`.
    fn publish(&self, tree: &Path) {
        if self.live.exists() {
            std::fs::remove_dir_all(&self.live).unwrap();
        }
        copy_tree(tree, &self.live);
    }

    /// Overwrites files of the live tree (`relative` paths) with those of `tree`.
    fn publish_files(&self, tree: &Path, relative: &[&str]) {
        for path in relative {
            std::fs::copy(tree.join(path), self.live.join(path)).unwrap();
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(status.success(), "cp -a {} {}", from.display(), to.display());
}

const RELEASE_FILES: [&str; 3] =
    ["debian/dists/testing/InRelease", "debian/dists/testing/Release", "debian/dists/testing/Release.gpg"];

/// apt's words for a file that does not match its Release.
fn saw_mismatch(output: &AptOutput) -> bool {
    let text = format!("{}{}", output.stdout, output.stderr);
    text.contains("Hash Sum mismatch") || text.contains("unexpected size") || text.contains("Hashes of expected file")
}

async fn daemon_for(origins: &[&Origin]) -> Daemon {
    let mirrors: Vec<String> = origins.iter().map(|o| format!("{}/debian", o.url())).collect();
    Daemon::start(PKGPROXY, Some(&revalidating_at_once(&archive("local", &mirrors)))).await
}

/// Waits until the daemon has learnt `n` pool files (learning a `Packages`
/// index happens after the client got it).
async fn learnt_pool_files(daemon: &Daemon, n: u64) {
    let learnt = || async { (daemon.info().await.learned["apt_index"]["pool_files"] >= n).then_some(()) };
    eventually(&format!("the daemon to learn {n} pool files"), learnt).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mirror_caught_mid_sync_gives_apt_a_clear_failure_and_then_recovers() {
    let mut mirror = Mirror::new();
    let origin = Origin::serve(&mirror.live).await;
    let daemon = daemon_for(&[&origin]).await;
    let source = format!("{}/debian", origin.url());
    let proxied = |repo: &AptRepo| AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    proxied(&mirror.repo).update().assert_success();

    mirror.repo.add_package("pkgproxy-new", "1.0-1", 1024);
    let second = mirror.snapshot();
    let first = mirror.generations[0].clone();

    // The Release moved to the new generation; the indexes (and their
    // by-hash copies) are still the old ones.
    mirror.publish(&first);
    mirror.publish_files(&second, &RELEASE_FILES);
    let direct = AptSandbox::new(None, &source, mirror.repo.keyring()).update();
    assert!(saw_mismatch(&direct), "without pkgproxy apt sees the mismatch:\n{direct}");
    let through = proxied(&mirror.repo);
    let mid_sync = through.update();
    assert!(!saw_mismatch(&mid_sync), "pkgproxy let a mismatch through:\n{mid_sync}");
    assert!(!mid_sync.success(), "the new indexes are nowhere, so the update must fail:\n{mid_sync}");

    // The reverse: new indexes under an old Release, with no by-hash copies.
    mirror.publish(&second);
    mirror.publish_files(&first, &RELEASE_FILES);
    std::fs::remove_dir_all(mirror.live.join(INDEX_DIR).join("by-hash")).unwrap();
    let reverse = proxied(&mirror.repo).update();
    assert!(!saw_mismatch(&reverse), "pkgproxy let a mismatch through:\n{reverse}");

    // The mirror is consistent again: the same apt state updates, no purge.
    mirror.publish(&second);
    through.update().assert_success();
    through.download(&["pkgproxy-new"]).assert_success();
}

/// Corrupts a `.deb` at the origin after apt learnt the index; checks that
/// it is neither served whole nor cached, and is fetched again once fixed.
async fn corrupted_deb_is_refused(corrupt: fn(&[u8]) -> Vec<u8>) {
    let mirror = Mirror::new();
    let origin = Origin::serve(&mirror.live).await;
    let daemon = daemon_for(&[&origin]).await;
    let source = format!("{}/debian", origin.url());
    let apt = AptSandbox::new(Some(&daemon.proxy_url()), &source, mirror.repo.keyring());
    apt.update().assert_success();
    learnt_pool_files(&daemon, 2).await;

    let deb_path = mirror.repo.deb_url_path("pkgproxy-hello");
    let at_origin = mirror.live.join(deb_path.trim_start_matches('/'));
    let good = std::fs::read(&at_origin).unwrap();
    let url = format!("{}{deb_path}", origin.url());
    std::fs::write(&at_origin, corrupt(&good)).unwrap();

    apt.download(&["pkgproxy-hello"]).assert_failure();
    let answer = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert!(answer.status != 200 || !answer.complete, "corrupt bytes served whole: {}", answer.status);
    assert_ne!(answer.header("x-pkgproxy-cache"), Some("hit"));

    std::fs::write(&at_origin, &good).unwrap();
    let before = origin.count_path(&deb_path);
    apt.download(&["pkgproxy-hello"]).assert_success();
    assert_eq!(std::fs::read(apt.downloaded("pkgproxy-hello")).unwrap(), good);
    assert_eq!(origin.count_path(&deb_path), before + 1, "fetched again once fixed");
    let hit = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert_eq!(hit.header("x-pkgproxy-cache"), Some("hit"));
    assert_eq!(hit.body, good);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deb_with_one_byte_flipped_at_the_origin_is_not_cached() {
    corrupted_deb_is_refused(|good| {
        let mut bad = good.to_vec();
        let middle = bad.len() / 2;
        bad[middle] ^= 0x01;
        bad
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_truncated_deb_at_the_origin_is_not_cached() {
    corrupted_deb_is_refused(|good| good[..good.len() - 100].to_vec()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_from_a_lagging_mirror_does_not_displace_the_newer_one() {
    let mut mirror = Mirror::new();
    let lagging_root = mirror.generations[0].clone();
    mirror.repo.add_package("pkgproxy-new", "1.0-1", 1024);
    let second = mirror.snapshot();
    mirror.publish(&second);
    let current = Origin::serve(&mirror.live).await;
    let lagging = Origin::serve(&lagging_root).await;
    let daemon = daemon_for(&[&current, &lagging]).await;

    // Both mirrors are instances of one pool: each step steers the requests
    // to one of them by having the other answer 503.
    let release = "/debian/dists/testing/InRelease";
    lagging.set_status_override(release, Some(503));
    let via_current =
        AptSandbox::new(Some(&daemon.proxy_url()), &format!("{}/debian", current.url()), mirror.repo.keyring());
    via_current.update().assert_success();
    let newer = std::fs::read(second.join("debian/dists/testing/InRelease")).unwrap();

    lagging.set_status_override(release, None);
    current.set_status_override(release, Some(503));
    let before = lagging.count_path("/dists/testing/InRelease");
    let url = format!("{}{release}", lagging.url());
    let answer = proxy_get(daemon.proxy_addr(), &url, &[("cache-control", "max-age=0")]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, newer, "the lagging mirror's older Release displaced the newer one");
    assert_eq!(lagging.count_path("/dists/testing/InRelease"), before + 1, "the lagging mirror was asked");
    current.set_status_override(release, None);

    // apt pointed at the lagging mirror gets the newer, consistent set.
    let via_lagging =
        AptSandbox::new(Some(&daemon.proxy_url()), &format!("{}/debian", lagging.url()), mirror.repo.keyring());
    let update = via_lagging.update();
    assert!(!saw_mismatch(&update), "{update}");
    update.assert_success();
    let known = via_lagging.run(&["download", "--print-uris", "pkgproxy-new"]);
    known.assert_success();
    assert!(known.stdout.contains("pkgproxy-new_1.0-1_all.deb"), "apt knows the newer generation's package:\n{known}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cached_index_superseded_by_a_newer_release_is_not_served() {
    let mut mirror = Mirror::new();
    let origin = Origin::serve(&mirror.live).await;
    let daemon = daemon_for(&[&origin]).await;
    let base = format!("{}/debian/dists/testing", origin.url());
    let by_name = format!("{}/{}/Packages.xz", origin.url(), INDEX_DIR);

    let release = proxy_get(daemon.proxy_addr(), &format!("{base}/InRelease"), &[]).await;
    assert_eq!(release.status, 200);
    let old = proxy_get(daemon.proxy_addr(), &by_name, &[]).await;
    assert_eq!(old.status, 200);

    mirror.repo.add_package("pkgproxy-new", "1.0-1", 1024);
    let second = mirror.snapshot();
    mirror.publish(&second);
    let fresh = proxy_get(daemon.proxy_addr(), &format!("{base}/InRelease"), &[("cache-control", "max-age=0")]).await;
    assert_eq!(fresh.body, std::fs::read(second.join("debian/dists/testing/InRelease")).unwrap());

    let new = proxy_get(daemon.proxy_addr(), &by_name, &[]).await;
    assert_eq!(new.status, 200);
    assert_eq!(new.body, std::fs::read(second.join(INDEX_DIR).join("Packages.xz")).unwrap());
    assert_ne!(new.body, old.body);
    let why = new.header("x-pkgproxy-reason").unwrap_or_default();
    assert!(why.starts_with("superseded by Release of 20") && why.ends_with(" UTC"), "{why}");

    // Once more, with the mirror failing: the superseded copy is still not
    // served (not even as stale), and neither is the new one's absence hidden.
    mirror.repo.add_package("pkgproxy-newer", "1.0-1", 1024);
    let third = mirror.snapshot();
    mirror.publish_files(&third, &RELEASE_FILES);
    let third_release =
        proxy_get(daemon.proxy_addr(), &format!("{base}/InRelease"), &[("cache-control", "max-age=0")]).await;
    assert_eq!(third_release.body, std::fs::read(third.join("debian/dists/testing/InRelease")).unwrap());
    origin.set_status_override(&format!("/{INDEX_DIR}/Packages.xz"), Some(503));
    let refused = proxy_get(daemon.proxy_addr(), &by_name, &[]).await;
    assert_ne!(refused.status, 200, "a superseded index was served");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_keeps_what_the_index_learnt() {
    let mirror = Mirror::new();
    let origin = Origin::serve(&mirror.live).await;
    let mut daemon = daemon_for(&[&origin]).await;
    let source = format!("{}/debian", origin.url());
    AptSandbox::new(Some(&daemon.proxy_url()), &source, mirror.repo.keyring()).update().assert_success();
    learnt_pool_files(&daemon, 2).await;
    daemon.restart().await;
    let info = daemon.info().await;
    assert_eq!(info.learned["apt_index"]["suites"], 1, "{info:?}");
    assert_eq!(info.learned["apt_index"]["pool_files"], 2, "{info:?}");

    // What was learnt before the restart still guards the pool.
    let deb_path = mirror.repo.deb_url_path("pkgproxy-small1");
    let at_origin = mirror.live.join(deb_path.trim_start_matches('/'));
    let mut bad = std::fs::read(&at_origin).unwrap();
    bad[10] ^= 0xff;
    std::fs::write(&at_origin, &bad).unwrap();
    let answer = proxy_get(daemon.proxy_addr(), &format!("{}{deb_path}", origin.url()), &[]).await;
    assert!(answer.status != 200 || !answer.complete, "corrupt bytes served after a restart");
    assert_eq!(daemon.info().await.cache.get(CacheGauge::Entries), info.cache.get(CacheGauge::Entries));
}

/// apt keeps what it got of a cut index transfer in `lists/partial/`, dated
/// with the answer's `Last-Modified`, and resumes it on the next update by
/// the new by-hash URL, with `Range` and `If-Range: <that date>`. A mirror
/// that syncs its whole tree within one second gives the new file the old
/// one's date, so pkgproxy must answer such a resume with the whole file,
/// never with the new file's tail spliced onto the old file's head.
#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_index_is_never_spliced_from_two_files_after_a_same_second_sync() {
    let dir = tempfile::Builder::new().prefix("pp-splice").tempdir().unwrap();
    let mut repo = AptRepo::builder().package("pkgproxy-hello", "1.0-1", 4096).build(&dir.path().join("r"));
    // Every generation's index files carry this one date.
    let synced_at = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    repo.set_index_mtimes(synced_at);
    let origin = Origin::serve(repo.root()).await;
    let daemon = daemon_for(&[&origin]).await;
    let apt = AptSandbox::new(Some(&daemon.proxy_url()), &format!("{}/debian", origin.url()), repo.keyring());
    apt.update().assert_success();

    for round in 0..20 {
        let partials = leave_partial_indexes(&apt, &repo, synced_at);
        let added = format!("pkgproxy-sync{round}");
        repo.add_package(&added, "1.0-1", 512);
        repo.set_index_mtimes(synced_at);

        let update = apt.update();
        assert!(!saw_mismatch(&update), "round {round}: a resumed index was spliced:\n{update}");
        update.assert_success();
        let known = apt.run(&["download", "--print-uris", &added]);
        assert!(known.success() && known.stdout.contains(&added), "round {round}: apt lacks the new index:\n{known}");
        for partial in partials {
            assert!(!partial.exists(), "round {round}: apt did not take up {}", partial.display());
        }
    }
}

/// Leaves in apt's `lists/partial/` the first half of each `Packages.xz` the
/// repository serves now, dated `date`, as a transfer cut half way does;
/// returns their paths.
fn leave_partial_indexes(apt: &AptSandbox, repo: &AptRepo, date: std::time::SystemTime) -> Vec<PathBuf> {
    let lists = apt.lists_dir();
    let mut partials = Vec::new();
    for entry in std::fs::read_dir(&lists).unwrap().map(Result::unwrap) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(dir) = name.strip_suffix("_Packages").and_then(|n| n.split_once("_dists_")).map(|(_, d)| d) else {
            continue;
        };
        let served = repo.repo_dir().join("dists").join(dir.replace('_', "/")).join("Packages.xz");
        let old = std::fs::read(&served).unwrap_or_else(|e| panic!("{}: {e}", served.display()));
        let partial = lists.join("partial").join(format!("{name}.xz"));
        std::fs::write(&partial, &old[..old.len() / 2]).unwrap();
        std::fs::File::options().write(true).open(&partial).unwrap().set_modified(date).unwrap();
        partials.push(partial);
    }
    assert!(!partials.is_empty(), "apt keeps no Packages lists in {}", lists.display());
    partials
}

/// A mirror whose only file is `dists/stable/InRelease`, dated as the test
/// says, and a pkgproxy (in process) that knows it as archive `q`.
async fn dated_mirror() -> (tempfile::TempDir, Origin, crate::inproc::Server, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("debian/dists/stable")).unwrap();
    let origin = Origin::serve(dir.path()).await;
    let server = crate::inproc::Server::start(Some(&archive("q", &[format!("{}/debian", origin.url())]))).await;
    let url = format!("{}/debian/dists/stable/InRelease", origin.url());
    (dir, origin, server, url)
}

/// Publishes an `InRelease` dated `date` in the mirror at `dir`.
fn publish_dated(dir: &Path, date: std::time::SystemTime) -> Vec<u8> {
    let date = httpdate::fmt_http_date(date).replace("GMT", "UTC");
    let body = format!("Origin: Test\nSuite: stable\nCodename: stable\nDate: {date}\nArchitectures: amd64\nComponents: main\nSHA256:\n");
    std::fs::write(dir.join("debian/dists/stable/InRelease"), &body).unwrap();
    body.into_bytes()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_dated_in_the_future_is_refused_and_never_keeps_the_genuine_one_out() {
    let (dir, _origin, server, url) = dated_mirror().await;
    let now = std::time::SystemTime::now();
    publish_dated(dir.path(), now + Duration::from_secs(75 * 365 * 86_400));
    let future = proxy_get(server.proxy_addr(), &url, &[]).await;
    assert_eq!(future.status, 502, "{:?}", String::from_utf8_lossy(&future.body));
    let why = future.header("x-pkgproxy-reason").unwrap_or_default();
    assert!(why.contains("ahead of this clock"), "{why}");

    // The mirror's clock is right again: its Release is taken at once.
    let genuine = publish_dated(dir.path(), now - Duration::from_secs(60));
    let fixed = proxy_get(server.proxy_addr(), &url, &[]).await;
    assert_eq!((fixed.status, fixed.body.as_ref()), (200, genuine.as_slice()));
}

#[tokio::test(flavor = "multi_thread")]
async fn removing_a_suite_s_inrelease_by_hand_forgets_its_release_so_an_older_one_is_taken() {
    let (dir, _origin, server, url) = dated_mirror().await;
    let now = std::time::SystemTime::now();
    let newer = publish_dated(dir.path(), now - Duration::from_secs(60));
    assert_eq!(proxy_get(server.proxy_addr(), &url, &[]).await.body.as_ref(), newer.as_slice());

    // An older Release, the held one's rollback protection keeps out...
    let older = publish_dated(dir.path(), now - Duration::from_secs(7200));
    server.clock().advance(REVALIDATE_FLOOR);
    let kept = proxy_get(server.proxy_addr(), &url, &[("cache-control", "max-age=0")]).await;
    assert_eq!((kept.status, kept.body.as_ref()), (200, newer.as_slice()));
    assert!(kept.header("x-pkgproxy-reason").unwrap_or_default().contains("older"));

    // ...until the admin removes the suite's files: then it is taken.
    let (status, _) = server
        .admin()
        .send(http::Method::DELETE, "/pkgproxy/v1/cache/entries?pattern=apt/q/dists/*", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let taken = proxy_get(server.proxy_addr(), &url, &[]).await;
    assert_eq!((taken.status, taken.body.as_ref()), (200, older.as_slice()));
}
