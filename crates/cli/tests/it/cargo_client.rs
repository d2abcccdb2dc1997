//! The real cargo (the toolchain's: Debian's has no sparse protocol)
//! through pkgproxy's cargo side, against a fake sparse registry whose
//! crates come from a second port: every index file and crate fetched
//! once, revalidated by pkgproxy alone, checked against its checksum,
//! and a locked build fetched with the network gone.

use std::time::{Duration, Instant};

use pkgproxy_control::ModeRequest;
use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{CargoSandbox, CrateVersion, Daemon, FakeCrates};

use crate::common::PKGPROXY;
use crate::inproc::Server;
use crate::readiness::ctl;

/// The registry: `app` depends on `serde_json` (a 4+ letter name) and
/// `ab` (2), `serde_json` on `itoa` (4) and `syn` (3), `ab` on `a` (1);
/// `itoa` has a yanked version.
fn crates() -> Vec<CrateVersion> {
    let mut yanked = CrateVersion::build("itoa", "1.0.1", &[], 100);
    yanked.yanked = true;
    vec![
        CrateVersion::build("a", "0.1.0", &[], 100),
        CrateVersion::build("ab", "0.2.0", &[("a", "0.1")], 100),
        CrateVersion::build("syn", "2.0.0", &[], 100),
        CrateVersion::build("itoa", "1.0.0", &[], 100),
        yanked,
        CrateVersion::build("serde_json", "1.0.0", &[("itoa", "1"), ("syn", "2")], 100),
    ]
}

/// The fake registry, pkgproxy in front of it, and a project whose
/// crates.io is pkgproxy.
async fn registry_and_pkgproxy() -> (FakeCrates, Server, CargoSandbox) {
    let fake = FakeCrates::start(&crates()).await;
    let server = Server::start(Some(&fake.config())).await;
    let project = sandbox(server.proxy_addr());
    (fake, server, project)
}

/// `ran`, which must have succeeded: what cargo said otherwise.
fn succeeded(ran: pkgproxy_testkit::CargoOutput) {
    assert!(ran.success, "{}", ran.output);
}

