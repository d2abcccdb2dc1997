//! The access log (`-access-log`): one JSON line per request, written once
//! its answer was sent, saying how the cache served it.

use serde_json::Value;

use crate::common::{archive, revalidating_at_once, PKGPROXY};
use pkgproxy_testkit::client::{get, proxy_fetch, proxy_get};
use pkgproxy_testkit::{AptRepo, Daemon, Origin};

/// The log's lines so far, once there are `count` of them.
async fn lines(path: &std::path::Path, count: usize) -> Vec<Value> {
    pkgproxy_testkit::eventually("the access log's lines", || async {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect();
        (lines.len() >= count).then_some(lines)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_miss_a_hit_a_revalidation_and_a_refusal_each_have_their_line() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let config = revalidating_at_once(&archive("local", &[format!("{}/debian", origin.url())]));
    let daemon = Daemon::start_with(PKGPROXY, Some(&config), &["-access-log", log.to_str().unwrap()]).await;
    let proxy = daemon.proxy_addr();

    let deb = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    let size = std::fs::metadata(repo.deb_path("pkgproxy-hello")).unwrap().len();
    assert_eq!(proxy_get(proxy, &deb, &[]).await.header("x-pkgproxy-cache"), Some("miss"));
    assert_eq!(proxy_get(proxy, &deb, &[]).await.header("x-pkgproxy-cache"), Some("hit"));
    let release = format!("{}/debian/dists/testing/InRelease", origin.url());
    assert_eq!(proxy_get(proxy, &release, &[]).await.status, 200);
    let revalidated = proxy_get(proxy, &release, &[("cache-control", "max-age=0")]).await;
    assert_eq!(revalidated.header("x-pkgproxy-cache"), Some("revalidated"));
    assert_eq!(proxy_fetch(proxy, "POST", &deb, &[]).await.status, 405);
    assert_eq!(get(proxy, "/").await.status, 200);

    let lines = lines(&log, 6).await;
    assert_eq!(lines.len(), 6, "one line per request: {lines:#?}");
    let cache: Vec<&str> = lines.iter().map(|line| line["cache"].as_str().unwrap()).collect();
    assert_eq!(cache, ["miss", "hit", "miss", "revalidated", "refused", "local"]);
    let instance = format!("{}/debian", origin.url());
    for (line, upstream) in lines.iter().zip([Some(&instance), None, Some(&instance), Some(&instance), None, None]) {
        for key in ["time", "client", "method", "side", "uri", "cache", "status", "bytes", "duration_ms", "upstream"] {
            assert!(line.get(key).is_some(), "{key} in {line}");
        }
        assert_eq!(line["client"], "127.0.0.1");
        assert_eq!(line["upstream"].as_str(), upstream.map(String::as_str), "{line}");
        assert!(line["duration_ms"].as_f64().unwrap() >= 0.0);
        humantime::parse_rfc3339(line["time"].as_str().unwrap()).expect("an RFC 3339 time");
    }
    let (miss, hit) = (&lines[0], &lines[1]);
    assert_eq!(
        (miss["method"].as_str(), miss["side"].as_str(), miss["uri"].as_str()),
        (Some("GET"), Some("apt"), Some(deb.as_str()))
    );
    assert_eq!((miss["status"].as_u64(), miss["bytes"].as_u64()), (Some(200), Some(size)), "the whole body was sent");
    assert_eq!((hit["status"].as_u64(), hit["bytes"].as_u64()), (Some(200), Some(size)));
    assert_eq!((lines[4]["method"].as_str(), lines[4]["status"].as_u64()), (Some("POST"), Some(405)));
    assert_eq!((lines[5]["side"].as_str(), lines[5]["uri"].as_str()), (None, Some("/")));
    let written = daemon.info().await.access_log.get(pkgproxy_metrics::AccessLogCounter::Written);
    assert_eq!(written, 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dash_writes_the_lines_to_stderr_and_an_unwritable_path_stops_the_start() {
    let daemon = Daemon::start_with(PKGPROXY, None, &["-access-log", "-"]).await;
    assert_eq!(get(daemon.proxy_addr(), "/nothing-here").await.status, 404);
    pkgproxy_testkit::eventually("the line on stderr", || async {
        daemon
            .log()
            .lines()
            .any(|line| line.starts_with('{') && line.contains("\"uri\":\"/nothing-here\""))
            .then_some(())
    })
    .await;

    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(PKGPROXY)
        .args(["-addr", "127.0.0.1:0", "-auto-offline", "off", "-access-log", "/nonexistent/dir/access.log"])
        .env("PKGPROXY_CACHE_DIR", dir.path().join("cache"))
        .env("PKGPROXY_STATS_SOCKET_PATH", dir.path().join("stats.sock"))
        .env("PKGPROXY_ADMIN_SOCKET_PATH", dir.path().join("admin.sock"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("cannot open the access log /nonexistent/dir/access.log"), "{said}");
}
