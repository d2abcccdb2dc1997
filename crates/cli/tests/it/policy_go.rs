//! The fleet's policy on the go side, with the real go command against a
//! module proxy on 127.0.0.1 whose `.info` files say when each version was
//! published: resolutions pick the newest version served, a version pinned
//! in go.mod and go.sum is refused with the reason the go command prints,
//! and the rules apply to what is cached, offline and across a reload.
//!
//! The in-process server's clock starts a day after the newest version was
//! published, and moves instead of the test waiting.

use std::time::{Duration, SystemTime};

use pkgproxy_control::ModeRequest;
use pkgproxy_testkit::client::get;
use pkgproxy_testkit::{GoModules, GoSandbox, Origin};

use crate::inproc::Server;

const DAY: Duration = Duration::from_secs(86_400);
const MODULE: &str = "/go/example.com/hello";

/// Whether the module proxy's `.info` files say when each version was
/// published.
#[derive(Clone, Copy)]
enum Times {
    Given,
    NotGiven,
}

/// `example.com/hello` v1.0.0, v1.1.0 and v1.2.0, published thirty, ten
/// and one day before `now`, served by a module proxy.
async fn upstream(now: SystemTime, times: Times) -> (GoModules, Origin) {
    let at = |days_before: u32| match times {
        Times::Given => Some(now - DAY * days_before),
        Times::NotGiven => None,
    };
    let modules = GoModules::hello_published(&[("v1.0.0", at(30)), ("v1.1.0", at(10)), ("v1.2.0", at(1))]);
    let origin = Origin::serve(modules.root()).await;
    (modules, origin)
}

/// pkgproxy's configuration: `origin` as the go side's one proxy, with
/// `go` more of `[go]`, and `policy` after it.
fn config(origin: &Origin, go: &str, policy: &str) -> String {
    format!("[go]\nproxies = [\"{}\"]\nsumdb = \"off\"\n{go}\n{policy}", origin.url())
}

fn goproxy(server: &Server) -> String {
    format!("http://{}/go", server.proxy_addr())
}

fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A consumer module pinning `example.com/hello` at `version` in its go.mod
/// and go.sum, as `go get` writes them against the upstream itself, whose
/// go command fetches through `goproxy`.
fn pinned(origin: &Origin, goproxy: &str, version: &str) -> GoSandbox {
    let direct = GoSandbox::bare(&origin.url());
    direct.go("direct", &["get", &format!("example.com/hello@{version}")]).assert_success();
    let through = GoSandbox::bare(goproxy);
    for file in ["go.mod", "go.sum"] {
        std::fs::copy(direct.app().join(file), through.app().join(file)).expect("the pinned module's files");
    }
    origin.clear_requests();
    through
}

