//! The fleet's policy made visible and operable: `pkgproxyctl policy` and
//! `policy why`, `explain` and `check` naming the rule, the access log,
//! `/metrics` and the status page, the real npm-family clients told why a
//! locked version is refused, bundles carrying the malicious-package
//! records to an offline pkgproxy, and a bad rule refused at start.
//!
//! The fake registry publishes `demo` 1.0.0 at 2026-01-01T01:00Z and 1.0.1
//! a minute later; pkgproxy's clock starts at 01:02:30, so with `min_age =
//! "2m"` 1.0.0 is served and 1.0.1 is held back until 01:03.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pkgproxy_control::{PolicyReport, Status};
use pkgproxy_testkit::client::{get, raw_exchange};
use pkgproxy_testkit::{Daemon, FakeNpm, NodeClient, NodeSandbox, NpmPackage};

use crate::common::PKGPROXY;
use crate::inproc::Server;

/// 2026-01-01T01:02:30Z: demo 1.0.1 is 90 seconds old.
fn start_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_767_225_600 + 62 * 60 + 30)
}

/// What `min_age = "2m"` holds 1.0.1 back until.
const UNTIL: &str = "2026-01-01T01:03Z";
const MIN_AGE: &str = "[policy]\nmin_age = \"2m\"\n";
const TARBALL: &str = "/npm/demo/-/demo-1.0.1.tgz";
const NEIGHBOUR: &str = "/npm/demo/-/demo-1.0.0.tgz";

/// The fake registry with demo 1.0.0 and 1.0.1.
async fn registry() -> FakeNpm {
    FakeNpm::start(&[NpmPackage::new("demo", "1.0.0", &[]), NpmPackage::new("demo", "1.0.1", &[])]).await
}

/// The npm side in front of `fake`, and `more`.
fn config(fake: &FakeNpm, more: &str) -> String {
    format!("[npm]\nmirrors = [\"{}\"]\n{more}", fake.url())
}

/// A folder of OSV records holding one `MAL-` record for demo 1.0.1.
fn malicious_record(dir: &Path) -> std::path::PathBuf {
    let osv = dir.join("osv");
    std::fs::create_dir_all(&osv).unwrap();
    let record = r#"{"id":"MAL-2025-1234","modified":"2025-10-01T00:00:00Z","affected":[
        {"package":{"ecosystem":"npm","name":"demo"},"versions":["1.0.1"]}]}"#;
    std::fs::write(osv.join("MAL-2025-1234.json"), record).unwrap();
    osv
}

fn osv_policy(osv: &Path) -> String {
    format!("[policy]\nosv = [{:?}]\n", osv.to_str().unwrap())
}

/// `pkgproxyctl ARGS` against `server`: whether it succeeded, and what it
/// printed.
fn ctl(server: &Server, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(args)
        .arg("-stats-socket-path")
        .arg(server.stats_socket())
        .arg("-admin-socket-path")
        .arg(server.admin_socket())
        .output()
        .expect("pkgproxyctl runs");
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), printed)
}

fn registry_url(server: &Server) -> String {
    format!("http://{}/npm", server.proxy_addr())
}

