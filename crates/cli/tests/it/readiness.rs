//! `pkgproxyctl check` and `warm`: what a build needs, said missing before
//! and ready after a warm, and then served to the real clients with the
//! network gone (offline mode) and nothing asked of the origin.

use pkgproxy_testkit::{AptRepo, AptSandbox, Daemon, FakeHub, GoSandbox, Image, Origin, PackageSpec, SkopeoSandbox};

use crate::common::{archive, pkgproxyctl, PKGPROXY};
use crate::go_client::upstream_with_sums;

/// `pkgproxyctl ARGS`: whether it succeeded, and what it printed.
pub(crate) fn ctl(daemon: &Daemon, args: &[&str]) -> (bool, String) {
    let output = pkgproxyctl(daemon, args);
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), printed)
}

/// `repo` served, a pkgproxy in front of it, and an apt that updated
/// through it (so pkgproxy holds the indexes): the origin, the source URL,
/// the daemon and the apt.
pub(crate) async fn updated_through_pkgproxy(repo: &AptRepo) -> (Origin, String, Daemon, AptSandbox) {
    let origin = Origin::serve(repo.root()).await;
    let source = format!("{}/debian", origin.url());
    let daemon = Daemon::start(PKGPROXY, Some(&archive("local", std::slice::from_ref(&source)))).await;
    let apt = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    apt.update().assert_success();
    (origin, source, daemon, apt)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_go_sum_warmed_then_builds_offline_with_a_fresh_module_cache() {
    let (_modules, origin, _) = upstream_with_sums().await;
    // The app's go.mod and go.sum, as the go command writes them (straight
    // from the origin: pkgproxy has seen nothing yet).
    let direct = GoSandbox::new(&origin.url());
    direct.go("direct", &["mod", "tidy"]).assert_success();
    let (go_sum, go_mod) = (direct.app().join("go.sum"), direct.app().join("go.mod"));
    let (go_sum, go_mod) = (go_sum.to_str().unwrap(), go_mod.to_str().unwrap());
    origin.clear_requests();
    let daemon = Daemon::start(PKGPROXY, Some(&format!("[go]\nproxies = [\"{}\"]\n", origin.url()))).await;

    let (ready, printed) = ctl(&daemon, &["check", "go", go_sum, "--go-mod", go_mod]);
    assert!(!ready, "{printed}");
    let zip = printed.lines().find(|line| line.starts_with("missing  example.com/hello v1.0.0 .zip"));
    assert!(zip.is_some_and(|line| line.ends_with("  never fetched")), "{printed}");
    assert!(printed.contains("0 of "), "{printed}");
    assert!(origin.requests().is_empty(), "a check asks nothing upstream");

    let (warmed, printed) = ctl(&daemon, &["warm", "go", go_sum, "--go-mod", go_mod]);
    assert!(warmed, "{printed}");
    let (ready, printed) = ctl(&daemon, &["check", "go", go_sum, "--go-mod", go_mod]);
    assert!(ready, "{printed}");
    assert!(!printed.contains("missing"), "{printed}");

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    origin.clear_requests();
    let go = GoSandbox::new(&format!("http://{}/go", daemon.proxy_addr()));
    std::fs::copy(go_sum, go.app().join("go.sum")).unwrap();
    go.go("offline", &["mod", "download"]).assert_success();
    go.go("offline", &["build", "-o", "app", "."]).assert_success();
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn apt_s_print_uris_warmed_then_a_fresh_apt_downloads_offline() {
    let repo = AptRepo::shared_default();
    let (origin, source, daemon, apt) = updated_through_pkgproxy(repo).await;
    let packages = ["pkgproxy-hello", "pkgproxy-small1"];
    let mut args = vec!["download", "--print-uris"];
    args.extend(packages);
    let uris = apt.run(&args);
    uris.assert_success();
    let list = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(list.path(), &uris.stdout).unwrap();
    let list = list.path().to_str().unwrap();

    let (ready, printed) = ctl(&daemon, &["check", "apt", "--uris", list]);
    assert!(!ready && printed.contains("0 of 2 ready"), "{printed}");
    assert!(printed.contains("missing  pkgproxy-hello_"), "{printed}");
    let (warmed, printed) = ctl(&daemon, &["warm", "apt", "--uris", list]);
    assert!(warmed && printed.contains("2 of 2 ready"), "{printed}");
    let (ready, printed) = ctl(&daemon, &["check", "--json", "apt", "--uris", list]);
    assert!(ready, "{printed}");
    let told: Vec<pkgproxy_control::ItemReadiness> = serde_json::from_str(&printed).unwrap();
    assert!(told.iter().all(|item| item.ready && item.size.is_some_and(|size| size > 0)), "{told:?}");

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    origin.clear_requests();
    let fresh = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    fresh.update().assert_success();
    fresh.download(&packages).assert_success();
    for package in packages {
        assert_eq!(std::fs::read(fresh.downloaded(package)).unwrap(), std::fs::read(repo.deb_path(package)).unwrap());
    }
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_package_and_its_chain_of_dependencies_warmed_then_a_fresh_apt_installs_it_offline() {
    let dir = tempfile::tempdir().unwrap();
    let repo = AptRepo::builder()
        .spec(PackageSpec::new("pkgproxy-top", "1.0-1", 2048).depends("pkgproxy-mid (>= 1.0)"))
        .spec(PackageSpec::new("pkgproxy-mid", "1.0-1", 2048).depends("pkgproxy-absent | pkgproxy-leaf"))
        .package("pkgproxy-leaf", "1.0-1", 2048)
        .package("pkgproxy-other", "1.0-1", 2048)
        .build(dir.path());
    let (origin, source, daemon, apt) = updated_through_pkgproxy(&repo).await;
    let sources = apt.dir().join("etc/apt/sources.list");
    let check = ["check", "apt", "--sources", sources.to_str().unwrap(), "pkgproxy-top"];

    let (ready, printed) = ctl(&daemon, &check);
    assert!(!ready, "{printed}");
    let missing: Vec<&str> = printed.lines().filter(|line| line.starts_with("missing")).collect();
    assert_eq!(missing.len(), 3, "the package and its two dependencies: {printed}");
    for name in ["pkgproxy-top", "pkgproxy-mid", "pkgproxy-leaf"] {
        assert!(missing.iter().any(|line| line.contains(name) && line.ends_with("never fetched")), "{name}: {printed}");
    }
    assert!(!printed.contains("pkgproxy-other"), "{printed}");
    assert!(printed.contains("ready    dists/testing/InRelease"), "the index apt updated from: {printed}");

    let mut warm = check;
    warm[0] = "warm";
    let (warmed, printed) = ctl(&daemon, &warm);
    assert!(warmed, "{printed}");
    let (ready, printed) = ctl(&daemon, &check);
    assert!(ready && !printed.contains("missing"), "{printed}");

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    origin.clear_requests();
    let fresh = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    fresh.update().assert_success();
    fresh.run(&["install", "--download-only", "-y", "pkgproxy-top"]).assert_success();
    let fetched: Vec<String> = std::fs::read_dir(fresh.dir().join("var/cache/apt/archives"))
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".deb"))
        .collect();
    assert_eq!(fetched.len(), 3, "{fetched:?}");
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

/// A stock Debian 12 or Ubuntu 24.04 has no sources.list: apt reads a
/// deb822 file in sources.list.d. `check apt PACKAGE` with no --sources
/// reads what apt reads, where `apt-config` says apt reads it.
#[tokio::test(flavor = "multi_thread")]
async fn check_apt_without_sources_reads_the_deb822_file_apt_reads_on_a_stock_debian() {
    let dir = tempfile::tempdir().unwrap();
    let repo = AptRepo::builder().package("pkgproxy-hello", "1.0-1", 2048).build(dir.path());
    let (_origin, source, daemon, apt) = updated_through_pkgproxy(&repo).await;
    std::fs::remove_file(apt.dir().join("etc/apt/sources.list")).unwrap();
    let keyring = apt.dir().join("keys/archive-keyring.gpg");
    let deb822 =
        format!("Types: deb\nURIs: {source}\nSuites: testing\nComponents: main\nSigned-By: {}\n", keyring.display());
    std::fs::write(apt.dir().join("etc/apt/sources.list.d/debian.sources"), deb822).unwrap();
    std::fs::write(
        apt.dir().join("etc/apt/sources.list.d/old.sources.disabled"),
        "deb http://elsewhere.example/ x y\n",
    )
    .unwrap();
    apt.update().assert_success();

    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["check", "apt", "pkgproxy-hello", "--stats-socket-path"])
        .arg(daemon.stats_socket())
        .env("APT_CONFIG", apt.config_path())
        .output()
        .unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(!output.status.success(), "the package was never fetched: {printed}");
    assert!(printed.contains("ready    dists/testing/InRelease"), "the index apt updated from: {printed}");
    assert!(printed.lines().any(|line| line.starts_with("missing") && line.contains("pkgproxy-hello")), "{printed}");
    assert!(!printed.contains("elsewhere.example"), "a file apt does not read is not read: {printed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_about_to_expire_is_warned_of_by_check_info_and_the_status_page() {
    let dir = tempfile::tempdir().unwrap();
    // Valid for two hours from now.
    let repo = AptRepo::builder()
        .package("pkgproxy-hello", "1.0-1", 1024)
        .valid_for(std::time::Duration::from_secs(2 * 3600))
        .build(dir.path());
    let (_origin, _source, daemon, apt) = updated_through_pkgproxy(&repo).await;
    let sources = apt.dir().join("etc/apt/sources.list");
    let check = ["check", "apt", "--sources", sources.to_str().unwrap(), "pkgproxy-hello"];
    let mut warm = check;
    warm[0] = "warm";
    let (warmed, printed) = ctl(&daemon, &warm);
    assert!(warmed, "about to expire is not expired: {printed}");
    let warning = "local/dists/testing: its Release is valid only until ";
    let line = printed.lines().find(|line| line.starts_with("warning  "));
    assert!(
        line.is_some_and(|line| line.contains(warning) && line.contains("Acquire::Check-Valid-Until=false")),
        "{printed}"
    );

    let (_, info) = ctl(&daemon, &["info"]);
    assert!(info.contains(&format!("warning: {warning}")) && info.contains("[check-valid-until=no]"), "{info}");
    let page = pkgproxy_testkit::client::get(daemon.proxy_addr(), "/").await;
    let page = String::from_utf8_lossy(&page.body);
    assert!(page.contains(warning) && page.contains("[check-valid-until=no]"), "{page}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_warmed_is_then_pulled_by_skopeo_offline_with_nothing_asked_of_the_hub() {
    let hub = FakeHub::start().await;
    let image = Image::build("warm me", None);
    hub.publish("library/hello", "v1", &image);
    let config = hub.config("docker.io");
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let reference = "hello:v1";

    let (ready, printed) = ctl(&daemon, &["check", "registry", reference]);
    assert!(!ready, "{printed}");
    assert!(printed.contains("missing  docker.io/library/hello/manifests/v1"), "{printed}");
    assert!(hub.requests().is_empty(), "a check asks nothing of the hub: {:#?}", hub.requests());

    let (warmed, printed) = ctl(&daemon, &["warm", "registry", reference]);
    assert!(warmed, "{printed}");
    let (ready, printed) = ctl(&daemon, &["check", "registry", reference]);
    assert!(ready, "{printed}");
    for part in [&image.config, &image.layer] {
        assert!(printed.contains(&format!("ready    docker.io/library/hello/blobs/{}", part.digest)), "{printed}");
    }

    // Through an index: the platform's manifest, then its blobs.
    let multi = ["--platform", "linux/amd64", "hello:v1-multi"];
    let (warmed, printed) = ctl(&daemon, &[&["warm", "registry"][..], &multi].concat());
    assert!(warmed, "{printed}");
    let platform_manifest = format!("ready    docker.io/library/hello/manifests/{}", image.manifest.digest);
    assert!(printed.contains(&platform_manifest), "{printed}");
    let (ready, printed) = ctl(&daemon, &["check", "registry", "--platform", "linux/s390x", "hello:v1-multi"]);
    assert!(!ready && printed.contains("names no image for linux/s390x"), "{printed}");

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    hub.clear_requests();
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    let pulled = skopeo.copy("docker.io/library/hello:v1", "offline");
    assert!(pulled.success, "{}", pulled.stderr);
    assert!(hub.requests().is_empty(), "{:#?}", hub.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_an_export_or_a_removal_of_nothing_is_an_error_not_a_success() {
    let daemon = Daemon::start(PKGPROXY, None).await;
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("go.sum");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.to_str().unwrap();

    for verb in ["check", "warm"] {
        let (ok, printed) = ctl(&daemon, &[verb, "go", empty]);
        assert!(!ok, "{verb} of nothing: {printed}");
        assert!(printed.contains("names nothing"), "{verb}: {printed}");
        assert!(!printed.contains("0 of 0 ready"), "{verb}: {printed}");
    }

    let bundle = dir.path().join("e.tar");
    let (ok, printed) = ctl(&daemon, &["export", "-o", bundle.to_str().unwrap(), "go", empty]);
    assert!(!ok, "export of nothing: {printed}");
    assert!(printed.contains("names nothing"), "{printed}");
    assert!(!bundle.exists(), "no bundle is written");

    let (ok, printed) = ctl(&daemon, &["cache", "rm", "go/nothing/*"]);
    assert!(!ok, "a removal that matched nothing: {printed}");
    assert!(printed.contains("no entry matches \"go/nothing/*\""), "{printed}");
}
