//! The real dnf (Debian's dnf 4, in an installroot of its own) through
//! pkgproxy's RPM side, against repositories made in the test with
//! `rpmbuild` and `createrepo_c`: every repodata file and package fetched
//! once and checked against the chain of checksums above it, served again
//! from the cache (offline too), and what cannot be had told at once in
//! dnf's own output.

use std::path::Path;
use std::time::Duration;

use pkgproxy_testkit::client::get;
use pkgproxy_testkit::rpmrepo::{self, Createrepo};
use pkgproxy_testkit::{DnfOutput, DnfSandbox, Origin, RpmPackage};

use crate::inproc::Server;

/// The packages of the repository: `hello` requires `libgreet`; `other`
/// stands alone; `unseen` is never installed before the test asks for it
/// offline; `big` is large.
fn packages() -> Vec<RpmPackage> {
    vec![
        RpmPackage::new("hello", "1.0").requires("libgreet"),
        RpmPackage::new("libgreet", "0.3"),
        RpmPackage::new("other", "2.1"),
        RpmPackage::new("unseen", "1.0"),
        RpmPackage::new("big", "1.0").sized(4 * 1024 * 1024),
    ]
}

/// A repository of `packages` in `root/Packages`, its metadata made as
/// `options` say.
fn repository(root: &Path, packages: &[RpmPackage], options: &Createrepo) {
    rpmrepo::build(packages, &root.join("Packages"));
    rpmrepo::createrepo(root, options);
}

fn config(mirrors: &[String], metalink: Option<&str>) -> String {
    let mirrors: Vec<String> = mirrors.iter().map(|url| format!("{url:?}")).collect();
    let metalink = metalink.map(|url| format!("metalink = {url:?}\n")).unwrap_or_default();
    format!("[[rpm.repository]]\nname = \"local\"\nmirrors = [{}]\n{metalink}", mirrors.join(", "))
}

fn baseurl(server: &Server) -> String {
    format!("http://{}/rpm/local/", server.proxy_addr())
}

