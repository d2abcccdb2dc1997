//! Auto-offline against a real network namespace: the daemon runs in a
//! namespace the test makes (a veth pair, an address, a default route);
//! deleting the route puts offline mode in effect once the change has held
//! for five seconds, and restoring it brings the configured mode back.
//! Making a namespace needs root: the test is ignored by default, and
//! `test.sh` runs it when it runs as root.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::PKGPROXY;
use pkgproxy_control::OfflineReport;
use pkgproxy_testkit::{eventually, Daemon};

/// A network namespace that is deleted when dropped.
struct Namespace {
    name: String,
}

impl Namespace {
    fn create() -> Result<Namespace, String> {
        let name = format!("pkgproxy-test-{}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Namespace { name };
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        ns.exec(&["ip", "link", "add", "veth0", "type", "veth", "peer", "name", "veth1"])?;
        ns.exec(&["ip", "link", "set", "veth0", "up"])?;
        ns.exec(&["ip", "link", "set", "veth1", "up"])?;
        ns.exec(&["ip", "addr", "add", "10.231.0.2/24", "dev", "veth0"])?;
        ns.exec(&["ip", "addr", "add", "10.231.0.1/24", "dev", "veth1"])?;
        ns.route(true)?;
        Ok(ns)
    }

    fn exec(&self, args: &[&str]) -> Result<(), String> {
        let mut full = vec!["netns", "exec", &self.name];
        full.extend_from_slice(args);
        ip(&full)
    }

    fn route(&self, present: bool) -> Result<(), String> {
        let verb = if present { "add" } else { "del" };
        self.exec(&["ip", "route", verb, "default", "via", "10.231.0.1", "dev", "veth0"])
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip").args(args).output().map_err(|e| format!("cannot run ip: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim()))
    }
}

async fn wait_for_mode(daemon: &Daemon, mode: &str) -> OfflineReport {
    let report = || async { daemon.admin_client().offline().await.ok().filter(|report| report.mode == mode) };
    eventually(&format!("the mode to become {mode}"), report).await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs root to make a network namespace; test.sh runs it as root"]
async fn losing_the_default_route_of_a_real_namespace_puts_offline_mode_in_effect() {
    let ns = Namespace::create().unwrap_or_else(|why| panic!("cannot make a network namespace: {why}"));
    let wrapper = ["ip", "netns", "exec", ns.name.as_str()];
    let args = ["-auto-offline", "network", "-offline-mode", "store-overloaded"];
    let daemon = Daemon::start_wrapped(&wrapper, PKGPROXY, None, &args, &[]).await;
    let report = daemon.admin_client().offline().await.unwrap();
    assert_eq!(report.auto_offline, "network");
    assert_eq!(report.mode, "store-overloaded");

    ns.route(false).unwrap();
    let lost = Instant::now();
    let report = wait_for_mode(&daemon, "offline").await;
    assert!(lost.elapsed() >= Duration::from_secs(4), "the change must settle first");
    assert_eq!(report.configured_mode.as_deref(), Some("store-overloaded"), "{report:?}");
    assert_eq!(report.reason.as_deref(), Some("no-network"), "{report:?}");

    ns.route(true).unwrap();
    let report = wait_for_mode(&daemon, "store-overloaded").await;
    assert!(report.reason.is_none(), "{report:?}");
}
