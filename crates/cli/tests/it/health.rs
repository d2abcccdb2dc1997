//! The listener's health answer for a load balancer, and `/metrics` on it
//! when asked for: `200` when pkgproxy can serve (offline too, saying so),
//! `503` with the reason when it cannot write its cache.

use pkgproxy_testkit::client::get;
use pkgproxy_testkit::Daemon;

use crate::common::PKGPROXY;

/// The health answer: its status and JSON.
async fn health(daemon: &Daemon) -> (u16, serde_json::Value) {
    let answer = get(daemon.proxy_addr(), pkgproxy_control::HEALTH_PATH).await;
    (answer.status, serde_json::from_slice(&answer.body).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread")]
async fn health_is_ok_online_and_offline_and_unavailable_with_a_reason_when_the_cache_cannot_be_written() {
    let daemon = Daemon::start(PKGPROXY, None).await;
    let (status, json) = health(&daemon).await;
    assert_eq!((status, json["status"].as_str(), json["offline_mode"].as_str()), (200, Some("ok"), Some("never")));

    daemon.set_offline_mode("offline").await;
    let (status, json) = health(&daemon).await;
    assert_eq!((status, json["offline_mode"].as_str()), (200, Some("offline")), "it serves what it holds");

    // The folder downloads are written in is not a folder any more.
    let tmp = daemon.cache_dir().join("tmp");
    std::fs::remove_dir_all(&tmp).unwrap();
    std::fs::write(&tmp, b"not a folder").unwrap();
    let (status, json) = health(&daemon).await;
    assert_eq!((status, json["status"].as_str()), (503, Some("unavailable")), "{json}");
    assert!(json["reason"].as_str().is_some_and(|reason| reason.contains("cache folder")), "{json}");
    std::fs::remove_file(&tmp).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    assert_eq!(health(&daemon).await.0, 200, "mended");
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_on_the_listener_only_when_the_configuration_says_so() {
    let off = Daemon::start(PKGPROXY, None).await;
    assert_ne!(get(off.proxy_addr(), "/metrics").await.status, 200);
    let on = Daemon::start(PKGPROXY, Some("[status]\nmetrics = true\n")).await;
    let metrics = get(on.proxy_addr(), "/metrics").await;
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8_lossy(&metrics.body);
    let names =
        |text: &str| -> Vec<String> { text.lines().filter(|l| l.starts_with("# HELP")).map(str::to_owned).collect() };
    assert!(text.contains("pkgproxy_requests_total{side=\"apt\"}"), "{text}");
    assert_eq!(names(&text), names(&on.metrics().await), "what the stats socket says");
}