/// `dnf install --downloadonly` of `names` in `sandbox`, off the runtime's
/// threads (pkgproxy runs on them).
async fn download(sandbox: &std::sync::Arc<DnfSandbox>, names: &[&'static str]) -> DnfOutput {
    let (sandbox, names) = (std::sync::Arc::clone(sandbox), names.to_vec());
    tokio::task::spawn_blocking(move || sandbox.download(&names)).await.unwrap()
}

async fn dnf(sandbox: &std::sync::Arc<DnfSandbox>, args: &[&'static str]) -> DnfOutput {
    let (sandbox, args) = (std::sync::Arc::clone(sandbox), args.to_vec());
    tokio::task::spawn_blocking(move || sandbox.run(&args)).await.unwrap()
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = pkgproxy_control::ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

/// How many requests `origin` had for paths ending with `suffix`.
fn asked(origin: &Origin, suffix: &str) -> usize {
    origin.count(|request| request.path.ends_with(suffix))
}

#[tokio::test(flavor = "multi_thread")]
async fn dnf_installs_through_pkgproxy_and_a_fresh_install_asks_nothing_upstream_offline_too() {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path(), &packages(), &Createrepo::default());
    let origin = Origin::serve(dir.path()).await;
    let server = Server::start(Some(&config(&[origin.url()], None))).await;
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &baseurl(&server)));

    let installed = download(&sandbox, &["hello", "other"]).await;
    assert!(installed.success, "{}", installed.output);
    assert_eq!(
        sandbox.downloaded(),
        ["hello-1.0-1.noarch.rpm", "libgreet-0.3-1.noarch.rpm", "other-2.1-1.noarch.rpm"],
        "{}",
        installed.output
    );
    for package in ["hello-1.0-1.noarch.rpm", "libgreet-0.3-1.noarch.rpm", "other-2.1-1.noarch.rpm"] {
        assert_eq!(asked(&origin, package), 1, "{package} fetched once: {:#?}", origin.requests());
    }
    assert_eq!(asked(&origin, "primary.xml.gz"), 1, "{:#?}", origin.requests());

    // Again with an empty dnf cache (dnf asks repomd.xml with no-cache):
    // all from pkgproxy, nothing upstream within metadata_ttl.
    origin.clear_requests();
    sandbox.clear_cache();
    let again = download(&sandbox, &["hello", "other"]).await;
    assert!(again.success, "{}", again.output);
    assert_eq!(sandbox.downloaded().len(), 3, "{}", again.output);
    assert!(origin.requests().is_empty(), "nothing asked upstream: {:#?}", origin.requests());

    // Offline, with an empty dnf cache once more: the same install works.
    set_mode(&server, "offline").await;
    sandbox.clear_cache();
    let offline = download(&sandbox, &["hello", "other"]).await;
    assert!(offline.success, "{}", offline.output);
    assert_eq!(sandbox.downloaded().len(), 3, "{}", offline.output);
    assert!(origin.requests().is_empty(), "nothing asked offline: {:#?}", origin.requests());

    // A package never fetched fails at once, in pkgproxy's words.
    let started = std::time::Instant::now();
    let unseen = download(&sandbox, &["unseen"]).await;
    assert!(!unseen.success, "{}", unseen.output);
    assert!(
        unseen.output.contains("Status code: 424 for")
            && unseen.output.contains("/rpm/local/Packages/unseen-1.0-1.noarch.rpm?pkgproxy=offline,not-held"),
        "{}",
        unseen.output
    );
    assert!(started.elapsed() < Duration::from_secs(30), "fails fast: {:?}\n{}", started.elapsed(), unseen.output);
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_package_with_wrong_bytes_is_refused_and_never_cached_and_the_next_honest_fetch_works() {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path(), &packages(), &Createrepo::default());
    let origin = Origin::serve(dir.path()).await;
    let server = Server::start(Some(&config(&[origin.url()], None))).await;
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &baseurl(&server)));

    let file = dir.path().join("Packages/other-2.1-1.noarch.rpm");
    let honest = std::fs::read(&file).unwrap();
    let mut wrong = honest.clone();
    let last = wrong.len() - 1;
    wrong[last] ^= 0xff;
    std::fs::write(&file, &wrong).unwrap();
    let refused = download(&sandbox, &["other"]).await;
    assert!(!refused.success, "{}", refused.output);
    assert!(refused.output.contains("other-2.1-1.noarch.rpm"), "{}", refused.output);
    assert!(sandbox.downloaded().is_empty(), "{:?}", sandbox.downloaded());

    // Nothing was cached: offline, it is not held.
    set_mode(&server, "offline").await;
    let held = get(server.proxy_addr(), "/rpm/local/Packages/other-2.1-1.noarch.rpm").await;
    assert_eq!(held.status, 302, "the wrong bytes were not kept: told through a redirect");
    set_mode(&server, "online").await;

    std::fs::write(&file, &honest).unwrap();
    origin.clear_requests();
    sandbox.clear_cache();
    let fixed = download(&sandbox, &["other"]).await;
    assert!(fixed.success, "{}", fixed.output);
    assert_eq!(sandbox.downloaded(), ["other-2.1-1.noarch.rpm"]);
    assert_eq!(asked(&origin, "other-2.1-1.noarch.rpm"), 1, "{:#?}", origin.requests());
    let got = std::fs::read(sandbox.downloads().join("other-2.1-1.noarch.rpm")).unwrap();
    assert!(got == honest, "the honest bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_clients_of_one_large_package_make_one_upstream_fetch() {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path(), &packages(), &Createrepo::default());
    let origin = Origin::serve(dir.path()).await;
    origin.set_rate_limit(Some(8 * 1024 * 1024));
    let server = Server::start(Some(&config(&[origin.url()], None))).await;
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &baseurl(&server)));
    // dnf reads the metadata first: pkgproxy then knows the package's
    // checksum before it is asked for it.
    let cached = dnf(&sandbox, &["makecache"]).await;
    assert!(cached.success, "{}", cached.output);

    let expected = std::fs::read(dir.path().join("Packages/big-1.0-1.noarch.rpm")).unwrap();
    let addr = server.proxy_addr().to_owned();
    let clients: Vec<_> = (0..20)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move { get(&addr, "/rpm/local/Packages/big-1.0-1.noarch.rpm").await })
        })
        .collect();
    for client in clients {
        let answer = client.await.unwrap();
        assert_eq!(answer.status, 200);
        assert!(answer.body == expected, "every client gets the package's bytes");
    }
    assert_eq!(asked(&origin, "big-1.0-1.noarch.rpm"), 1, "{:#?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn dnf_through_pkgproxy_as_its_proxy_caches_the_mirror_s_files_and_packages_an_xml_base_puts_there() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::serve(dir.path()).await;
    // The packages sit in another folder of the repository, and the
    // primary metadata names them by absolute URLs on the mirror
    // (`xml:base`), as Koji and Pulp write them.
    rpmrepo::build(&packages(), &dir.path().join("pool/noarch"));
    let base = format!("{}/", origin.url());
    rpmrepo::createrepo(dir.path(), &Createrepo { baseurl: Some(base.clone()), ..Createrepo::default() });
    let server = Server::start(Some(&config(&[origin.url()], None))).await;
    let proxy = format!("http://{}", server.proxy_addr());
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &format!("{}/", origin.url())).through_proxy(&proxy));

    let installed = download(&sandbox, &["hello"]).await;
    assert!(installed.success, "{}", installed.output);
    assert_eq!(sandbox.downloaded(), ["hello-1.0-1.noarch.rpm", "libgreet-0.3-1.noarch.rpm"], "{}", installed.output);
    assert_eq!(asked(&origin, "/pool/noarch/hello-1.0-1.noarch.rpm"), 1, "{:#?}", origin.requests());

    // Again, with an empty dnf cache, and offline: all from pkgproxy.
    origin.clear_requests();
    set_mode(&server, "offline").await;
    sandbox.clear_cache();
    let again = download(&sandbox, &["hello"]).await;
    assert!(again.success, "{}", again.output);
    assert_eq!(sandbox.downloaded().len(), 2, "{}", again.output);
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());

    // The same files through the repository's path at pkgproxy.
    let held = get(server.proxy_addr(), "/rpm/local/pool/noarch/libgreet-0.3-1.noarch.rpm").await;
    assert_eq!(held.status, 200);

    // explain knows a mirror's URL as the repository's.
    let url = format!("{}/pool/noarch/hello-1.0-1.noarch.rpm", origin.url());
    let explained = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["explain", &url, "--json", "-admin-socket-path"])
        .arg(server.admin_socket())
        .arg("-stats-socket-path")
        .arg(server.stats_socket())
        .output()
        .unwrap();
    let told: pkgproxy_control::Explanation = serde_json::from_slice(&explained.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&explained.stderr)));
    assert_eq!((told.action.as_str(), told.side.as_deref()), ("hit", Some("rpm")), "{told:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mirror_that_is_behind_is_not_taken_while_the_metalink_names_another() {
    let built = tempfile::tempdir().unwrap();
    let all = packages();
    rpmrepo::build(&all, built.path());
    let (behind, current, links) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (root, names, revision) in
        [(behind.path(), &["hello", "libgreet"][..], 100), (current.path(), &["hello", "libgreet", "other"][..], 200)]
    {
        std::fs::create_dir_all(root.join("Packages")).unwrap();
        for package in all.iter().filter(|package| names.contains(&package.name.as_str())) {
            std::fs::copy(built.path().join(package.file_name()), root.join("Packages").join(package.file_name()))
                .unwrap();
        }
        rpmrepo::createrepo(root, &Createrepo { revision: Some(revision), ..Createrepo::default() });
    }
    let (behind_mirror, current_mirror, metalinks) =
        (Origin::serve(behind.path()).await, Origin::serve(current.path()).await, Origin::serve(links.path()).await);
    let metalink = rpmrepo::metalink(
        &current.path().join("repodata/repomd.xml"),
        &[],
        &[current_mirror.url(), behind_mirror.url()],
    );
    std::fs::write(links.path().join("metalink"), metalink).unwrap();
    let metalink_url = format!("{}/metalink?repo=local&arch=noarch", metalinks.url());

    // The mirror that is behind alone: its repomd.xml is not taken.
    let server = Server::start(Some(&config(&[behind_mirror.url()], Some(&metalink_url)))).await;
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &baseurl(&server)));
    let refused = dnf(&sandbox, &["makecache"]).await;
    assert!(!refused.success, "{}", refused.output);
    assert!(refused.output.contains("repomd.xml?pkgproxy=not-held"), "{}", refused.output);
    assert!(metalinks.count(|request| request.path.starts_with("/metalink?")) >= 1, "{:#?}", metalinks.requests());

    // With the current mirror beside it: the current metadata, whichever
    // mirror is asked first.
    server.reload_with(&config(&[behind_mirror.url(), current_mirror.url()], Some(&metalink_url))).await;
    sandbox.clear_cache();
    behind_mirror.clear_requests();
    let installed = download(&sandbox, &["other"]).await;
    assert!(installed.success, "{}", installed.output);
    assert_eq!(sandbox.downloaded(), ["other-2.1-1.noarch.rpm"], "{}", installed.output);
    // The mirror that is behind is asked once at most (its copy refused,
    // the current mirror asked at once for the same request).
    assert!(asked(&behind_mirror, "repomd.xml") <= 1, "{:#?}", behind_mirror.requests());
    assert_eq!(asked(&current_mirror, "repomd.xml"), 1, "{:#?}", current_mirror.requests());
    let held = get(server.proxy_addr(), "/rpm/local/repodata/repomd.xml").await;
    assert!(held.body == std::fs::read(current.path().join("repodata/repomd.xml")).unwrap(), "the current repomd.xml");
}