/// The status line of a `GET path` of `server`, as a client reads it.
async fn status_line(server: &Server, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.proxy_addr());
    let raw = raw_exchange(server.proxy_addr(), request.as_bytes(), Duration::from_secs(10)).await;
    String::from_utf8_lossy(&raw).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_version_is_left_out_and_its_tarball_refused_naming_the_rule_until_it_is_old_enough() {
    let fake = registry().await;
    let server = Server::start_at(Some(&config(&fake, MIN_AGE)), start_time()).await;
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("demo", "^1.0.0")]);
    let installed = sandbox.install(&registry_url(&server));
    assert!(installed.success, "{}", installed.output);
    assert_eq!(sandbox.installed("demo").as_deref(), Some("1.0.0"), "the version before the fresh one");

    let refused = get(server.proxy_addr(), TARBALL).await;
    assert_eq!(refused.status, 403);
    let body = String::from_utf8_lossy(&refused.body);
    let line =
        format!("npm:demo@1.0.1 is blocked by policy: published 2026-01-01T01:01Z, min_age 2m; allowed from {UNTIL}");
    assert!(body.contains(&line), "{body}");
    let reason = format!("refused: npm:demo@1.0.1 blocked by min_age until {UNTIL}");
    assert_eq!(refused.header("x-pkgproxy-reason"), Some(reason.as_str()));
    let phrase = status_line(&server, TARBALL).await;
    assert_eq!(phrase, format!("HTTP/1.1 403 Blocked by pkgproxy policy (min_age until {UNTIL})"));

    server.clock().advance(Duration::from_secs(60));
    assert_eq!(get(server.proxy_addr(), TARBALL).await.status, 200, "old enough now");
    sandbox.forget();
    std::fs::remove_file(sandbox.lockfile()).unwrap();
    let again = sandbox.install(&registry_url(&server));
    assert!(again.success, "{}", again.output);
    assert_eq!(sandbox.installed("demo").as_deref(), Some("1.0.1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn pkgproxyctl_policy_lists_the_rules_in_force_and_counts_refusals_by_side_and_rule() {
    let dir = tempfile::tempdir().unwrap();
    let fake = registry().await;
    let none = Server::start_at(Some(&config(&fake, "")), start_time()).await;
    let (listed, printed) = ctl(&none, &["policy"]);
    assert!(listed, "{printed}");
    assert!(printed.starts_with("no policy is in force: every release is served"), "{printed}");

    let osv = malicious_record(dir.path());
    let rules = format!("{MIN_AGE}allow = [\"npm:other@*\"]\nosv = [{:?}]\n", osv.to_str().unwrap());
    let server = Server::start_at(Some(&config(&fake, &rules)), start_time()).await;
    for _ in 0..2 {
        assert_eq!(get(server.proxy_addr(), TARBALL).await.status, 403);
    }
    let (listed, printed) = ctl(&server, &["policy"]);
    assert!(listed, "{printed}");
    for expected in [
        "rules in force:\n  min_age 2m: a release published less than 2m ago is not served\n",
        "  unknown_time refuse: a release whose publish time is unknown is not served\n",
        "  allow npm:other@*: served whatever the other rules say\n",
        "  osv: 1 malicious-package records naming 1 packages, from 1 source(s)\n",
        "refused since start:\n  npm    malicious     2\n",
        "last refused:\n  2026-01-01 01:02 UTC  npm:demo@1.0.1: named by MAL-2025-1234, a malicious-package record\n",
    ] {
        assert!(printed.contains(expected), "{expected:?} in:\n{printed}");
    }
    let (_, json) = ctl(&server, &["policy", "--json"]);
    let report: PolicyReport = serde_json::from_str(&json).unwrap();
    assert!(report.in_force && report.rules.len() == 4, "{report:?}");
    assert_eq!((report.blocked[0].rule.as_str(), report.blocked[0].count), ("malicious", 2));
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_why_says_whether_a_release_is_served_and_why_learning_its_time_and_counting_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fake = registry().await;
    let server = Server::start_at(Some(&config(&fake, MIN_AGE)), start_time()).await;
    let (served, printed) = ctl(&server, &["policy", "why", "npm", "demo", "1.0.1"]);
    assert!(!served, "a refused release exits non-zero: {printed}");
    assert_eq!(
        printed,
        format!(
            "npm:demo@1.0.1: blocked by min_age until {UNTIL}\n  published: 2026-01-01 01:01 UTC\n  \
             served from: 2026-01-01 01:03 UTC\n  a client is told: npm:demo@1.0.1 is blocked by policy: \
             published 2026-01-01T01:01Z, min_age 2m; allowed from {UNTIL}\n"
        )
    );
    assert!(fake.count("/demo") > 0, "its time was learnt from the registry's document");
    let (served, printed) = ctl(&server, &["policy", "why", "npm", "demo", "1.0.0"]);
    assert!(served, "{printed}");
    assert!(printed.starts_with("npm:demo@1.0.0: served: no rule refuses it\n"), "{printed}");
    let (_, printed) = ctl(&server, &["policy"]);
    assert!(printed.contains("refused since start: nothing"), "asking is no client's refusal: {printed}");
    let (asked, printed) = ctl(&server, &["policy", "why", "npm", "demo", "latest"]);
    assert!(!asked && printed.contains("not a name and version"), "{printed}");

    let osv = malicious_record(dir.path());
    let rules = format!("{}allow = [\"npm:demo@1.0.1\"]\n", osv_policy(&osv));
    let allowing = Server::start_at(Some(&config(&fake, &rules)), start_time()).await;
    let (served, printed) = ctl(&allowing, &["policy", "why", "npm", "demo", "1.0.1"]);
    assert!(served && printed.starts_with("npm:demo@1.0.1: served: allowed by allow entry npm:demo@1.0.1\n"));
    let denying = Server::start_at(Some(&config(&fake, &osv_policy(&osv))), start_time()).await;
    let (served, printed) = ctl(&denying, &["policy", "why", "npm", "demo", "1.0.1"]);
    assert!(!served && printed.starts_with("npm:demo@1.0.1: blocked by MAL-2025-1234\n"), "{printed}");
    let none = Server::start_at(Some(&config(&fake, "")), start_time()).await;
    let (served, printed) = ctl(&none, &["policy", "why", "npm", "demo", "1.0.1"]);
    assert!(served && printed.starts_with("npm:demo@1.0.1: served: no policy is in force\n"), "{printed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_names_the_rule_of_a_refused_tarball_and_what_a_document_is_served_without() {
    let fake = registry().await;
    let server = Server::start_at(Some(&config(&fake, MIN_AGE)), start_time()).await;
    assert_eq!(get(server.proxy_addr(), "/npm/demo").await.status, 200, "a client's document, held now");
    let (answered, printed) = ctl(&server, &["explain", TARBALL]);
    assert!(!answered, "refused: {printed}");
    assert!(printed.starts_with(&format!("refused: npm:demo@1.0.1 blocked by min_age until {UNTIL}\n")), "{printed}");
    let (answered, printed) = ctl(&server, &["explain", "/npm/demo"]);
    assert!(answered, "{printed}");
    assert!(printed.contains(&format!("  served without: npm:demo@1.0.1 blocked by min_age until {UNTIL}\n")));
    let (answered, printed) = ctl(&server, &["explain", NEIGHBOUR]);
    assert!(answered && !printed.contains("blocked"), "{printed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_reports_each_locked_release_the_policy_refuses_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let fake = registry().await;
    let server = Server::start_at(Some(&config(&fake, "")), start_time()).await;
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("demo", "1.0.1")]);
    let installed = sandbox.install(&registry_url(&server));
    assert!(installed.success, "{}", installed.output);
    let lockfile = sandbox.lockfile();
    let (ready, printed) = ctl(&server, &["check", "npm", lockfile.to_str().unwrap()]);
    assert!(ready, "no policy yet: {printed}");

    server.reconfigure(&config(&fake, MIN_AGE)).await.unwrap();
    let (ready, printed) = ctl(&server, &["check", "npm", lockfile.to_str().unwrap()]);
    assert!(!ready, "{printed}");
    assert!(printed.contains(&format!("blocked by min_age until {UNTIL}\n")), "{printed}");
    assert!(printed.starts_with("blocked  ") && printed.contains("0 of 1 ready, 1 blocked by policy"), "{printed}");

    let osv = malicious_record(dir.path());
    server.reconfigure(&config(&fake, &osv_policy(&osv))).await.unwrap();
    let (ready, printed) = ctl(&server, &["check", "npm", lockfile.to_str().unwrap()]);
    assert!(!ready && printed.contains("blocked by MAL-2025-1234\n"), "{printed}");

    server.reconfigure(&config(&fake, MIN_AGE)).await.unwrap();
    server.clock().advance(Duration::from_secs(60));
    let (ready, printed) = ctl(&server, &["check", "npm", lockfile.to_str().unwrap()]);
    assert!(ready, "old enough now: {printed}");
}

/// What each client prints of a refused tarball, in its default output
/// (`docs/policy.md` quotes them): npm the reason phrase and the body's
/// line; yarn 4 the reason phrase; yarn 1 the status alone; pnpm, which
/// checks a frozen lockfile against the documents before it fetches,
/// that the version is not in the one it was served.
fn told_why(client: NodeClient) -> Vec<String> {
    let phrase = format!("Blocked by pkgproxy policy (min_age until {UNTIL})");
    match client {
        NodeClient::Npm => vec![
            format!("npm error 403 403 {phrase} - GET http://"),
            format!(
                "pkgproxy: npm:demo@1.0.1 is blocked by policy: published 2026-01-01T01:01Z, min_age 2m; \
                 allowed from {UNTIL}"
            ),
        ],
        NodeClient::Pnpm => vec!["demo@1.0.1 could not be checked against minimumReleaseAge".into()],
        NodeClient::Yarn1 => vec!["/npm/demo/-/demo-1.0.1.tgz: Request failed \"403 Forbidden\"".into()],
        NodeClient::Yarn4 => vec![format!("Response Code: 403 ({phrase})")],
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_locked_fresh_version_fails_in_every_client_saying_why_then_installs_from_the_cache_once_old_enough() {
    let fake = registry().await;
    let server = Server::start_at(Some(&config(&fake, "")), start_time()).await;
    let sandboxes: Vec<NodeSandbox> =
        NodeClient::ALL.iter().map(|client| NodeSandbox::new(*client, &[("demo", "1.0.1")])).collect();
    for sandbox in &sandboxes {
        let installed = sandbox.install(&registry_url(&server));
        assert!(installed.success, "{}", installed.output);
    }
    server.reconfigure(&config(&fake, MIN_AGE)).await.unwrap();
    let tarballs = fake.count(".tgz");
    for (client, sandbox) in NodeClient::ALL.iter().zip(&sandboxes) {
        sandbox.forget();
        let refused = sandbox.install_locked(&registry_url(&server));
        assert!(!refused.success, "{}: {}", client.as_str(), refused.output);
        eprintln!("--- {} {}:\n{}", client.as_str(), client.locked_install().join(" "), refused.output);
        for words in told_why(*client) {
            assert!(refused.output.contains(words.as_str()), "{}: {words:?} in {}", client.as_str(), refused.output);
        }
    }
    server.clock().advance(Duration::from_secs(60));
    for (client, sandbox) in NodeClient::ALL.iter().zip(&sandboxes) {
        sandbox.forget();
        let installed = sandbox.install_locked(&registry_url(&server));
        assert!(installed.success, "{}: {}", client.as_str(), installed.output);
        assert_eq!(sandbox.installed("demo").as_deref(), Some("1.0.1"), "{}", client.as_str());
    }
    assert_eq!(fake.count(".tgz"), tarballs, "served from the cache: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_carries_the_malicious_package_records_to_an_offline_pkgproxy_with_no_policy() {
    let dir = tempfile::tempdir().unwrap();
    let fake = registry().await;
    let osv = malicious_record(dir.path());
    let online = Server::start_at(Some(&config(&fake, &osv_policy(&osv))), start_time()).await;
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("demo", "1.0.0")]);
    let installed = sandbox.install(&registry_url(&online));
    assert!(installed.success, "{}", installed.output);

    let (key, trusted) = crate::bundle::signing_key(dir.path());
    let bundle = dir.path().join("bundle.tar");
    let (lockfile, bundle_path, key) = (sandbox.lockfile(), bundle.to_str().unwrap(), key.to_str().unwrap());
    let export = ["export", "-o", bundle_path, "--sign", key, "--policy", "npm", lockfile.to_str().unwrap()];
    let (exported, printed) = ctl(&online, &export);
    assert!(exported, "{printed}");
    let entries = pkgproxy_testkit::tarball::entries_of(&std::fs::read(&bundle).unwrap());
    assert!(entries.iter().any(|(name, _)| name == "policy/malicious.tsv"), "{entries:?}");

    let offline = Server::start_at(Some(&config(&fake, &trusted)), start_time()).await;
    let asked = pkgproxy_control::ModeRequest { mode: "offline".into(), from: None, cluster: false };
    offline.admin().set_offline(&asked).await.unwrap();
    assert_eq!(get(offline.proxy_addr(), TARBALL).await.status, 424, "offline, not held, no policy yet");
    let (imported, printed) = ctl(&offline, &["import", bundle_path]);
    assert!(imported, "{printed}");
    assert!(printed.contains("malicious-package records taken in and in force: 1 records"), "{printed}");

    let refused = get(offline.proxy_addr(), TARBALL).await;
    assert_eq!(refused.status, 403);
    assert!(String::from_utf8_lossy(&refused.body).contains("named by MAL-2025-1234"), "{:?}", refused.body);
    assert_eq!(refused.header("x-pkgproxy-reason"), Some("refused: npm:demo@1.0.1 blocked by MAL-2025-1234"));
    assert_eq!(get(offline.proxy_addr(), NEIGHBOUR).await.status, 200, "the neighbour is served");
    let (_, printed) = ctl(&offline, &["policy"]);
    assert!(printed.contains("osv: 1 malicious-package records naming 1 packages, from bundles taken in"));
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_and_the_status_page_show_what_the_policy_refused_and_no_paths() {
    let dir = tempfile::tempdir().unwrap();
    let fake = registry().await;
    let osv = malicious_record(dir.path());
    let rules = format!("{MIN_AGE}osv = [{:?}]\n", osv.to_str().unwrap());
    let server = Server::start_at(Some(&config(&fake, &rules)), start_time()).await;
    assert_eq!(get(server.proxy_addr(), TARBALL).await.status, 403);
    let metrics = server.admin().metrics().await.unwrap();
    assert!(metrics.contains("pkgproxy_policy_blocked_total{side=\"npm\",rule=\"malicious\"} 1\n"), "{metrics}");

    let status: Status = serde_json::from_slice(&get(server.proxy_addr(), "/pkgproxy/v1/status").await.body).unwrap();
    let policy = status.policy.expect("a policy is in force");
    assert_eq!(policy.rules.len(), 3, "{:?}", policy.rules);
    assert_eq!(policy.recent[0].release, "npm:demo@1.0.1");
    let page = String::from_utf8_lossy(&get(server.proxy_addr(), "/").await.body).into_owned();
    assert!(page.contains("<h2>Blocked by policy</h2>") && page.contains("npm:demo@1.0.1"), "{page}");
    assert!(page.contains("named by MAL-2025-1234"), "why");
    assert!(!page.contains(osv.to_str().unwrap()), "no path of the machine on a page every client reads");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_access_log_says_which_rule_refused_a_tarball() {
    let dir = tempfile::tempdir().unwrap();
    let fake = registry().await;
    let osv = malicious_record(dir.path());
    let log = dir.path().join("access.log");
    let args = ["-access-log", log.to_str().unwrap()];
    let daemon = Daemon::start_with(PKGPROXY, Some(&config(&fake, &osv_policy(&osv))), &args).await;
    assert_eq!(get(daemon.proxy_addr(), TARBALL).await.status, 403);
    let line: serde_json::Value = pkgproxy_testkit::eventually("the refusal's line", || async {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().next().map(|line| serde_json::from_str(line).unwrap())
    })
    .await;
    assert_eq!((line["cache"].as_str(), line["status"].as_u64()), (Some("refused"), Some(403)), "{line}");
    assert_eq!(line["reason"], "refused: npm:demo@1.0.1 blocked by MAL-2025-1234");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_freeze_by_reload_applies_to_the_next_request_without_asking_the_registry() {
    let fake = registry().await;
    let server = Server::start_at(Some(&config(&fake, "")), start_time()).await;
    let before = get(server.proxy_addr(), "/npm/demo").await;
    assert!(String::from_utf8_lossy(&before.body).contains("\"1.0.1\""));
    fake.clear_requests();
    let freeze = "[policy]\nnot_after = \"2026-01-01T01:00:30Z\"\n";
    server.reconfigure(&config(&fake, freeze)).await.unwrap();
    let frozen = get(server.proxy_addr(), "/npm/demo").await;
    let document: serde_json::Value = serde_json::from_slice(&frozen.body).unwrap();
    assert!(document["versions"].get("1.0.1").is_none(), "{document}");
    assert_eq!(document["dist-tags"]["latest"], "1.0.0");
    assert!(String::from_utf8_lossy(&get(server.proxy_addr(), TARBALL).await.body).contains("after not_after"));
    assert!(fake.requests().is_empty(), "nothing asked again: {:#?}", fake.requests());
    let (_, printed) = ctl(&server, &["policy", "why", "npm", "demo", "1.0.1"]);
    assert!(printed.starts_with("npm:demo@1.0.1: blocked by not_after 2026-01-01T01:00Z\n"), "{printed}");
}

/// Runs the daemon with the configuration `text`, expecting it to refuse
/// to start: what it said.
fn refused_to_start(dir: &Path, text: &str) -> String {
    let config = dir.join("pkgproxy.toml");
    std::fs::write(&config, text).unwrap();
    let output = Command::new(PKGPROXY)
        .args(["-cache-dir", dir.join("c").to_str().unwrap(), "-addr", "127.0.0.1:0"])
        .args(["-stats-socket-path", dir.join("s.sock").to_str().unwrap()])
        .args(["-admin-socket-path", dir.join("a.sock").to_str().unwrap()])
        .args(["-config", config.to_str().unwrap()])
        .env_remove("PKGPROXY_CONFIG")
        .output()
        .unwrap();
    assert!(!output.status.success(), "{text} should be refused");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_bad_rule_stops_the_start_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("MAL-1.json"), "{").unwrap();
    for (rule, says) in [
        ("allow = [\"gem:rails\"]", "policy.allow: \"gem:rails\": unknown side \"gem\""),
        ("allow = [\"npm:ex*press\"]", "policy.allow: \"npm:ex*press\": a * may only end the name"),
        ("min_age = \"three days\"", "policy.min_age: \"three days\" is not a duration"),
        ("not_after = \"last week\"", "policy.not_after: \"last week\" is not an instant"),
        ("osv = [\"/nonexistent/osv\"]", "policy.osv: /nonexistent/osv cannot be read"),
        (&format!("osv = [{:?}]", broken.to_str().unwrap()), "MAL-1.json is not an OSV record"),
    ] {
        let said = refused_to_start(dir.path(), &format!("[policy]\n{rule}\n"));
        assert!(said.contains(says), "{rule}: {said}");
        assert!(said.contains("policy."), "the key is named: {said}");
    }
}
