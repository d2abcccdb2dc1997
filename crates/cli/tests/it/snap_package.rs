//! The snap's scripts, run as snapd would run them but with a fake
//! `snapctl` on `PATH` (building and installing a snap is out of reach
//! here): the configure hook applies `snap set pkgproxy offline-mode=...`
//! to the running daemon, and the daemon's wrapper starts it with the
//! snap's settings.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::PKGPROXY;
use pkgproxy_testkit::Daemon;

/// `$SNAP`, `$SNAP_COMMON` and a fake `snapctl` whose settings are `settings`.
struct FakeSnap {
    dir: tempfile::TempDir,
}

impl FakeSnap {
    fn new(settings: &[(&str, &str)], pkgproxy: &Path) -> FakeSnap {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["snap/bin", "common", "fakebin"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        std::os::unix::fs::symlink(pkgproxy, dir.path().join("snap/bin/pkgproxy")).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_pkgproxyctl"), dir.path().join("snap/bin/pkgproxyctl")).unwrap();
        let lines: String = settings.iter().map(|(key, value)| format!("{key}={value}\n")).collect();
        std::fs::write(dir.path().join("settings"), lines).unwrap();
        let snapctl = format!(
            "#!/bin/sh\nset -eu\nsettings={}\ncase \"$1\" in\n  get) sed -n \"s/^$2=//p\" \"$settings\" ;;\n  set) shift; for pair; do echo \"$pair\" >>\"$settings\"; done ;;\n  *) exit 1 ;;\nesac\n",
            dir.path().join("settings").display()
        );
        let fake = dir.path().join("fakebin/snapctl");
        std::fs::write(&fake, snapctl).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        FakeSnap { dir }
    }

    /// Runs the repository's `script` as snapd would, with `env` too.
    fn run(&self, script: &str, args: &[&str], env: &[(&str, &PathBuf)]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../snap").join(script);
        let path = format!("{}:{}", self.dir.path().join("fakebin").display(), std::env::var("PATH").unwrap());
        let run = || {
            Command::new(&script)
                .args(args)
                .env("PATH", &path)
                .env("SNAP", self.dir.path().join("snap"))
                .env("SNAP_COMMON", self.dir.path().join("common"))
                .env_remove("PKGPROXY_OFFLINE_MODE")
                .env_remove("PKGPROXY_AUTO_OFFLINE")
                .envs(env.iter().map(|(key, value)| (*key, value.as_os_str())))
                .output()
                .unwrap()
        };
        // A script written a moment ago may still be open for writing in a
        // child another test forked meanwhile (until it execs): executing
        // it then fails with ETXTBSY, which says nothing of the script.
        let mut output = run();
        for _ in 0..5 {
            if !String::from_utf8_lossy(&output.stderr).contains("Text file busy") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            output = run();
        }
        output
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configure_hook_applies_offline_mode_to_the_running_daemon() {
    let daemon = Daemon::start(PKGPROXY, None).await;
    let sockets = [
        ("PKGPROXY_ADMIN_SOCKET_PATH", &daemon.admin_socket()),
        ("PKGPROXY_STATS_SOCKET_PATH", &daemon.stats_socket()),
    ];
    let snap = FakeSnap::new(&[("offline-mode", "offline")], Path::new(PKGPROXY));
    let hooked = snap.run("hooks/configure", &[], &sockets);
    assert!(hooked.status.success(), "{}", String::from_utf8_lossy(&hooked.stderr));
    assert_eq!(daemon.info().await.offline.mode, "offline", "in effect");

    let wrong = FakeSnap::new(&[("offline-mode", "sometimes")], Path::new(PKGPROXY));
    let refused = wrong.run("hooks/configure", &[], &sockets);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("sometimes"), "refused, saying why: {said}");
    assert_eq!(daemon.info().await.offline.mode, "offline", "unchanged");

    // At install, before the daemon runs, there is nothing to apply.
    let gone = snap.dir.path().join("no-daemon.sock");
    let early = snap.run("hooks/configure", &[], &[("PKGPROXY_ADMIN_SOCKET_PATH", &gone)]);
    assert!(early.status.success(), "{}", String::from_utf8_lossy(&early.stderr));
}

#[test]
fn the_daemon_starts_with_the_snap_s_settings() {
    // A stand-in for the daemon that prints what it was started with.
    let dir = tempfile::tempdir().unwrap();
    let shown = dir.path().join("show");
    std::fs::write(
        &shown,
        "#!/bin/sh\necho \"mode=${PKGPROXY_OFFLINE_MODE:-} trigger=${PKGPROXY_AUTO_OFFLINE:-} args=$*\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&shown, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let snap = FakeSnap::new(&[("offline-mode", "store-overloaded"), ("auto-offline", "off")], &shown);
    let started = snap.run("local/daemon", &["-log-level", "info"], &[]);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let said = String::from_utf8_lossy(&started.stdout);
    assert_eq!(said.trim(), "mode=store-overloaded trigger=off args=-log-level info");

    let unset = FakeSnap::new(&[], &shown);
    let output = unset.run("local/daemon", &[], &[]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(said.trim(), "mode= trigger= args=", "the daemon's defaults ({}): {stderr}", output.status);
}
