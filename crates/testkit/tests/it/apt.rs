//! The repository builder and the sandboxed apt, straight against the fake
//! origin (no proxy): if these pass, a failure in a proxy test is the proxy's.

use std::fs;
use std::time::{Duration, Instant};

use pkgproxy_testkit::{AptRepo, AptSandbox, Origin, PackageSpec};

/// A runtime whose worker thread runs the origin while the test thread
/// blocks on apt-get.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

fn sandbox(origin: &Origin, repo: &AptRepo) -> AptSandbox {
    let source = format!("{}/debian", origin.url());
    AptSandbox::new(None, &source, repo.keyring()).option("Acquire::Retries", "0")
}

#[test]
fn shared_default_repo_is_a_signed_by_hash_repository() {
    let repo = AptRepo::shared_default();
    let names: Vec<&str> = repo.packages().iter().map(|p| p.spec.name.as_str()).collect();
    assert_eq!(names, ["pkgproxy-hello", "pkgproxy-big", "pkgproxy-small1", "pkgproxy-small2"]);
    assert_eq!(repo.deb_filename("pkgproxy-hello"), "pool/main/pkgproxy-hello_1.0-1_all.deb");
    assert_eq!(repo.deb_path("pkgproxy-hello"), repo.root().join("debian/pool/main/pkgproxy-hello_1.0-1_all.deb"));
    let big = fs::metadata(repo.deb_path("pkgproxy-big")).unwrap().len();
    assert!(big > 20 * 1024 * 1024 && big < 21 * 1024 * 1024, "{big} bytes");

    let dists = repo.root().join("debian/dists/testing");
    let release = fs::read_to_string(dists.join("Release")).unwrap();
    assert!(release.contains("Acquire-By-Hash: yes"), "{release}");
    assert!(release.contains("Architectures: amd64 all"), "{release}");
    let inrelease = fs::read_to_string(dists.join("InRelease")).unwrap();
    assert!(inrelease.starts_with("-----BEGIN PGP SIGNED MESSAGE-----"));
    assert!(dists.join("Release.gpg").is_file());
    for arch in ["binary-all", "binary-amd64"] {
        let dir = dists.join("main").join(arch);
        let packages = fs::read_to_string(dir.join("Packages")).unwrap();
        assert!(packages.contains("Depends: pkgproxy-big"), "{packages}");
        for hash in ["SHA256", "SHA512"] {
            let copies = fs::read_dir(dir.join("by-hash").join(hash)).unwrap().count();
            assert_eq!(copies, 3, "{arch} {hash}: Packages, .gz, .xz");
        }
    }
}

#[test]
fn apt_updates_and_downloads_straight_from_the_origin() {
    let repo = AptRepo::shared_default();
    let rt = runtime();
    let origin = rt.block_on(Origin::serve(repo.root()));
    let apt = sandbox(&origin, repo);

    apt.update().assert_success();
    assert_eq!(origin.count_path("/debian/dists/testing/InRelease"), 1);
    assert!(origin.count_path("/by-hash/SHA512/") >= 1, "{:#?}", origin.requests());

    apt.download(&["pkgproxy-hello"]).assert_success();
    let got = fs::read(apt.downloaded("pkgproxy-hello")).unwrap();
    assert!(got == fs::read(repo.deb_path("pkgproxy-hello")).unwrap());
    assert_eq!(origin.count_path(&repo.deb_url_path("pkgproxy-hello")), 1);

    // Nothing changed: apt revalidates InRelease only, and the origin says 304.
    origin.clear_requests();
    let again = apt.update();
    again.assert_success();
    assert!(again.stdout.contains("Hit:"), "{again}");
    let requests = origin.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert!(requests[0].header("if-modified-since").is_some());
}

#[test]
fn each_sandbox_starts_from_empty_apt_state() {
    let repo = AptRepo::shared_default();
    let rt = runtime();
    let origin = rt.block_on(Origin::serve(repo.root()));
    sandbox(&origin, repo).update().assert_success();

    let fresh = sandbox(&origin, repo);
    let lists: Vec<_> = fs::read_dir(fresh.lists_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().unwrap().is_file() && e.file_name() != "lock")
        .collect();
    assert!(lists.is_empty(), "{lists:?}");
    let out = fresh.download(&["pkgproxy-small1"]);
    out.assert_failure();
    assert!(out.contains("Unable to locate package"), "{out}");
}

