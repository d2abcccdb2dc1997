//! The go side end to end: the real `go` command (Debian's golang-go)
//! fetching modules through pkgproxy from an upstream module proxy on
//! 127.0.0.1 that serves a file tree of small modules.

use crate::common::PKGPROXY;
use pkgproxy_metrics::SideCounter;
use pkgproxy_testkit::client::get;
use pkgproxy_testkit::golang::escape;
use pkgproxy_testkit::{Daemon, GoModules, GoSandbox, Origin};
use serde_json::Value;

/// The tree, served, with checksum database records of the sums the real
/// go command computes for it (fetched directly, without pkgproxy).
pub(crate) async fn upstream_with_sums() -> (GoModules, Origin, Vec<Value>) {
    let modules = GoModules::standard();
    let origin = Origin::serve(modules.root()).await;
    let direct = GoSandbox::new(&origin.url());
    let wanted: Vec<String> = modules.versions.iter().map(|v| format!("{}@{}", v.path, v.version)).collect();
    let mut args = vec!["mod", "download", "-json"];
    args.extend(wanted.iter().map(String::as_str));
    let output = direct.go("direct", &args);
    output.assert_success();
    let sums: Vec<Value> =
        serde_json::Deserializer::from_str(&output.stdout).into_iter::<Value>().map(|v| v.unwrap()).collect();
    assert_eq!(sums.len(), modules.versions.len(), "{}", output.stdout);
    modules.support_sumdb("sum.golang.org");
    for sum in &sums {
        let text = |key: &str| sum[key].as_str().unwrap().to_string();
        modules.add_lookup("sum.golang.org", &text("Path"), &text("Version"), &text("Sum"), &text("GoModSum"));
    }
    origin.clear_requests();
    (modules, origin, sums)
}

async fn daemon_for(origin: &Origin) -> Daemon {
    let config = format!("[go]\nproxies = [\"{}\"]\n", origin.url());
    Daemon::start(PKGPROXY, Some(&config)).await
}

fn goproxy(daemon: &Daemon) -> String {
    format!("http://{}/go", daemon.proxy_addr())
}