/// The `primary_zck` file `repomd.xml` of `root` names.
fn zchunk_primary(root: &Path) -> String {
    let repomd = std::fs::read_to_string(root.join("repodata/repomd.xml")).unwrap();
    let start = repomd.find("<data type=\"primary_zck\">").expect("createrepo_c --zck writes primary_zck");
    let href = &repomd[start..];
    let href = &href[href.find("href=\"").unwrap() + 6..];
    href[..href.find('"').unwrap()].to_owned()
}

/// `zckdl` (zchunk's downloader, with the library librepo's delta
/// downloads use) of `url` into `dir`, from the chunks of `source` it
/// already has, failing if the server does not serve ranges.
async fn zckdl(dir: &Path, source: &Path, url: String) -> std::process::Output {
    let (dir, source) = (dir.to_owned(), source.to_owned());
    tokio::task::spawn_blocking(move || {
        std::process::Command::new("zckdl")
            .args(["--fail-no-ranges", "-v", "-s"])
            .arg(&source)
            .arg(&url)
            .current_dir(&dir)
            .output()
            .expect("zckdl runs (test.sh installs zchunk)")
    })
    .await
    .unwrap()
}

/// Debian's dnf is built without zchunk (its librepo does not link
/// libzck), so the delta download dnf makes of `.zck` metadata is made here
/// by `zckdl`, which asks for the chunks it lacks with the multi-range
/// requests librepo makes through the same library.
#[tokio::test(flavor = "multi_thread")]
async fn zchunk_metadata_is_fetched_as_a_delta_through_pkgproxy_with_several_ranges_a_request() {
    // The new metadata has two packages more than the old, one on each
    // side of the old ones (createrepo_c writes them by name): the chunks
    // it lacks are not next to each other.
    let (built, old, new) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let all = packages();
    rpmrepo::build(&all, built.path());
    for (root, names) in [
        (old.path(), &["hello", "libgreet", "other"][..]),
        (new.path(), &["big", "hello", "libgreet", "other", "unseen"][..]),
    ] {
        std::fs::create_dir_all(root.join("Packages")).unwrap();
        for package in all.iter().filter(|package| names.contains(&package.name.as_str())) {
            std::fs::copy(built.path().join(package.file_name()), root.join("Packages").join(package.file_name()))
                .unwrap();
        }
        rpmrepo::createrepo(root, &Createrepo { zck: true, ..Createrepo::default() });
    }
    let origin = Origin::serve(new.path()).await;
    let server = Server::start(Some(&config(&[origin.url()], None))).await;
    let held = get(server.proxy_addr(), "/rpm/local/repodata/repomd.xml").await;
    assert_eq!(held.status, 200);

    let (old_zck, new_zck) = (old.path().join(zchunk_primary(old.path())), zchunk_primary(new.path()));
    let expected = std::fs::read(new.path().join(&new_zck)).unwrap();
    let name = new_zck.rsplit('/').next().unwrap().to_owned();
    let url = format!("http://{}/rpm/local/{new_zck}", server.proxy_addr());
    // Cold, then from the cache.
    for pass in ["cold", "held"] {
        let out = tempfile::tempdir().unwrap();
        let done = zckdl(out.path(), &old_zck, url.clone()).await;
        let said = format!("{}{}", String::from_utf8_lossy(&done.stdout), String::from_utf8_lossy(&done.stderr));
        assert!(done.status.success(), "{pass}: {said}");
        assert!(said.contains("Multipart boundary: pkgproxy-"), "{pass}: several ranges in one request: {said}");
        assert!(!said.contains("Missing chunks: 6"), "{pass}: the chunks the old metadata has are reused: {said}");
        assert!(std::fs::read(out.path().join(&name)).unwrap() == expected, "{pass}: the new metadata, whole: {said}");
    }
    let fetched = origin.count(|request| request.path.ends_with(&name));
    assert_eq!(fetched, 1, "fetched once, whole: {:#?}", origin.requests());
}