#[test]
fn update_fails_when_the_release_files_are_unavailable() {
    let repo = AptRepo::shared_default();
    let rt = runtime();
    let origin = rt.block_on(Origin::serve(repo.root()));
    for file in ["InRelease", "Release"] {
        origin.set_status_override(&format!("/debian/dists/testing/{file}"), Some(503));
    }
    let out = sandbox(&origin, repo).update();
    out.assert_failure();
    assert!(out.contains("503"), "{out}");
}

#[test]
fn a_run_past_its_deadline_is_killed() {
    let repo = AptRepo::shared_default();
    let rt = runtime();
    let origin = rt.block_on(Origin::serve(repo.root()));
    let apt = sandbox(&origin, repo).timeout(Duration::from_secs(2));
    apt.update().assert_success();
    origin.set_rate_limit(Some(64 * 1024));
    let start = Instant::now();
    let out = apt.download(&["pkgproxy-big"]);
    assert!(out.timed_out, "{out}");
    assert!(!out.success());
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn added_and_replaced_packages_are_republished() {
    let tmp = tempfile::tempdir().unwrap();
    let mut repo = AptRepo::builder()
        .package("pkgproxy-a", "1.0-1", 1000)
        .package("pkgproxy-b", "1.0-1", 2000)
        .depends("pkgproxy-b", "pkgproxy-a")
        .build(tmp.path());
    assert_eq!(repo.package("pkgproxy-b").spec.depends.as_deref(), Some("pkgproxy-a"));
    let rt = runtime();
    let origin = rt.block_on(Origin::serve(repo.root()));
    let apt = sandbox(&origin, &repo);
    apt.update().assert_success();

    let old_a = repo.deb_path("pkgproxy-a");
    repo.add_package("pkgproxy-a", "1.1-1", 1500);
    repo.add(PackageSpec::new("pkgproxy-c", "1:2.0-1", 100).depends("pkgproxy-a (>= 1.1)"));
    assert!(!old_a.exists(), "the replaced .deb leaves the pool");
    assert_eq!(repo.deb_filename("pkgproxy-c"), "pool/main/pkgproxy-c_2.0-1_all.deb");
    let release = fs::read_to_string(repo.root().join("debian/dists/testing/Release")).unwrap();
    let listed: Vec<&str> = release.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    assert!(listed.contains(&"main/binary-amd64/Packages.xz"), "{release}");
    assert!(
        !listed.iter().any(|f| f.ends_with("Release") || f.contains("by-hash")),
        "a rebuilt Release lists only the indexes: {release}"
    );

    apt.update().assert_success();
    apt.download(&["pkgproxy-a", "pkgproxy-c"]).assert_success();
    for name in ["pkgproxy-a", "pkgproxy-c"] {
        let got = fs::read(apt.downloaded(name)).unwrap();
        assert!(got == fs::read(repo.deb_path(name)).unwrap(), "{name} differs");
    }
    assert!(apt.downloaded("pkgproxy-a").ends_with("pkgproxy-a_1.1-1_all.deb"));
}

#[test]
fn a_proxy_url_routes_every_request_through_that_proxy() {
    let repo = AptRepo::shared_default();
    let rt = runtime();
    // The origin answers absolute-form requests by path, so it can stand in
    // for a proxy; the source itself points at a port nobody listens on.
    let proxy = rt.block_on(Origin::serve(repo.root()));
    let refusing = pkgproxy_testkit::RefusingPort::new();
    let dead = refusing.addr();
    let source = format!("http://{dead}/debian");
    let apt = AptSandbox::new(Some(&proxy.url()), &source, repo.keyring()).option("Acquire::Retries", "0");
    apt.update().assert_success();
    apt.download(&["pkgproxy-small2"]).assert_success();
    let requests = proxy.requests();
    assert!(requests.len() >= 3, "{requests:#?}");
    let target = dead.to_string();
    assert!(requests.iter().all(|r| r.header("host") == Some(target.as_str())));
    assert_eq!(proxy.count_path(&repo.deb_url_path("pkgproxy-small2")), 1);
}