#[tokio::test(flavor = "multi_thread")]
async fn go_downloads_and_builds_through_pkgproxy_and_a_second_clean_run_is_served_from_the_cache() {
    let (_modules, origin, _) = upstream_with_sums().await;
    let daemon = daemon_for(&origin).await;
    let go = GoSandbox::new(&goproxy(&daemon));

    go.go("first", &["mod", "download"]).assert_success();
    go.go("first", &["build", "-o", "app", "."]).assert_success();
    let run = std::process::Command::new(go.app().join("app")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&run.stdout), "hello!\n");
    let paths: Vec<String> = origin.requests().iter().map(|r| r.path.clone()).collect();
    for fetched in ["/example.com/!hello!caps/@v/v0.1.0.zip", "/example.com/hello/@v/v1.0.0.zip"] {
        assert!(paths.iter().any(|p| p == fetched), "{fetched} in {paths:#?}");
    }
    assert!(paths.iter().any(|p| p.starts_with("/sumdb/sum.golang.org/lookup/")), "pkgproxy checked the sums");

    // A clean module cache again: everything comes from pkgproxy's cache.
    origin.clear_requests();
    go.go("second", &["mod", "download"]).assert_success();
    go.go("second", &["build", "-o", "app2", "."]).assert_success();
    let asked: Vec<String> = origin.requests().iter().map(|r| r.path.clone()).collect();
    assert!(
        asked.iter().all(|p| p.ends_with("/@v/list") || p.ends_with("/@latest")),
        "only list and @latest may be revalidated: {asked:#?}"
    );
    let info = daemon.info().await;
    assert!(info.sides["go"].get(SideCounter::Hits) >= 4, "{:?}", info.sides["go"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn go_get_latest_resolves_case_encoded_modules_and_parent_probes_get_404() {
    let (_modules, origin, _) = upstream_with_sums().await;
    let daemon = daemon_for(&origin).await;
    let go = GoSandbox::new(&goproxy(&daemon));
    go.go("get", &["get", "example.com/HelloCaps@latest"]).assert_success();
    go.go("get", &["build", "-o", "app", "."]).assert_success();
    let paths: Vec<String> = origin.requests().iter().map(|r| r.path.clone()).collect();
    assert!(paths.iter().any(|p| p == "/example.com/!hello!caps/@v/list"), "{paths:#?}");

    // The parent path probe: a 404 passed through, then remembered.
    let probe = "/go/example.com/@v/list".to_string();
    let before = origin.count_path("/example.com/@v/list");
    let answer = get(daemon.proxy_addr(), &probe).await;
    assert_eq!(answer.status, 404);
    let again = get(daemon.proxy_addr(), &probe).await;
    assert_eq!(again.status, 404);
    assert!(origin.count_path("/example.com/@v/list") <= before + 1, "a 404 is remembered for a while");

    // Both spellings of a case-encoded path are one entry.
    let encoded = "/go/example.com/%21hello%21caps/@v/v0.1.0.mod".to_string();
    let literal = "/go/example.com/!hello!caps/@v/v0.1.0.mod".to_string();
    let a = get(daemon.proxy_addr(), &encoded).await;
    let b = get(daemon.proxy_addr(), &literal).await;
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!(a.body, b.body);
    assert_eq!(b.header("x-pkgproxy-cache"), Some("hit"));
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_serves_every_module_seen_and_refuses_one_never_seen() {
    let (_modules, origin, _) = upstream_with_sums().await;
    let daemon = daemon_for(&origin).await;
    let go = GoSandbox::new(&goproxy(&daemon));
    go.go("online", &["mod", "download"]).assert_success();
    go.go("online", &["build", "-o", "app", "."]).assert_success();

    daemon.set_offline_mode("offline").await;
    origin.clear_requests();
    go.go("offline", &["mod", "download"]).assert_success();
    go.go("offline", &["build", "-o", "app", "."]).assert_success();
    assert!(origin.requests().is_empty(), "nothing went upstream while offline");
    let never = "/go/example.com/never/@v/v1.0.0.info".to_string();
    let refused = get(daemon.proxy_addr(), &never).await;
    assert_eq!(refused.status, 503);
    assert_eq!(String::from_utf8_lossy(&refused.body), "pkgproxy is offline\n");
    let output = go.go("offline", &["mod", "download", "example.com/hello@v1.1.0"]);
    assert!(!output.success, "a version never seen cannot be had offline");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zip_that_does_not_match_the_checksum_database_is_not_cached() {
    let (modules, origin, sums) = upstream_with_sums().await;
    let v11 = sums.iter().find(|s| s["Version"] == "v1.1.0").unwrap();
    let wrong = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    modules.add_lookup("sum.golang.org", "example.com/hello", "v1.1.0", wrong, v11["GoModSum"].as_str().unwrap());
    let daemon = daemon_for(&origin).await;
    let zip = "/go/example.com/hello/@v/v1.1.0.zip".to_string();
    for attempt in 1..=2 {
        let answer = get(daemon.proxy_addr(), &zip).await;
        assert_eq!(answer.status, 502, "attempt {attempt}");
        let reason = String::from_utf8_lossy(&answer.body);
        assert!(reason.contains("the checksum database says"), "the go command shows why: {reason}");
        assert_eq!(origin.count_path("/example.com/hello/@v/v1.1.0.zip"), attempt, "not cached: asked again");
    }
    assert!(daemon.log().contains("the checksum database says"), "{}", daemon.log());
    let good = "/go/example.com/hello/@v/v1.0.0.zip".to_string();
    assert_eq!(get(daemon.proxy_addr(), &good).await.status, 200, "a matching zip is served");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zip_with_entries_outside_its_module_is_not_cached() {
    let modules = GoModules::standard();
    let zip = modules.root().join(escape("example.com/hello")).join("@v/v1.0.0.zip");
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    writer.start_file("example.com/evil@v1.0.0/go.mod", zip::write::SimpleFileOptions::default()).unwrap();
    std::io::Write::write_all(&mut writer, b"module example.com/evil\n").unwrap();
    std::fs::write(&zip, writer.finish().unwrap().into_inner()).unwrap();
    let origin = Origin::serve(modules.root()).await;
    let config = format!("[go]\nproxies = [\"{}\"]\nsumdb = \"off\"\n", origin.url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let url = "/go/example.com/hello/@v/v1.0.0.zip".to_string();
    let answer = get(daemon.proxy_addr(), &url).await;
    assert_eq!(answer.status, 502, "a zip outside its module is refused");
    assert!(daemon.log().contains("is not under example.com/hello@v1.0.0/"), "{}", daemon.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn pkgproxyctl_setup_go_prints_the_environment() {
    let origin = Origin::serve(GoModules::standard().root()).await;
    let daemon = daemon_for(&origin).await;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["setup", "go", "-stats-socket-path"])
        .arg(daemon.stats_socket())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains(&format!("export GOPROXY={}\n", goproxy(&daemon))), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_checksum_database_is_proxied_and_its_records_cached() {
    let (_modules, origin, sums) = upstream_with_sums().await;
    let daemon = daemon_for(&origin).await;
    let supported = get(daemon.proxy_addr(), "/go/sumdb/sum.golang.org/supported").await;
    assert_eq!(supported.status, 200, "go then asks its sumdb questions through pkgproxy");
    let lookup = "/go/sumdb/sum.golang.org/lookup/example.com/!hello!caps@v0.1.0";
    let first = get(daemon.proxy_addr(), lookup).await;
    assert_eq!(first.status, 200);
    let caps = sums.iter().find(|s| s["Path"] == "example.com/HelloCaps").unwrap();
    assert!(String::from_utf8_lossy(&first.body).contains(caps["Sum"].as_str().unwrap()));
    let second = get(daemon.proxy_addr(), lookup).await;
    assert_eq!((second.header("x-pkgproxy-cache"), second.body.clone()), (Some("hit"), first.body));
    assert_eq!(get(daemon.proxy_addr(), "/go/sumdb/sum.example.org/supported").await.status, 404, "another database");
    let bad = get(daemon.proxy_addr(), "/go/example.com/Hello/@v/list").await;
    assert_eq!(bad.status, 400, "capitals must be case-encoded");
    assert!(String::from_utf8_lossy(&bad.body).contains("not a valid module path"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_without_the_checksum_database_is_asked_once_not_per_version() {
    let modules = GoModules::standard();
    let origin = Origin::serve(modules.root()).await;
    let daemon = daemon_for(&origin).await;
    let go = GoSandbox::new(&goproxy(&daemon));
    go.go("plain", &["mod", "download", "example.com/hello@v1.0.0", "example.com/hello@v1.1.0"]).assert_success();
    go.go("plain", &["mod", "download", "example.com/HelloCaps@v0.1.0"]).assert_success();
    assert_eq!(origin.count_path("/sumdb/sum.golang.org/supported"), 1, "the 404 is remembered");
    assert_eq!(origin.count_path("/lookup/"), 0, "no lookup asked of an upstream without the database");
    assert_eq!(origin.count_path(".zip"), 3);
}

/// The sums of the standard tree as the real go command computes them.
fn module_sums(sums: &[Value]) -> Vec<pkgproxy_testkit::sumdb::ModuleSums> {
    let text = |sum: &Value, key: &str| sum[key].as_str().unwrap().to_string();
    sums.iter()
        .map(|s| pkgproxy_testkit::sumdb::ModuleSums {
            path: text(s, "Path"),
            version: text(s, "Version"),
            zip: text(s, "Sum"),
            gomod: text(s, "GoModSum"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn go_verifies_sums_against_a_signed_checksum_database_through_pkgproxy() {
    let (modules, origin, sums) = upstream_with_sums().await;
    let name = "sum.test.example";
    let key = pkgproxy_testkit::sumdb::write_signed(modules.root(), name, &module_sums(&sums));
    let config = format!("[go]\nproxies = [\"{}\"]\nsumdb = \"{name}\"\n", origin.url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;

    let go = GoSandbox::verifying(&goproxy(&daemon), &key);
    go.go("verified", &["mod", "download"]).assert_success();
    go.go("verified", &["build", "-o", "app", "."]).assert_success();
    let go_sum = std::fs::read_to_string(go.app().join("go.sum")).unwrap();
    let caps = sums.iter().find(|s| s["Path"] == "example.com/HelloCaps").unwrap();
    assert!(go_sum.contains(caps["Sum"].as_str().unwrap()), "{go_sum}");
    let paths: Vec<String> = origin.requests().iter().map(|r| r.path.clone()).collect();
    assert!(paths.iter().any(|p| p.starts_with(&format!("/sumdb/{name}/tile/"))), "go read the tree: {paths:#?}");

    // A database signed by another key: the go command refuses it, though
    // pkgproxy passes its records on (the signature is the client's to check).
    let elsewhere = tempfile::tempdir().unwrap();
    let other_key = pkgproxy_testkit::sumdb::write_signed(elsewhere.path(), name, &module_sums(&sums));
    let fooled = GoSandbox::verifying(&goproxy(&daemon), &other_key);
    let output = fooled.go("fooled", &["mod", "download"]);
    assert!(!output.success, "go accepted a tree signed by another key:\n{}", output.stderr);
    assert!(output.stderr.contains("verif"), "{}", output.stderr);
}

/// A module proxy that sends its clients elsewhere for the files (its
/// storage): pkgproxy follows the redirect itself, a relative one against
/// the proxy, and caches what it finds, so the go command is served also
/// offline.
#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_proxy_s_redirects_are_followed_by_pkgproxy_and_what_they_lead_to_is_cached() {
    let (_modules, origin, _) = upstream_with_sums().await;
    origin.set_redirect(Some(("/moved/", "/")));
    let config = format!("[go]\nproxies = [\"{}/moved\"]\nsumdb = \"off\"\n", origin.url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let go = GoSandbox::new(&goproxy(&daemon));
    go.go("redirected", &["mod", "download", "example.com/hello@v1.0.0"]).assert_success();
    let paths: Vec<String> = origin.requests().iter().map(|r| r.path.clone()).collect();
    assert!(paths.contains(&"/moved/example.com/hello/@v/v1.0.0.zip".to_string()), "{paths:#?}");
    assert!(paths.contains(&"/example.com/hello/@v/v1.0.0.zip".to_string()), "followed by pkgproxy: {paths:#?}");

    daemon.set_offline_mode("offline").await;
    go.go("offline", &["mod", "download", "example.com/hello@v1.0.0"]).assert_success();
}