/// A repository of `packages()` served by a chaos upstream, whose faults
/// the test switches per path.
fn chaos_repository(chaos: &pkgproxy_testkit::ChaosUpstream) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path(), &packages(), &Createrepo::default());
    for (path, bytes) in pkgproxy_testkit::tree::files(dir.path()) {
        let below = path.strip_prefix(dir.path()).unwrap().display().to_string();
        chaos.put(&format!("/{below}"), bytes);
    }
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_mirror_cannot_give_now_fails_at_once_in_dnf_s_output_with_pkgproxy_s_reason() {
    use pkgproxy_testkit::chaos::Behaviour;
    let chaos = pkgproxy_testkit::ChaosUpstream::start().await;
    let _dir = chaos_repository(&chaos);
    let upstream = "[upstream]\nfirst_byte_timeout = \"1s\"\ndeadline = \"3s\"\n";
    let server = Server::start(Some(&format!("{}{upstream}", config(&[chaos.url()], None)))).await;
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &baseurl(&server)));
    let made = dnf(&sandbox, &["makecache"]).await;
    assert!(made.success, "{}", made.output);

    let package = "/Packages/other-2.1-1.noarch.rpm";
    let faults = [
        (Behaviour::Status { code: 503, retry_after: None }, "not-held,the-upstream-cannot-be-had"),
        (Behaviour::Status { code: 429, retry_after: Some("30".into()) }, "not-held,the-repository-asks-to-wait"),
        (Behaviour::BlackHole, "not-held,the-upstream-cannot-be-had"),
    ];
    for (fault, told) in faults {
        chaos.set_path_behaviour(package, fault.clone());
        sandbox.clear_cache();
        let started = std::time::Instant::now();
        let failed = download(&sandbox, &["other"]).await;
        assert!(!failed.success, "{fault:?}: {}", failed.output);
        let line = format!("Status code: 424 for http://{}/rpm/local{package}?pkgproxy={told}", server.proxy_addr());
        assert!(failed.output.contains(&line), "{fault:?}: {line}\n{}", failed.output);
        assert!(started.elapsed() < Duration::from_secs(30), "{fault:?} fails fast: {:?}", started.elapsed());
    }

    // A body cut half way is resumed where it broke: dnf gets it whole.
    chaos.set_path_behaviour(package, Behaviour::ResetMidBody { after_bytes: 1000 });
    sandbox.clear_cache();
    let resumed = download(&sandbox, &["other"]).await;
    assert!(resumed.success, "{}", resumed.output);
    assert_eq!(sandbox.downloaded(), ["other-2.1-1.noarch.rpm"]);

    // The mirror answers again: the package is had, and held.
    chaos.clear_path_behaviour(package);
    sandbox.clear_cache();
    let had = download(&sandbox, &["other"]).await;
    assert!(had.success, "{}", had.output);
    assert_eq!(sandbox.downloaded(), ["other-2.1-1.noarch.rpm"]);

    // repomd.xml past metadata_ttl while its mirror fails: the copy held,
    // said stale, and dnf works on.
    chaos.set_path_behaviour("/repodata/repomd.xml", Behaviour::Status { code: 503, retry_after: None });
    server.clock().advance(Duration::from_secs(301));
    let stale = get(server.proxy_addr(), "/rpm/local/repodata/repomd.xml").await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.header("x-pkgproxy-cache"), Some("stale"), "{:?}", stale.headers);
    assert!(stale.header("x-pkgproxy-reason").is_some_and(|reason| reason.contains("503")), "{:?}", stale.headers);
    sandbox.clear_cache();
    let again = download(&sandbox, &["other"]).await;
    assert!(again.success, "{}", again.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_a_newer_repomd_no_longer_names_is_evicted_before_any_package() {
    let built = tempfile::tempdir().unwrap();
    let all = packages();
    rpmrepo::build(&all[..4], built.path());
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("Packages")).unwrap();
    let publish = |names: &[&str]| {
        for package in all.iter().filter(|package| names.contains(&package.name.as_str())) {
            std::fs::copy(
                built.path().join(package.file_name()),
                dir.path().join("Packages").join(package.file_name()),
            )
            .unwrap();
        }
        let _ = std::fs::remove_dir_all(dir.path().join("repodata"));
        rpmrepo::createrepo(dir.path(), &Createrepo::default());
    };
    publish(&["hello", "libgreet"]);
    let origin = Origin::serve(dir.path()).await;
    let mut server = Server::start(Some(&config(&[origin.url()], None))).await;
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &baseurl(&server)));
    let installed = download(&sandbox, &["hello"]).await;
    assert!(installed.success, "{}", installed.output);
    let metadata = |entries: &[pkgproxy_control::CacheEntry]| -> Vec<String> {
        let keys = entries.iter().map(|entry| entry.key.clone());
        keys.filter(|key| key.contains("/repodata/") && !key.ends_with("repomd.xml")).collect()
    };
    let old = metadata(&crate::quota_apt::listed_at(&server.admin_socket()));
    assert!(!old.is_empty(), "dnf fetched the metadata");
    // Used after the packages: by use alone, the packages would go first.
    server.clock().advance(Duration::from_secs(2));
    for key in &old {
        let hit = get(server.proxy_addr(), &format!("/{key}")).await;
        assert_eq!(hit.header("x-pkgproxy-cache"), Some("hit"), "{key}");
    }

    // A newer repomd.xml names other metadata files: the old ones are
    // never asked for again.
    publish(&["hello", "libgreet", "other"]);
    server.clock().advance(Duration::from_secs(301));
    sandbox.clear_cache();
    let newer = download(&sandbox, &["other"]).await;
    assert!(newer.success, "{}", newer.output);
    let entries = crate::quota_apt::listed_at(&server.admin_socket());
    let current: Vec<String> = metadata(&entries).into_iter().filter(|key| !old.contains(key)).collect();
    assert!(!current.is_empty(), "the new metadata is cached");
    let old_bytes: u64 = entries.iter().filter(|entry| old.contains(&entry.key)).map(|entry| entry.size).sum();

    // A quota that frees less than the old metadata holds.
    server.restart_with(&pkgproxy_server::config::Overrides::default()).await;
    let usage = server.info().await.cache.get(pkgproxy_metrics::CacheGauge::DiskBytes);
    let max_size = (usage - old_bytes / 4) / 90 * 100;
    let overrides =
        pkgproxy_server::config::Overrides { cache_max_size: Some(max_size.to_string()), ..Default::default() };
    server.restart_with(&overrides).await;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .arg("-admin-socket-path")
        .arg(server.admin_socket())
        .args(["cache", "gc"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{printed}");
    let after: Vec<String> =
        crate::quota_apt::listed_at(&server.admin_socket()).into_iter().map(|entry| entry.key).collect();
    assert!(old.iter().any(|key| !after.contains(key)), "superseded metadata went: {printed}\n{after:#?}");
    assert!(current.iter().all(|key| after.contains(key)), "the current metadata stays: {after:#?}");
    let packages = after.iter().filter(|key| key.ends_with(".rpm")).count();
    assert_eq!(packages, 3, "every package stays: {after:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_package_younger_than_min_age_fails_the_install_saying_why_then_installs_once_old_enough() {
    let dir = tempfile::tempdir().unwrap();
    rpmrepo::build(&packages(), &dir.path().join("Packages"));
    // createrepo_c says a package was added when its file was last
    // modified (`<time file>`): 2026-01-01T00:00Z for all, `other`
    // an hour later.
    let added = std::time::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    for entry in std::fs::read_dir(dir.path().join("Packages")).unwrap().flatten() {
        let later = entry.file_name().to_string_lossy().starts_with("other-");
        let at = if later { added + Duration::from_secs(3600) } else { added };
        std::fs::File::options().write(true).open(entry.path()).unwrap().set_modified(at).unwrap();
    }
    rpmrepo::createrepo(dir.path(), &Createrepo::default());
    let origin = Origin::serve(dir.path()).await;
    let config = format!("{}[policy]\nmin_age = \"1h\"\n", config(&[origin.url()], None));
    let server = Server::start_at(Some(&config), added + Duration::from_secs(3600 + 120)).await;
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &baseurl(&server)));

    // A package asked before any repomd.xml says what it is and when it
    // was added: refused, not fetched.
    let unknown = get(server.proxy_addr(), "/rpm/local/Packages/hello-1.0-1.noarch.rpm").await;
    let told = unknown.header("location").unwrap_or_default();
    assert_eq!(told, "?pkgproxy=not-held,no-metadata-vouches-for-it", "{:?}", unknown.headers);
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());

    // hello and its dependency are two hours old: served.
    let old_enough = download(&sandbox, &["hello"]).await;
    assert!(old_enough.success, "{}", old_enough.output);
    // other is two minutes old: refused, with the rule in dnf's output.
    let refused = download(&sandbox, &["other"]).await;
    assert!(!refused.success, "{}", refused.output);
    let told = "Status code: 403 for";
    let why = "other-2.1-1.noarch.rpm?pkgproxy=blocked-by-pkgproxy-policy,min_age-until-2026-01-01T02:00Z";
    assert!(refused.output.contains(told) && refused.output.contains(why), "{}", refused.output);
    assert_eq!(asked(&origin, "other-2.1-1.noarch.rpm"), 0, "a refused package is not fetched");

    // An hour later, it is old enough.
    server.clock().advance(Duration::from_secs(3600));
    sandbox.clear_cache();
    let later = download(&sandbox, &["other"]).await;
    assert!(later.success, "{}", later.output);
    assert_eq!(sandbox.downloaded(), ["other-2.1-1.noarch.rpm"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_package_asked_before_its_primary_metadata_is_checked_against_it_and_one_it_does_not_list_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path(), &packages()[..3], &Createrepo::default());
    // A file in the repository's folder that its metadata does not list.
    rpmrepo::build(&packages()[3..4], &dir.path().join("Packages"));
    let origin = Origin::serve(dir.path()).await;
    let server = Server::start(Some(&config(&[origin.url()], None))).await;
    // With no repomd.xml held, nothing could vouch for a package: it is
    // not fetched.
    let early = get(server.proxy_addr(), "/rpm/local/Packages/hello-1.0-1.noarch.rpm").await;
    assert_eq!(early.header("location"), Some("?pkgproxy=not-held,no-metadata-vouches-for-it"), "{:?}", early.headers);
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
    assert_eq!(get(server.proxy_addr(), "/rpm/local/repodata/repomd.xml").await.status, 200);

    // No client fetched the primary metadata: pkgproxy does, to check the
    // packages, once, however many are asked at once.
    let addr = server.proxy_addr().to_owned();
    let asking: Vec<_> = ["hello-1.0-1", "libgreet-0.3-1", "other-2.1-1"]
        .into_iter()
        .map(|name| {
            let addr = addr.clone();
            tokio::spawn(async move { (name, get(&addr, &format!("/rpm/local/Packages/{name}.noarch.rpm")).await) })
        })
        .collect();
    for asked_for in asking {
        let (name, package) = asked_for.await.unwrap();
        assert_eq!(package.status, 200, "{name}");
        let expected = std::fs::read(dir.path().join(format!("Packages/{name}.noarch.rpm"))).unwrap();
        assert!(package.body == expected, "{name}");
    }
    assert_eq!(asked(&origin, "primary.xml.gz"), 1, "{:#?}", origin.requests());

    let unlisted = get(server.proxy_addr(), "/rpm/local/Packages/unseen-1.0-1.noarch.rpm").await;
    assert_eq!(unlisted.status, 302, "refused: {:?}", unlisted.headers);
    let body = String::from_utf8_lossy(&unlisted.body);
    assert!(body.contains("not listed by the primary metadata"), "{body}");
    assert_eq!(asked(&origin, "unseen-1.0-1.noarch.rpm"), 0, "not fetched: nothing could vouch for it");
    set_mode(&server, "offline").await;
    let held = get(server.proxy_addr(), "/rpm/local/Packages/unseen-1.0-1.noarch.rpm").await;
    assert_eq!(held.header("location"), Some("?pkgproxy=not-held,no-metadata-vouches-for-it"), "never cached");
    assert_eq!(asked(&origin, "unseen-1.0-1.noarch.rpm"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_of_what_dnf_fetched_serves_dnf_from_a_pkgproxy_never_online() {
    use pkgproxy_testkit::Daemon;
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path(), &packages(), &Createrepo::default());
    let origin = Origin::serve(dir.path()).await;
    let config = config(&[origin.url()], None);
    let online = Daemon::start_with(crate::common::PKGPROXY, Some(&config), &[]).await;
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &format!("http://{}/rpm/local/", online.proxy_addr())));
    let installed = download(&sandbox, &["hello", "other"]).await;
    assert!(installed.success, "{}", installed.output);

    let bundles = tempfile::tempdir().unwrap();
    let gapped = crate::bundle::whole_cache_carried(&online, &config, bundles.path()).await;
    origin.clear_requests();
    let through_gapped = DnfSandbox::new("local", &format!("http://{}/rpm/local/", gapped.proxy_addr()));
    let sandbox = std::sync::Arc::new(through_gapped);
    let offline = download(&sandbox, &["hello", "other"]).await;
    assert!(offline.success, "{}", offline.output);
    assert_eq!(sandbox.downloaded().len(), 3, "{}", offline.output);
    assert!(origin.requests().is_empty(), "{:#?}", origin.requests());
}