fn sandbox(addr: &str) -> CargoSandbox {
    CargoSandbox::new(&format!("sparse+http://{addr}/cargo/index/"), &[("serde_json", "1"), ("ab", "0.2")])
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_fresh_cargo_home_fetches_nothing_upstream() {
    let (fake, _server, project) = registry_and_pkgproxy().await;
    let resolved = project.run("first", &["generate-lockfile"]);
    assert!(resolved.success, "{}", resolved.output);
    let lock = std::fs::read_to_string(project.lockfile()).unwrap();
    assert!(lock.contains("name = \"itoa\"\nversion = \"1.0.0\""), "the yanked 1.0.1 is not chosen: {lock}");
    let fetched = project.run("first", &["fetch", "--locked"]);
    assert!(fetched.success, "{}", fetched.output);
    assert_eq!(fake.crate_requests(), 5, "{:#?}", fake.requests());
    assert_eq!(fake.count("/config.json"), 1, "config.json is asked once: {:#?}", fake.requests());

    fake.clear_requests();
    let again = project.run("second", &["fetch", "--locked"]);
    assert!(again.success, "{}", again.output);
    assert_eq!(fake.crate_requests(), 0, "no crate fetched twice: {:#?}", fake.requests());
    assert_eq!(fake.index_requests(), 0, "no index file fetched twice: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_setup_script_points_cargo_at_pkgproxy() {
    use std::io::Write;
    let (fake, server, project) = registry_and_pkgproxy().await;
    let home = tempfile::tempdir().unwrap();
    // A configuration of the user's own, which the block joins.
    std::fs::write(home.path().join("config.toml"), "[net]\nretry = 3\n").unwrap();
    let script = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["setup", "cargo", "-addr", server.proxy_addr()])
        .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
        .env("CARGO_HOME", home.path())
        .env_remove("PKGPROXY_SETUP_ROOT")
        .output()
        .unwrap();
    assert!(script.status.success(), "{}", String::from_utf8_lossy(&script.stderr));
    let mut sh = std::process::Command::new("sh")
        .env("CARGO_HOME", home.path())
        .env_remove("PKGPROXY_SETUP_ROOT")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    sh.stdin.take().unwrap().write_all(&script.stdout).unwrap();
    assert!(sh.wait().unwrap().success());
    let resolved = project.run_in(home.path(), &["generate-lockfile"]);
    assert!(resolved.success, "{}", resolved.output);
    assert!(fake.count("/config.json") >= 1, "cargo asked pkgproxy, which asked the registry");
    assert!(
        std::fs::read_to_string(project.lockfile())
            .unwrap()
            .contains("registry+https://github.com/rust-lang/crates.io-index"),
        "the lockfile still names crates.io"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cargo_upgrades_to_http2_and_multiplexes_its_requests() {
    let (_fake, _server, project) = registry_and_pkgproxy().await;
    let resolved = project.run_debugging_http("h2", &["generate-lockfile"]);
    assert!(resolved.success, "{}", resolved.output);
    assert!(resolved.output.contains("< HTTP/1.1 101 Switching Protocols"), "{}", resolved.output);
    let on_streams = resolved.output.matches("< HTTP/2 200").count();
    assert!(on_streams >= 6, "config.json and the five index files over HTTP/2: {on_streams}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cargo_update_is_answered_not_modified_by_pkgproxy_alone() {
    let (fake, server, project) = registry_and_pkgproxy().await;
    succeeded(project.run("warm", &["generate-lockfile"]));
    fake.clear_requests();
    let updated = project.run("warm", &["update"]);
    assert!(updated.success, "{}", updated.output);
    assert!(fake.requests().is_empty(), "nothing asked upstream: {:#?}", fake.requests());

    // What cargo sent and got: its tag, and a 304 from pkgproxy.
    let path = "/cargo/index/se/rd/serde_json";
    let first = send(server.proxy_addr(), "GET", path, &[], b"").await;
    let etag = first.header("etag").expect("pkgproxy's own ETag").to_owned();
    let revalidated = send(server.proxy_addr(), "GET", path, &[("if-none-match", &etag)], b"").await;
    assert_eq!(revalidated.status, 304);
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_locked_build_is_fetched_offline_and_a_crate_never_seen_fails_at_once_saying_why() {
    let (fake, server, project) = registry_and_pkgproxy().await;
    succeeded(project.run("online", &["generate-lockfile"]));
    succeeded(project.run("online", &["fetch", "--locked"]));
    set_mode(&server, "offline").await;
    fake.clear_requests();
    let offline = project.run("offline", &["fetch", "--locked"]);
    assert!(offline.success, "{}", offline.output);
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());

    fake.publish(CrateVersion::build("newer", "1.0.0", &[], 100));
    let other = CargoSandbox::new(&format!("sparse+http://{}/cargo/index/", server.proxy_addr()), &[("newer", "1")]);
    let started = Instant::now();
    let failed = other.run("offline", &["generate-lockfile"]);
    assert!(!failed.success);
    assert!(started.elapsed() < Duration::from_secs(10), "cargo does not retry a 424");
    assert!(failed.output.contains("424"), "{}", failed.output);
    let url = format!("http://{}/cargo/index/ne/we/newer", server.proxy_addr());
    let head = std::process::Command::new("curl").args(["-s", "-o", "/dev/null", "-D", "-", &url]).output().unwrap();
    let status_line = String::from_utf8_lossy(&head.stdout).lines().next().unwrap_or_default().to_owned();
    assert_eq!(
        status_line.trim_end(),
        "HTTP/1.1 424 Offline (pkgproxy): not held",
        "the reason, for clients that print it"
    );
    assert!(failed.output.contains("pkgproxy is offline"), "{}", failed.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn config_json_is_pkgproxy_s_and_names_each_crate_s_checksum_even_offline() {
    let (fake, server, _project) = registry_and_pkgproxy().await;
    set_mode(&server, "offline").await;
    let config = send(server.proxy_addr(), "GET", "/cargo/index/config.json", &[], b"").await;
    assert_eq!(config.status, 200, "{}", String::from_utf8_lossy(&config.body));
    assert_eq!(config.header("x-pkgproxy-reason"), Some("offline"), "pkgproxy's own, and why");
    let config: serde_json::Value = serde_json::from_slice(&config.body).unwrap();
    let dl = format!("http://{}/cargo/crates/{{crate}}/{{version}}/{{sha256-checksum}}", server.proxy_addr());
    assert_eq!(config["dl"], dl.as_str());
    assert!(fake.requests().is_empty());

    set_mode(&server, "never").await;
    let config = send(server.proxy_addr(), "GET", "/cargo/index/config.json", &[], b"").await;
    let config: serde_json::Value = serde_json::from_slice(&config.body).unwrap();
    assert_eq!(config["dl"], dl.as_str(), "the upstream's dl names its CDN, pkgproxy's names pkgproxy");
    assert_eq!(config["api"], "https://registry.invalid", "the API is the registry's");
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_bytes_fail_cargo_and_are_not_cached_and_an_honest_fetch_then_works() {
    let (fake, _server, project) = registry_and_pkgproxy().await;
    succeeded(project.run("one", &["generate-lockfile"]));
    fake.set_corrupt(true);
    let failed = project.run("one", &["fetch", "--locked"]);
    assert!(!failed.success, "{}", failed.output);
    fake.set_corrupt(false);
    let fetched = project.run("two", &["fetch", "--locked"]);
    assert!(fetched.success, "{}", fetched.output);
    fake.clear_requests();
    succeeded(project.run("three", &["fetch", "--locked"]));
    assert_eq!(fake.crate_requests(), 0, "the honest bytes were kept");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cut_body_is_not_cached_and_twenty_clients_of_one_large_crate_make_one_fetch() {
    let large = CrateVersion::build("large", "1.0.0", &[], 8 * 1024 * 1024);
    let fake = FakeCrates::start(std::slice::from_ref(&large)).await;
    let server = Server::start(Some(&fake.config())).await;
    let url = format!("/cargo/crates/large/1.0.0/{}", large.sha256);
    assert_eq!(send(server.proxy_addr(), "GET", "/cargo/index/config.json", &[], b"").await.status, 200);

    fake.set_cut(true);
    let cut = send(server.proxy_addr(), "GET", &url, &[], b"").await;
    assert!(cut.status != 200 || cut.body != large.bytes, "a cut body never reaches a client whole");
    fake.set_cut(false);
    fake.clear_requests();

    let clients = (0..20).map(|_| {
        let (addr, url) = (server.proxy_addr().to_owned(), url.clone());
        tokio::spawn(async move { send(&addr, "GET", &url, &[], b"").await })
    });
    for answer in futures_util::future::join_all(clients).await {
        let answer = answer.unwrap();
        assert_eq!(answer.status, 200);
        assert!(answer.body == large.bytes);
    }
    assert_eq!(fake.crate_requests(), 1, "{:#?}", fake.requests());
    let part = send(server.proxy_addr(), "GET", &url, &[("range", "bytes=10-19")], b"").await;
    assert_eq!(part.status, 206);
    assert!(part.body == large.bytes[10..20]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crate_published_after_its_index_was_cached_is_fetched_at_once_and_its_index_refreshed() {
    let (fake, server, project) = registry_and_pkgproxy().await;
    succeeded(project.run("one", &["generate-lockfile"]));
    let newer = CrateVersion::build("itoa", "1.1.0", &[], 100);
    fake.publish(newer.clone());
    fake.clear_requests();
    let url = format!("/cargo/crates/itoa/1.1.0/{}", newer.sha256);
    let fetched = send(server.proxy_addr(), "GET", &url, &[], b"").await;
    assert_eq!(fetched.status, 200, "{}", String::from_utf8_lossy(&fetched.body));
    assert!(fetched.body == newer.bytes);
    assert_eq!(fake.count("/it/oa/itoa"), 1, "its index file asked again once: {:#?}", fake.requests());
    let index = send(server.proxy_addr(), "GET", "/cargo/index/it/oa/itoa", &[], b"").await;
    assert!(String::from_utf8_lossy(&index.body).contains("\"1.1.0\""), "the held index lists it now");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_index_files_of_a_crate_s_dependencies_are_fetched_ahead_of_cargo() {
    let (fake, server, _project) = registry_and_pkgproxy().await;
    let proxy = server.proxy_addr();
    assert_eq!(fake.index_requests(), 0);
    assert_eq!(send(proxy, "GET", "/cargo/index/se/rd/serde_json", &[], b"").await.status, 200);
    let ahead = || async { (fake.count("/it/oa/itoa") == 1 && fake.count("/3/s/syn") == 1).then_some(()) };
    pkgproxy_testkit::eventually("serde_json's dependencies fetched with nobody asking", ahead).await;
    // Held, or joined on its way: either way not asked for again.
    for path in ["/cargo/index/it/oa/itoa", "/cargo/index/3/s/syn"] {
        assert_eq!(send(proxy, "GET", path, &[], b"").await.status, 200, "{path}");
    }
    assert_eq!((fake.count("/it/oa/itoa"), fake.count("/3/s/syn")), (1, 1), "{:#?}", fake.requests());

    assert_eq!(send(proxy, "GET", "/cargo/index/2/ab", &[], b"").await.status, 200);
    pkgproxy_testkit::eventually("ab's dependency fetched ahead", || async { (fake.count("/1/a") == 1).then_some(()) })
        .await;
    assert_eq!(fake.count("/2/ab"), 1, "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lagging_mirror_s_older_index_file_never_replaces_the_newer_one() {
    let (fake, server, _project) = registry_and_pkgproxy().await;
    let path = "/cargo/index/it/oa/itoa";
    let first = send(server.proxy_addr(), "GET", path, &[], b"").await;
    assert!(String::from_utf8_lossy(&first.body).contains("\"1.0.1\""));
    fake.set_lagging(Some(1));
    server.clock().advance(Duration::from_secs(600));
    let again = send(server.proxy_addr(), "GET", path, &[], b"").await;
    assert_eq!(again.status, 200);
    assert!(again.body == first.body, "the held file, not the lagging one");
    assert_eq!(again.header("x-pkgproxy-cache"), Some("stale"), "{:?}", again.header("x-pkgproxy-reason"));
    fake.set_lagging(None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_is_overloaded_leaves_cached_index_files_served_stale() {
    let (fake, server, project) = registry_and_pkgproxy().await;
    succeeded(project.run("one", &["generate-lockfile"]));
    fake.force_status(429);
    server.clock().advance(Duration::from_secs(600));
    let stale = send(server.proxy_addr(), "GET", "/cargo/index/se/rd/serde_json", &[], b"").await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.header("x-pkgproxy-cache"), Some("stale"));
    assert!(stale.header("x-pkgproxy-reason").is_some());
    let updated = project.run("two", &["generate-lockfile"]);
    assert!(updated.success, "{}", updated.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn check_says_what_a_lockfile_needs_warm_fetches_it_and_a_bundle_carries_it_for_offline_builds() {
    let fake = FakeCrates::start(&crates()).await;
    let direct = CargoSandbox::new(&format!("sparse+{}/", fake.url()), &[("serde_json", "1"), ("ab", "0.2")]);
    // The lockfile, as cargo writes it against the registry itself.
    let resolved = direct.run("direct", &["generate-lockfile"]);
    assert!(resolved.success, "{}", resolved.output);
    let lock = std::fs::read_to_string(direct.lockfile())
        .unwrap()
        .replace(&format!("sparse+{}/", fake.url()), "registry+https://github.com/rust-lang/crates.io-index");
    fake.clear_requests();
    let daemon = Daemon::start(PKGPROXY, Some(&fake.config())).await;
    let project = sandbox(daemon.proxy_addr());
    std::fs::write(project.lockfile(), &lock).unwrap();
    let lockfile = project.lockfile();
    let lockfile = lockfile.to_str().unwrap();

    let (ready, printed) = ctl(&daemon, &["check", "cargo", lockfile]);
    assert!(!ready, "{printed}");
    assert!(printed.contains("missing  serde_json 1.0.0 .crate"), "{printed}");
    assert!(fake.requests().is_empty(), "a check asks nothing upstream");
    let (warmed, printed) = ctl(&daemon, &["warm", "cargo", lockfile]);
    assert!(warmed, "{printed}");
    let (ready, printed) = ctl(&daemon, &["check", "cargo", lockfile]);
    assert!(ready, "{printed}");

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    fake.clear_requests();
    let offline = project.run("offline", &["fetch", "--locked"]);
    assert!(offline.success, "{}", offline.output);
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());

    // A signed bundle of it, taken in by a pkgproxy that was never online.
    let dir = tempfile::tempdir().unwrap();
    let (key, trusted) = crate::bundle::signing_key(dir.path());
    let bundle = dir.path().join("build.tar");
    let export = ["export", "-o", bundle.to_str().unwrap(), "--sign", key.to_str().unwrap(), "cargo", lockfile];
    let (exported, printed) = ctl(&daemon, &export);
    assert!(exported, "{printed}");
    let gapped = Daemon::start_with(PKGPROXY, Some(&format!("{}{trusted}", fake.config())), &["-offline"]).await;
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(imported, "{printed}");
    let far = sandbox(gapped.proxy_addr());
    std::fs::write(far.lockfile(), &lock).unwrap();
    let fetched = far.run("gapped", &["fetch", "--locked"]);
    assert!(fetched.success, "{}", fetched.output);
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_auth_required_registry_s_content_reaches_only_clients_it_accepts() {
    let (fake, server, _project) = registry_and_pkgproxy().await;
    fake.require_auth(Some("Bearer good"));
    let path = "/cargo/index/it/oa/itoa";
    let denied = send(server.proxy_addr(), "GET", "/cargo/index/config.json", &[], b"").await;
    assert_eq!(denied.status, 401, "{}", String::from_utf8_lossy(&denied.body));
    let config =
        send(server.proxy_addr(), "GET", "/cargo/index/config.json", &[("authorization", "Bearer good")], b"").await;
    assert_eq!(config.status, 200);
    let config: serde_json::Value = serde_json::from_slice(&config.body).unwrap();
    assert_eq!(config["auth-required"], true, "passed on as the registry says it");
    let good = send(server.proxy_addr(), "GET", path, &[("authorization", "Bearer good")], b"").await;
    assert_eq!(good.status, 200);
    let anonymous = send(server.proxy_addr(), "GET", path, &[], b"").await;
    assert_ne!(anonymous.status, 200, "held, but not for a client the registry does not accept");
    let wrong = send(server.proxy_addr(), "GET", path, &[("authorization", "Bearer bad")], b"").await;
    assert_ne!(wrong.status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crate_the_registry_does_not_have_is_a_404_asked_once_a_minute() {
    let (fake, server, _project) = registry_and_pkgproxy().await;
    let path = "/cargo/index/no/ne/nonesuch";
    assert_eq!(send(server.proxy_addr(), "GET", path, &[], b"").await.status, 404);
    assert_eq!(send(server.proxy_addr(), "GET", path, &[], b"").await.status, 404);
    assert_eq!(fake.count("/nonesuch"), 1, "the 404 is remembered (a minute: the side's unit test)");
}