/// `GET path` of pkgproxy: its status and body.
async fn fetched(server: &Server, path: &str) -> (u16, String) {
    let answer = get(server.proxy_addr(), path).await;
    (answer.status, String::from_utf8_lossy(&answer.body).into_owned())
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

#[tokio::test(flavor = "multi_thread")]
async fn min_age_resolves_the_previous_version_and_holds_a_pinned_new_one_until_it_is_old_enough() {
    let now = SystemTime::now();
    let (_modules, origin) = upstream(now, Times::Given).await;
    let server = Server::start(Some(&config(&origin, "", "[policy]\nmin_age = \"3d\"\n"))).await;
    let goproxy = goproxy(&server);

    let resolving = GoSandbox::bare(&goproxy);
    let latest = resolving.go("resolving", &["list", "-m", "example.com/hello@latest"]);
    assert_eq!(latest.assert_success().stdout, "example.com/hello v1.1.0\n");
    resolving.go("resolving", &["get", "example.com/hello"]).assert_success();
    let go_mod = std::fs::read_to_string(resolving.app().join("go.mod")).unwrap();
    assert!(go_mod.contains("require example.com/hello v1.1.0"), "{go_mod}");

    let lockfile = pinned(&origin, &goproxy, "v1.2.0");
    let held = lockfile.go("held", &["mod", "download"]);
    eprintln!("go mod download of a pinned version published a day ago, under min_age 3d:\n{}", held.stderr);
    assert!(!held.success, "a version a day old is not served under min_age 3d");
    assert!(held.stderr.contains("403 Blocked by pkgproxy policy (min_age until "), "{}", held.stderr);
    let line = "server response: pkgproxy: go:example.com/hello@v1.2.0 is blocked by policy: published ";
    assert!(held.stderr.contains(line), "{}", held.stderr);
    assert!(held.stderr.contains(", min_age 3d; allowed from "), "{}", held.stderr);
    let files = |version: &str| {
        origin.count_path(&format!("/@v/{version}.mod")) + origin.count_path(&format!("/@v/{version}.zip"))
    };
    assert_eq!(files("v1.2.0"), 0, "nothing is fetched for a refused client");

    server.clock().advance(DAY * 4);
    lockfile.go("four-days-on", &["mod", "download"]).assert_success();
    assert_eq!(origin.count_path("/@v/v1.2.0.zip"), 1, "old enough now: fetched and served");
}

#[tokio::test(flavor = "multi_thread")]
async fn not_after_in_the_past_lists_and_points_latest_at_what_was_published_before() {
    let now = SystemTime::now();
    let (_modules, origin) = upstream(now, Times::Given).await;
    let policy = |line: SystemTime| format!("[policy]\nnot_after = \"{}\"\n", rfc3339(line));
    let server = Server::start(Some(&config(&origin, "", &policy(now - DAY * 5)))).await;

    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, "v1.0.0\nv1.1.0\n".to_owned()));
    let (status, latest) = fetched(&server, &format!("{MODULE}/@latest")).await;
    assert_eq!(status, 200);
    let latest: serde_json::Value = serde_json::from_str(&latest).unwrap();
    assert_eq!(latest["Version"], "v1.1.0", "the upstream's v1.2.0 is past the line");
    assert_eq!(latest["Time"], rfc3339(now - DAY * 10), "the answer is v1.1.0's own .info");
    let go = GoSandbox::bare(&goproxy(&server));
    let versions = go.go("versions", &["list", "-m", "-versions", "example.com/hello"]);
    assert_eq!(versions.assert_success().stdout, "example.com/hello v1.0.0 v1.1.0\n");

    // A line before every version: the list is empty, and the `@latest`
    // the go command then asks for is refused as its version is.
    server.reload_with(&config(&origin, "", &policy(now - DAY * 60))).await;
    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, String::new()));
    let nothing = go.go("nothing", &["list", "-m", "example.com/hello@latest"]);
    eprintln!("go list -m @latest with every version past not_after:\n{}", nothing.stderr);
    assert!(!nothing.success);
    assert!(nothing.stderr.contains("/@latest: 403 Blocked by pkgproxy policy (not_after)"), "{}", nothing.stderr);
    let line = "server response: pkgproxy: go:example.com/hello@v1.2.0 is blocked by policy: published ";
    assert!(nothing.stderr.contains(line), "{}", nothing.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_of_unknown_time_is_refused_saying_so_unless_unknown_time_allows_it() {
    let (_modules, origin) = upstream(SystemTime::now(), Times::NotGiven).await;
    let policy = |unknown: &str| format!("[policy]\nmin_age = \"3d\"\nunknown_time = \"{unknown}\"\n");
    let server = Server::start(Some(&config(&origin, "", &policy("refuse")))).await;
    let lockfile = pinned(&origin, &goproxy(&server), "v1.0.0");

    let held = lockfile.go("refused", &["mod", "download"]);
    eprintln!("go mod download of a pinned version whose .info gives no Time:\n{}", held.stderr);
    assert!(!held.success, "fail closed");
    assert!(held.stderr.contains("403 Blocked by pkgproxy policy (unknown_time)"), "{}", held.stderr);
    assert!(held.stderr.contains("its publish time cannot be learnt"), "{}", held.stderr);
    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, String::new()));

    server.reload_with(&config(&origin, "", &policy("allow"))).await;
    lockfile.go("allowed", &["mod", "download"]).assert_success();
    let listed = "v1.0.0\nv1.1.0\nv1.2.0\n".to_owned();
    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, listed));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malicious_package_record_refuses_its_version_and_allow_lets_it_through() {
    let (_modules, origin) = upstream(SystemTime::now(), Times::Given).await;
    let osv = tempfile::tempdir().unwrap();
    // OSV writes Go's versions without their `v`.
    let record = r#"{"id":"MAL-2026-4242","affected":[{"package":{"ecosystem":"Go","name":"example.com/hello"},"versions":["1.1.0"]}]}"#;
    std::fs::write(osv.path().join("MAL-2026-4242.json"), record).unwrap();
    let policy = |allow: &str| format!("[policy]\nosv = [\"{}\"]\n{allow}", osv.path().display());
    let server = Server::start(Some(&config(&origin, "", &policy("")))).await;
    let goproxy = goproxy(&server);

    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, "v1.0.0\nv1.2.0\n".to_owned()));
    assert_eq!(origin.count_path(".info"), 0, "a malicious-package list alone reads no times");
    let malicious = pinned(&origin, &goproxy, "v1.1.0");
    let held = malicious.go("refused", &["mod", "download"]);
    eprintln!("go mod download of a pinned version a MAL- record names:\n{}", held.stderr);
    assert!(!held.success);
    assert!(held.stderr.contains("403 Blocked by pkgproxy policy (MAL-2026-4242)"), "{}", held.stderr);
    let line = "server response: pkgproxy: go:example.com/hello@v1.1.0 is blocked by policy: named by MAL-2026-4242";
    assert!(held.stderr.contains(line), "{}", held.stderr);
    pinned(&origin, &goproxy, "v1.0.0").go("neighbour", &["mod", "download"]).assert_success();

    let allowed = policy("allow = [\"go:example.com/hello@v1.1.0\"]\n");
    server.reload_with(&config(&origin, "", &allowed)).await;
    malicious.go("allowed", &["mod", "download"]).assert_success();
}

