//! The fleet's policy on the cargo side, with the real cargo: an index
//! file is served without the lines of the versions the policy refuses, so
//! a resolution picks the newest version served, and a refused version's
//! crate is answered `403` saying why, a lockfile naming it held too. The
//! registry publishes `tiny` 1.0.0 a month before the server's clock and
//! 1.1.0 a day before.

use std::time::{Duration, SystemTime};

use pkgproxy_cache::Clock;
use pkgproxy_control::ModeRequest;
use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{CargoOutput, CargoSandbox, CrateVersion, FakeCrates};

use crate::inproc::Server;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The registry's versions of `tiny`, published before `now`.
struct Tiny {
    old: CrateVersion,
    new: CrateVersion,
}

/// The fake registry, pkgproxy in front of it with `policy` (its
/// `[policy]` section and anything after it), and `tiny` published by the
/// server's clock.
async fn registry_with(policy: &str) -> (FakeCrates, Server, Tiny) {
    let fake = FakeCrates::start(&[]).await;
    let server = Server::start(Some(&format!("{}{policy}", fake.config()))).await;
    let tiny = publish(&fake, server.clock().now());
    (fake, server, tiny)
}

fn publish(fake: &FakeCrates, now: SystemTime) -> Tiny {
    let tiny = Tiny {
        old: CrateVersion::build("tiny", "1.0.0", &[], 100).published_at(now - 30 * DAY),
        new: CrateVersion::build("tiny", "1.1.0", &[], 100).published_at(now - DAY),
    };
    fake.publish(tiny.old.clone());
    fake.publish(tiny.new.clone());
    tiny
}

/// A project depending on `tiny = "1"` through pkgproxy's registry at
/// `mount` (`/cargo` for crates.io's, `/cargo/NAME` for another's).
fn project(server: &Server, mount: &str) -> CargoSandbox {
    CargoSandbox::new(&format!("sparse+http://{}{mount}/index/", server.proxy_addr()), &[("tiny", "1")])
}

/// The version of `tiny` the project's lockfile names.
fn locked(project: &CargoSandbox) -> String {
    let lock = std::fs::read_to_string(project.lockfile()).expect("a lockfile");
    let at =
        lock.find("name = \"tiny\"\nversion = \"").expect("tiny is locked") + "name = \"tiny\"\nversion = \"".len();
    lock[at..].split('"').next().unwrap_or_default().to_owned()
}

/// The project's lockfile, resolved by cargo, made to name `to` instead.
fn lock_at(project: &CargoSandbox, from: &CrateVersion, to: &CrateVersion) {
    let lock = std::fs::read_to_string(project.lockfile()).expect("a lockfile");
    let lock = lock
        .replace(&format!("version = \"{}\"", from.version), &format!("version = \"{}\"", to.version))
        .replace(&from.sha256, &to.sha256);
    std::fs::write(project.lockfile(), lock).expect("the lockfile written");
}

fn succeeded(ran: &CargoOutput) {
    assert!(ran.success, "{}", ran.output);
}

/// The status line and body pkgproxy answers a client's `GET path`.
fn fetched_by_curl(server: &Server, path: &str) -> (String, String) {
    let url = format!("http://{}{path}", server.proxy_addr());
    let out = std::process::Command::new("curl").args(["-s", "-D", "-", &url]).output().expect("curl runs");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = said.lines().next().unwrap_or_default().trim_end().to_owned();
    let body = said.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
    (status, body)
}