/// A machine's packages: `app` requires the file `/usr/bin/greet`, which
/// `greeter` (with an epoch) installs; `greeter` requires the virtual name
/// `greeting-lib`, which two versions of `libgreet` provide; `other`
/// stands alone; `unseen` is listed by no one.
fn listed_packages() -> Vec<RpmPackage> {
    vec![
        RpmPackage::new("app", "1.0").requires("/usr/bin/greet"),
        RpmPackage::new("greeter", "2.0").epoch(2).installs("/usr/bin/greet").requires("greeting-lib"),
        RpmPackage::new("libgreet", "0.4").provides("greeting-lib"),
        RpmPackage::new("libgreet", "0.5").provides("greeting-lib"),
        RpmPackage::new("other", "2.1"),
        RpmPackage::new("unseen", "1.0"),
    ]
}

/// The NEVRA of the package file at `path`, as rpm prints it.
fn nevra_of(path: &Path) -> String {
    let output = std::process::Command::new("rpm")
        .args(["-qp", "--qf", "%{NEVRA}\n"])
        .arg(path)
        .output()
        .expect("rpm runs (test.sh installs rpm)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn check_rpm_says_what_a_list_needs_warm_fetches_it_and_dnf_installs_it_offline_from_an_empty_cache() {
    use crate::common::PKGPROXY;
    use crate::readiness::ctl;
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path(), &listed_packages(), &Createrepo::default());
    let origin = Origin::serve(dir.path()).await;
    let daemon = pkgproxy_testkit::Daemon::start(PKGPROXY, Some(&config(&[origin.url()], None))).await;

    // A name (with what it requires) and two NEVRAs as rpm prints them,
    // greeter's with its epoch.
    let greeter = nevra_of(&dir.path().join("Packages/greeter-2.0-1.noarch.rpm"));
    assert_eq!(greeter, "greeter-2:2.0-1.noarch");
    let other = nevra_of(&dir.path().join("Packages/other-2.1-1.noarch.rpm"));
    let list = dir.path().join("packages.txt");
    std::fs::write(&list, format!("# the image's packages\napp\n\n{greeter}\n{other}   # a NEVRA\n")).unwrap();
    let list = list.to_str().unwrap();

    // dnf reads repomd.xml first: pkgproxy holds it, nothing else.
    assert_eq!(get(daemon.proxy_addr(), "/rpm/local/repodata/repomd.xml").await.status, 200);
    origin.clear_requests();
    let (ready, printed) = ctl(&daemon, &["check", "rpm", list]);
    println!("check before the warm:\n{printed}");
    assert!(!ready, "{printed}");
    assert!(printed.contains("ready    local repomd.xml"), "{printed}");
    assert!(printed.contains("missing  local primary "), "{printed}");
    assert!(printed.contains("missing  local: its primary metadata is not held (warm fetches it)"), "{printed}");
    assert!(origin.requests().is_empty(), "a check asks nothing upstream: {:#?}", origin.requests());

    let (warmed, printed) = ctl(&daemon, &["warm", "rpm", list]);
    println!("warm:\n{printed}");
    assert!(warmed, "{printed}");
    let fetched = ["app-1.0-1", "greeter-2.0-1", "libgreet-0.5-1", "other-2.1-1"];
    for package in fetched {
        assert_eq!(asked(&origin, &format!("/{package}.noarch.rpm")), 1, "{package}: {:#?}", origin.requests());
    }
    for package in ["libgreet-0.4-1", "unseen-1.0-1"] {
        assert_eq!(asked(&origin, &format!("/{package}.noarch.rpm")), 0, "{package}: {:#?}", origin.requests());
    }
    assert_eq!(asked(&origin, "primary.xml.gz"), 1, "{:#?}", origin.requests());
    assert_eq!(asked(&origin, "filelists.xml.gz"), 1, "dnf 4 reads filelists: {:#?}", origin.requests());
    let (ready, printed) = ctl(&daemon, &["check", "rpm", list]);
    println!("check after the warm:\n{printed}");
    assert!(ready, "{printed}");
    for label in ["app-1.0-1.noarch", "greeter-2:2.0-1.noarch", "libgreet-0.5-1.noarch", "other-2.1-1.noarch"] {
        assert!(printed.lines().any(|line| line.starts_with("ready") && line.ends_with(label)), "{label}: {printed}");
    }
    assert!(printed.trim_end().ends_with("7 of 7 ready"), "{printed}");

    // Offline, a dnf with an empty cache installs the list's packages
    // from pkgproxy alone.
    assert!(ctl(&daemon, &["offline", "offline"]).0);
    origin.clear_requests();
    let sandbox = std::sync::Arc::new(DnfSandbox::new("local", &format!("http://{}/rpm/local/", daemon.proxy_addr())));
    let installed = download(&sandbox, &["app", "other"]).await;
    assert!(installed.success, "{}", installed.output);
    let files: Vec<String> = fetched.iter().map(|package| format!("{package}.noarch.rpm")).collect();
    assert_eq!(sandbox.downloaded(), files, "{}", installed.output);
    assert!(origin.requests().is_empty(), "nothing asked offline: {:#?}", origin.requests());

    // The cache's page names the packages by name and version, and sums
    // the repository's metadata in one line.
    let json = get(daemon.proxy_addr(), pkgproxy_control::BROWSE_JSON_PATH).await;
    let browse: pkgproxy_control::Browse = serde_json::from_slice(&json.body).unwrap();
    let greeter = crate::browse_page::package(&browse, "rpm", "greeter");
    assert_eq!(greeter.versions.iter().map(|v| v.version.as_str()).collect::<Vec<_>>(), ["2.0-1.noarch"]);
    let rpm = browse.sides.iter().find(|side| side.side == "rpm").unwrap();
    let names: Vec<&str> = rpm.packages.iter().map(|package| package.name.as_str()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(rpm.other_entries, 3, "repomd.xml, primary, filelists: {rpm:?}");
    let page = get(daemon.proxy_addr(), "/cache/").await;
    let page = String::from_utf8_lossy(&page.body);
    let section = &page[page.find("data-side=\"rpm\"").unwrap()..];
    let section = &section[..section.find("</section>").unwrap()];
    println!("the cache's page, rpm:\n{section}");
    let row = crate::browse_page::row(&page, "rpm", "libgreet").unwrap_or_else(|| panic!("{section}"));
    assert!(crate::browse_page::cell(row, "versions").contains("0.5-1.noarch"), "{row}");
    assert!(section.contains("repository metadata (repomd.xml and the files it names): 3 entries"), "{section}");
}