#[tokio::test(flavor = "multi_thread")]
async fn go_policy_false_exempts_the_go_side_s_modules() {
    let (_modules, origin) = upstream(SystemTime::now(), Times::Given).await;
    let exempt = config(&origin, "policy = false", "[policy]\nmin_age = \"3d\"\n");
    let server = Server::start(Some(&exempt)).await;
    let listed = "v1.0.0\nv1.1.0\nv1.2.0\n".to_owned();
    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, listed));
    assert_eq!(origin.count_path(".info"), 0, "no version's time is read");
    pinned(&origin, &goproxy(&server), "v1.2.0").go("exempt", &["mod", "download"]).assert_success();
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_the_policy_applies_to_what_is_cached() {
    let (_modules, origin) = upstream(SystemTime::now(), Times::Given).await;
    let server = Server::start(Some(&config(&origin, "", "[policy]\nmin_age = \"3d\"\n"))).await;
    let goproxy = goproxy(&server);
    // Online: the resolution reads every listed version's .info.
    GoSandbox::bare(&goproxy).go("online", &["get", "example.com/hello"]).assert_success();

    set_mode(&server, "offline").await;
    origin.clear_requests();
    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, "v1.0.0\nv1.1.0\n".to_owned()));
    let (status, refused) = fetched(&server, &format!("{MODULE}/@v/v1.2.0.info")).await;
    assert_eq!(status, 403, "held, and refused: {refused}");
    assert!(refused.starts_with("pkgproxy: go:example.com/hello@v1.2.0 is blocked by policy: published "), "{refused}");
    let offline = GoSandbox::bare(&goproxy);
    offline.go("offline", &["get", "example.com/hello"]).assert_success();
    let go_mod = std::fs::read_to_string(offline.app().join("go.mod")).unwrap();
    assert!(go_mod.contains("require example.com/hello v1.1.0"), "{go_mod}");

    server.clock().advance(DAY * 4);
    let listed = "v1.0.0\nv1.1.0\nv1.2.0\n".to_owned();
    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, listed));
    assert_eq!(fetched(&server, &format!("{MODULE}/@v/v1.2.0.info")).await.0, 200, "held, and old enough now");
    assert!(origin.requests().is_empty(), "nothing went upstream offline: {:?}", origin.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_with_a_changed_rule_applies_to_the_next_request_without_refetching() {
    let (_modules, origin) = upstream(SystemTime::now(), Times::Given).await;
    let server = Server::start(Some(&config(&origin, "", ""))).await;
    let goproxy = goproxy(&server);
    let lockfile = pinned(&origin, &goproxy, "v1.2.0");
    lockfile.go("no-policy", &["mod", "download"]).assert_success();
    for file in ["@v/list", "@v/v1.0.0.info", "@v/v1.1.0.info", "@v/v1.2.0.info"] {
        assert_eq!(fetched(&server, &format!("{MODULE}/{file}")).await.0, 200, "{file}");
    }
    origin.clear_requests();

    server.reload_with(&config(&origin, "", "[policy]\nmin_age = \"3d\"\n")).await;
    assert_eq!(fetched(&server, &format!("{MODULE}/@v/list")).await, (200, "v1.0.0\nv1.1.0\n".to_owned()));
    let held = lockfile.go("min-age", &["mod", "download"]);
    assert!(!held.success, "held at once, though cached");
    assert!(held.stderr.contains("403 Blocked by pkgproxy policy (min_age until "), "{}", held.stderr);
    assert!(origin.requests().is_empty(), "the rule read what is cached: {:?}", origin.requests());

    server.clock().advance(DAY * 4);
    lockfile.go("four-days-on", &["mod", "download"]).assert_success();
    let refetched: Vec<String> = origin.requests().iter().map(|r| r.path.clone()).collect();
    assert!(refetched.iter().all(|path| !path.ends_with(".zip") && !path.ends_with(".mod")), "{refetched:?}");
}
