//! Offline mode and store-overloaded breakers through the real daemon:
//! switching over the admin socket, the real apt-get offline, refusals,
//! persistence with a fake `snapctl`, and the start-up flags.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::common::{archive, origin_and_daemon, origin_and_revalidating_daemon, PKGPROXY};
use pkgproxy_metrics::UpstreamCounter;
use pkgproxy_testkit::client::{first_status, proxy_get, raw_exchange};
use pkgproxy_testkit::{AptRepo, AptSandbox, Daemon, Origin, RefusingPort};

#[tokio::test(flavor = "multi_thread")]
async fn offline_apt_gets_everything_cached_and_nothing_reaches_the_origin() {
    let (repo, origin, daemon) = origin_and_daemon().await;
    let source = format!("{}/debian", origin.url());
    let warm = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    warm.update().assert_success();
    warm.download(&["pkgproxy-hello", "pkgproxy-big"]).assert_success();

    let answer = daemon.set_offline_mode("offline").await;
    assert_eq!(answer.mode, "offline");
    origin.clear_requests();
    let connections = origin.connections();
    let sent_before = daemon.info().await.upstream;

    let fresh = AptSandbox::new(Some(&daemon.proxy_url()), &source, repo.keyring());
    fresh.update().assert_success();
    fresh.download(&["pkgproxy-hello", "pkgproxy-big"]).assert_success();
    assert_eq!(
        std::fs::read(fresh.downloaded("pkgproxy-big")).unwrap(),
        std::fs::read(repo.deb_path("pkgproxy-big")).unwrap()
    );

    // Never seen: refused with the offline answer, no Retry-After.
    let uncached =
        proxy_get(daemon.proxy_addr(), &format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-small1")), &[]).await;
    assert_eq!(uncached.status, 503);
    assert_eq!(uncached.body, "pkgproxy is offline\n");
    assert!(uncached.header("retry-after").is_none());
    fresh.download(&["pkgproxy-small1"]).assert_failure();

    // A tunnel is refused the same way.
    let connect = raw_exchange(
        daemon.proxy_addr(),
        b"CONNECT deb.debian.org:443 HTTP/1.1\r\nHost: deb.debian.org:443\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(first_status(&connect), 503, "{}", String::from_utf8_lossy(&connect));
    assert!(String::from_utf8_lossy(&connect).contains("pkgproxy is offline"));

    // A public mirror name: refused before any name is resolved.
    let public =
        proxy_get(daemon.proxy_addr(), "http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb", &[])
            .await;
    assert_eq!(public.status, 503);
    let sent_after = daemon.info().await.upstream;
    for (counter, what) in [
        (UpstreamCounter::Requests, "the transport sent nothing offline"),
        (UpstreamCounter::Connections, "nothing connected offline"),
    ] {
        assert_eq!(sent_after.get(counter), sent_before.get(counter), "{what}");
    }

    assert_eq!(origin.requests().len(), 0, "nothing may reach the origin offline: {:?}", origin.requests());
    assert_eq!(origin.connections(), connections);
    let info = daemon.info().await;
    assert_eq!(info.offline.mode, "offline");

    // Back online, the uncached package is fetched.
    daemon.set_offline_mode("never").await;
    fresh.download(&["pkgproxy-small1"]).assert_success();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overloaded_upstream_is_left_alone_and_a_mode_change_forgets_it() {
    let (repo, origin, daemon) = origin_and_revalidating_daemon().await;
    daemon.set_offline_mode("store-overloaded").await;
    let hello = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    let small = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-small1"));
    let release = format!("{}/debian/dists/testing/InRelease", origin.url());
    assert_eq!(proxy_get(daemon.proxy_addr(), &release, &[]).await.status, 200);

    // The store answers 429 with Retry-After: the breaker opens at once.
    origin.set_status_override(&repo.deb_url_path("pkgproxy-hello"), Some(429));
    origin.set_retry_after(Some("120"));
    let overloaded = proxy_get(daemon.proxy_addr(), &hello, &[]).await;
    assert_eq!(overloaded.status, 429, "the store's own answer is passed on");
    let before = origin.requests().len();

    // Another file of the same host: refused without reaching it.
    let refused = proxy_get(daemon.proxy_addr(), &small, &[]).await;
    assert_eq!(refused.status, 503);
    let left: u64 = refused.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=120).contains(&left), "{left}");
    assert_eq!(origin.requests().len(), before, "the open breaker sent nothing");

    // What the cache holds is served, stale when its revalidation was refused.
    let stale = proxy_get(daemon.proxy_addr(), &release, &[("cache-control", "max-age=0")]).await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.header("x-pkgproxy-cache"), Some("stale"));

    let (_, report) = daemon.admin("GET", "/pkgproxy/v1/offline", None).await;
    assert_eq!(report["upstreams"][0]["host"], "127.0.0.1", "{report}");
    assert_eq!(report["upstreams"][0]["state"], "open", "{report}");
    assert_eq!(daemon.info().await.offline.upstreams[0].host, "127.0.0.1");

    // Setting the mode again forgets the breakers: the host is asked at once.
    origin.set_status_override(&repo.deb_url_path("pkgproxy-hello"), None);
    let report = daemon.set_offline_mode("store-overloaded").await;
    assert_eq!(report.upstreams.len(), 0);
    assert_eq!(proxy_get(daemon.proxy_addr(), &small, &[]).await.status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_502_for_a_host_whose_breaker_is_closed_stays_a_502() {
    let refusing = RefusingPort::new();
    let port = refusing.port();
    let config = archive("gone", &[format!("http://127.0.0.1:{port}/debian")]);
    let daemon = Daemon::start_with(PKGPROXY, Some(&config), &["-offline-mode", "store-overloaded"]).await;
    let url = format!("http://127.0.0.1:{port}/debian/pool/main/a.deb");
    // Three failed dials open the breaker; the first three are plain 502s.
    for _ in 0..3 {
        assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 502);
    }
    let refused = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert_eq!(refused.status, 503);
    assert!(refused.header("retry-after").is_some());
}

/// A fake `snapctl` that records its arguments, failing when told to.
fn fake_snapctl(dir: &std::path::Path, fail: bool) -> String {
    let script = dir.join("snapctl");
    let log = dir.join("snapctl.log");
    let body = if fail {
        "echo 'error: cannot reach snapd' >&2\nexit 1\n".to_string()
    } else {
        format!("echo \"$@\" >> {}\n", log.display())
    };
    std::fs::write(&script, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread")]
async fn inside_pkgproxy_s_snap_a_switch_is_saved_with_snapctl() {
    let bin = tempfile::tempdir().unwrap();
    let path = fake_snapctl(bin.path(), false);
    let env = [("SNAP_NAME", "pkgproxy"), ("PATH", path.as_str())];
    let daemon = Daemon::start_with_env(PKGPROXY, None, &[], &env).await;
    let answer = daemon.set_offline_mode("offline").await;
    assert!(answer.persistent);
    assert_eq!(answer.restart_mode, "offline");
    assert!(answer.persist_error.is_none(), "{answer:?}");
    daemon.set_offline_mode("never").await;
    let log = std::fs::read_to_string(bin.path().join("snapctl.log")).unwrap();
    assert_eq!(log, "set offline-mode=offline\nset offline-mode=never\n", "never is written too");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_save_is_reported_and_the_mode_applies_anyway() {
    let bin = tempfile::tempdir().unwrap();
    let path = fake_snapctl(bin.path(), true);
    let env = [("SNAP_NAME", "pkgproxy"), ("PATH", path.as_str())];
    let daemon = Daemon::start_with_env(PKGPROXY, None, &[], &env).await;
    let ctl = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["offline", "offline", "--admin-socket-path"])
        .arg(daemon.admin_socket())
        .output()
        .unwrap();
    assert_eq!(ctl.status.code(), Some(1), "pkgproxyctl exits 1 when the mode was not saved");
    let stderr = String::from_utf8_lossy(&ctl.stderr);
    assert!(stderr.contains("cannot reach snapd"), "{stderr}");
    assert_eq!(daemon.info().await.offline.mode, "offline");
}

#[tokio::test(flavor = "multi_thread")]
async fn outside_the_snap_pkgproxyctl_says_nothing_keeps_the_switch() {
    let daemon = Daemon::start(PKGPROXY, None).await;
    let ctl = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["offline", "store-overloaded", "-admin-socket-path"])
        .arg(daemon.admin_socket())
        .output()
        .unwrap();
    assert!(ctl.status.success());
    let out = String::from_utf8_lossy(&ctl.stdout);
    assert!(out.contains("offline mode: store-overloaded"), "{out}");
    assert!(out.contains("nothing keeps a run-time switch"), "{out}");
    let (status, _) = daemon.admin("PUT", "/pkgproxy/v1/offline", Some("{\"mode\": \"sideways\"}")).await;
    assert_eq!(status, 400);
    let body = Some(bytes::Bytes::from_static(b"{\"mode\": \"never\"}"));
    let (status, _) = daemon.stats().send(http::Method::PUT, "/pkgproxy/v1/offline", body).await.unwrap();
    assert_eq!(status, 403, "the stats socket is read-only");
}

/// Going back online is said one way: the word `offline` takes is the
/// word `offline` and `info` print, and the message names the flag as
/// the help spells it.
#[tokio::test(flavor = "multi_thread")]
async fn back_online_pkgproxyctl_says_online_the_word_it_takes() {
    let daemon = Daemon::start(PKGPROXY, None).await;
    let ctl = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
            .args(args)
            .arg("--admin-socket-path")
            .arg(daemon.admin_socket())
            .arg("--stats-socket-path")
            .arg(daemon.stats_socket())
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(ctl(&["offline", "offline"]).contains("offline mode: offline"));
    let back = ctl(&["offline", "online"]);
    assert!(back.starts_with("offline mode: online\n"), "{back}");
    assert!(back.contains("after a restart: online (") && back.contains("set --offline-mode to keep one"), "{back}");
    assert!(ctl(&["offline"]).starts_with("offline mode: online\n"));
    assert!(ctl(&["info"]).contains("\noffline mode: online\n"));
    assert_eq!(daemon.info().await.offline.mode, "never", "the wire keeps the original's name");
    // The original's word is still taken.
    ctl(&["offline", "offline"]);
    assert!(ctl(&["offline", "never"]).starts_with("offline mode: online\n"));
}

#[test]
fn offline_flags_that_disagree_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = std::process::Command::new(PKGPROXY);
        command
            .args(["-addr", "127.0.0.1:0", "-cache-dir"])
            .arg(dir.path().join("c"))
            .arg("-stats-socket-path")
            .arg(dir.path().join("s.sock"))
            .arg("-admin-socket-path")
            .arg(dir.path().join("a.sock"))
            .args(args)
            .env_remove("PKGPROXY_OFFLINE")
            .env_remove("PKGPROXY_OFFLINE_MODE")
            .envs(env.iter().copied());
        command.output().unwrap()
    };
    let both = run(&["-offline", "-offline-mode", "store-overloaded"], &[]);
    assert!(!both.status.success());
    let err = String::from_utf8_lossy(&both.stderr);
    assert!(err.contains("-offline-mode") && err.contains("-offline "), "{err}");
    let env = run(&["-offline-mode", "never"], &[("PKGPROXY_OFFLINE", "1")]);
    assert!(!env.status.success());
    let err = String::from_utf8_lossy(&env.stderr);
    assert!(err.contains("PKGPROXY_OFFLINE") && err.contains("-offline-mode"), "{err}");
    let bad = run(&["-offline-mode", "sometimes"], &[]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("-offline-mode"));
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_from_the_start_serves_what_a_previous_run_cached() {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let config = archive("local", &[format!("{}/debian", origin.url())]);
    let mut daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let url = format!("{}{}", origin.url(), repo.deb_url_path("pkgproxy-hello"));
    assert_eq!(proxy_get(daemon.proxy_addr(), &url, &[]).await.status, 200);
    daemon.restart_with(&["-offline"]).await;
    origin.clear_requests();
    let hit = proxy_get(daemon.proxy_addr(), &url, &[]).await;
    assert_eq!(hit.status, 200);
    assert_eq!(origin.requests().len(), 0);
    assert_eq!(daemon.info().await.offline.mode, "offline");
    let report = daemon.admin_client().offline().await.unwrap();
    assert_eq!(report.restart_mode, "offline");
    assert!(!report.persistent);
}