fn crate_path(version: &CrateVersion) -> String {
    format!("/cargo/crates/{}/{}/{}", version.name, version.version, version.sha256)
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

#[tokio::test(flavor = "multi_thread")]
async fn min_age_holds_a_new_version_back_from_resolution_and_from_a_lockfile_until_it_is_old_enough() {
    let (fake, server, tiny) = registry_with("[policy]\nmin_age = \"3d\"\n").await;
    let project = project(&server, "/cargo");
    succeeded(&project.run("home", &["generate-lockfile"]));
    assert_eq!(locked(&project), "1.0.0", "the version a day old is not resolved");

    // A lockfile naming the new version: cargo finds no such version in
    // the index file it is served, and says so in its own words.
    lock_at(&project, &tiny.old, &tiny.new);
    let held = project.run("home", &["fetch", "--locked"]);
    assert!(!held.success, "{}", held.output);
    println!("cargo fetch --locked, 1.1.0 held back:\n{}", held.output);
    let own_words = "failed to select a version for the requirement `tiny = \"^1\"` (locked to 1.1.0)";
    assert!(held.output.contains(own_words), "{}", held.output);
    assert!(held.output.contains("candidate versions found which didn't match: 1.0.0"), "{}", held.output);
    let (status, body) = fetched_by_curl(&server, &crate_path(&tiny.new));
    assert!(status.starts_with("HTTP/1.1 403 Blocked by pkgproxy policy (min_age until "), "{status}");
    assert!(body.starts_with("pkgproxy: cargo:tiny@1.1.0 is blocked by policy: published "), "{body}");
    assert!(body.contains("min_age 3d; allowed from "), "{body}");
    assert_eq!(fake.count("/files/tiny/tiny-1.1.0.crate"), 0, "never fetched for a refused client");

    // Four days on, the same lockfile, with the same cargo home (whose
    // copy of the index file cargo revalidates), is fetched.
    server.clock().advance(4 * DAY);
    let fetched = project.run("home", &["fetch", "--locked"]);
    succeeded(&fetched);
    assert_eq!(fake.count("/files/tiny/tiny-1.1.0.crate"), 1, "{:#?}", fake.requests());
    let again = project.run("other-home", &["fetch", "--locked"]);
    succeeded(&again);
    assert_eq!(fake.count("/files/tiny/tiny-1.1.0.crate"), 1, "served from the cache since: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn not_after_serves_only_what_was_published_before_it() {
    // The server's clock starts at the system's time, a moment after this.
    let line = humantime::format_rfc3339_seconds(SystemTime::now() - 10 * DAY);
    let (_fake, server, _tiny) = registry_with(&format!("[policy]\nnot_after = \"{line}\"\n")).await;
    let project = project(&server, "/cargo");
    succeeded(&project.run("home", &["generate-lockfile"]));
    assert_eq!(locked(&project), "1.0.0");
    let index = send(server.proxy_addr(), "GET", "/cargo/index/ti/ny/tiny", &[], b"").await;
    let index = String::from_utf8_lossy(&index.body).into_owned();
    assert!(index.contains("\"vers\":\"1.0.0\"") && !index.contains("\"1.1.0\""), "{index}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_gives_no_times_is_refused_when_unknown_time_refuses_and_served_when_it_allows() {
    let (fake, server, tiny) = registry_with("[policy]\nmin_age = \"3d\"\nunknown_time = \"refuse\"\n").await;
    fake.set_no_times(true);
    let project = project(&server, "/cargo");
    let refused = project.run("home", &["generate-lockfile"]);
    assert!(!refused.success, "{}", refused.output);
    println!("cargo generate-lockfile, no times and unknown_time = \"refuse\":\n{}", refused.output);
    assert!(refused.output.contains("no matching package named `tiny` found"), "{}", refused.output);
    let (status, body) = fetched_by_curl(&server, &crate_path(&tiny.old));
    assert_eq!(status, "HTTP/1.1 403 Blocked by pkgproxy policy (unknown_time)");
    assert!(body.contains("cargo:tiny@1.0.0 is blocked by policy: its publish time cannot be learnt"), "{body}");

    let config = format!("{}[policy]\nmin_age = \"3d\"\nunknown_time = \"allow\"\n", fake.config());
    server.reload_with(&config).await;
    succeeded(&project.run("home", &["generate-lockfile"]));
    assert_eq!(locked(&project), "1.1.0", "nothing is known to be too new");
    succeeded(&project.run("home", &["fetch", "--locked"]));
}

/// An OSV folder holding one malicious-package record for `tiny` 1.1.0.
fn malicious_record() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a folder");
    let record = serde_json::json!({
        "id": "MAL-2026-7001",
        "summary": "Malicious code in tiny (crates.io)",
        "affected": [{"package": {"ecosystem": "crates.io", "name": "tiny"}, "versions": ["1.1.0"]}]
    });
    std::fs::write(dir.path().join("MAL-2026-7001.json"), record.to_string()).expect("the record");
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malicious_package_record_refuses_its_version_serves_its_neighbour_and_allow_lets_it_through() {
    let osv = malicious_record();
    let policy = format!("[policy]\nosv = [{:?}]\n", osv.path());
    let (fake, server, tiny) = registry_with(&policy).await;
    let project = project(&server, "/cargo");
    succeeded(&project.run("home", &["generate-lockfile"]));
    assert_eq!(locked(&project), "1.0.0", "the neighbour is served");
    succeeded(&project.run("home", &["fetch", "--locked"]));
    let (status, body) = fetched_by_curl(&server, &crate_path(&tiny.new));
    assert_eq!(status, "HTTP/1.1 403 Blocked by pkgproxy policy (MAL-2026-7001)");
    assert!(body.contains("cargo:tiny@1.1.0 is blocked by policy: named by MAL-2026-7001"), "{body}");

    server.reload_with(&format!("{}{policy}allow = [\"cargo:tiny@1.1.0\"]\n", fake.config())).await;
    succeeded(&project.run("home", &["update"]));
    assert_eq!(locked(&project), "1.1.0", "break-glass");
    succeeded(&project.run("home", &["fetch", "--locked"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_configured_with_policy_false_serves_its_fresh_versions() {
    let fake = FakeCrates::start(&[]).await;
    let config = format!(
        "{}[[cargo.registry]]\nname = \"corp\"\nindex = [\"{}\"]\npolicy = false\n[policy]\nmin_age = \"3d\"\n",
        fake.config(),
        fake.url()
    );
    let server = Server::start(Some(&config)).await;
    let tiny = publish(&fake, server.clock().now());
    let corp = project(&server, "/cargo/corp");
    succeeded(&corp.run("home", &["generate-lockfile"]));
    assert_eq!(locked(&corp), "1.1.0", "the fleet's own registry is not judged");
    succeeded(&corp.run("home", &["fetch", "--locked"]));
    let judged = project(&server, "/cargo");
    succeeded(&judged.run("home", &["generate-lockfile"]));
    assert_eq!(locked(&judged), "1.0.0", "crates.io's is");
    assert_eq!(fetched_by_curl(&server, &crate_path(&tiny.new)).0.split(' ').nth(1), Some("403"));
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_the_policy_applies_to_what_is_cached_and_a_cached_crate_is_served_once_old_enough() {
    let (fake, server, tiny) = registry_with("[policy]\nmin_age = \"12h\"\n").await;
    let project = project(&server, "/cargo");
    succeeded(&project.run("online", &["generate-lockfile"]));
    assert_eq!(locked(&project), "1.1.0");
    succeeded(&project.run("online", &["fetch", "--locked"]));
    lock_at(&project, &tiny.new, &tiny.old);
    succeeded(&project.run("online", &["fetch", "--locked"]));

    set_mode(&server, "offline").await;
    server.reload_with(&format!("{}[policy]\nmin_age = \"3d\"\n", fake.config())).await;
    fake.clear_requests();
    let (status, body) = fetched_by_curl(&server, &crate_path(&tiny.new));
    assert!(
        status.starts_with("HTTP/1.1 403 Blocked by pkgproxy policy (min_age until "),
        "cached, yet refused: {status}"
    );
    assert!(body.contains("cargo:tiny@1.1.0 is blocked by policy"), "{body}");
    let resolved = project.run("offline", &["generate-lockfile"]);
    succeeded(&resolved);
    assert_eq!(locked(&project), "1.0.0", "the held index file, filtered");
    succeeded(&project.run("offline", &["fetch", "--locked"]));

    server.clock().advance(4 * DAY);
    lock_at(&project, &tiny.old, &tiny.new);
    succeeded(&project.run("offline", &["fetch", "--locked"]));
    assert!(fake.requests().is_empty(), "all of it from the cache: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_with_a_changed_rule_applies_to_the_next_request_without_fetching_anything_again() {
    let (fake, server, tiny) = registry_with("[policy]\nmin_age = \"3d\"\n").await;
    let project = project(&server, "/cargo");
    succeeded(&project.run("home", &["generate-lockfile"]));
    assert_eq!(locked(&project), "1.0.0");
    let index_requests = fake.index_requests();

    server.reload_with(&format!("{}[policy]\nmin_age = \"12h\"\n", fake.config())).await;
    succeeded(&project.run("home", &["update"]));
    assert_eq!(locked(&project), "1.1.0", "the new rule, from the next request on");
    succeeded(&project.run("home", &["fetch", "--locked"]));
    assert_eq!(fake.index_requests(), index_requests, "no index file fetched again: {:#?}", fake.requests());
    let path = "/cargo/index/ti/ny/tiny";
    let whole = send(server.proxy_addr(), "GET", path, &[], b"").await;
    let whole_tag = whole.header("etag").expect("a tag").to_owned();

    fake.clear_requests();
    server.reload_with(&format!("{}[policy]\nmin_age = \"3d\"\n", fake.config())).await;
    // A copy served before the rule changed is not current: cargo, which
    // revalidates its copy by its tag, is sent the filtered file.
    let filtered = send(server.proxy_addr(), "GET", path, &[("if-none-match", &whole_tag)], b"").await;
    assert_eq!(filtered.status, 200);
    assert!(!String::from_utf8_lossy(&filtered.body).contains("1.1.0"));
    let filtered_tag = filtered.header("etag").expect("a tag of its own").to_owned();
    assert_ne!(filtered_tag, whole_tag);
    let current = send(server.proxy_addr(), "GET", path, &[("if-none-match", &filtered_tag)], b"").await;
    assert_eq!(current.status, 304, "the filtered file's own tag stands while it does");
    let (status, _) = fetched_by_curl(&server, &crate_path(&tiny.new));
    assert!(status.contains(" 403 "), "the held crate refused again: {status}");
    succeeded(&project.run("home", &["update"]));
    assert_eq!(locked(&project), "1.0.0");
    assert!(fake.requests().is_empty(), "nothing fetched again: {:#?}", fake.requests());
}
