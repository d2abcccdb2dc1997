//! `pkgproxyctl setup --apply` and `--undo` on the real root, as an admin
//! (or configuration management, every half hour) runs them: in a mount
//! namespace of the test's own, an empty `/etc` in memory and a
//! `systemctl` that only records what it is asked. A service is restarted
//! when its file changed, and only if it runs; running the same setup
//! again restarts nothing. Making a mount namespace needs root: the test
//! is ignored by default, and `test.sh` runs it as root.

use std::process::Command;

/// A `systemctl` that records its arguments in `$SYSTEMCTL_LOG` and says
/// the units in `$ACTIVE` run.
const FAKE_SYSTEMCTL: &str = r#"#!/bin/sh
echo "$*" >> "$SYSTEMCTL_LOG"
if [ "$1" = is-active ]; then
  for unit in $ACTIVE; do
    if [ "$unit" = "$3" ]; then exit 0; fi
  done
  exit 3
fi
exit 0
"#;

/// Each step: what it runs (`ctl` standing for pkgproxyctl), under a name.
const STEPS: [(&str, &str); 12] = [
    ("snap applied", "$ctl setup snap -addr 10.0.0.5:3142 --apply"),
    ("snap applied again", "$ctl setup snap -addr 10.0.0.5:3142 --apply"),
    ("snap script", "$ctl setup snap -addr 10.0.0.5:3142 | sh"),
    ("k3s applied", "$ctl setup k3s -addr 10.0.0.5:3142 --apply"),
    ("rke2 applied", "$ctl setup rke2 -addr 10.0.0.5:3142 --apply"),
    ("docker applied", "$ctl setup docker -addr 10.0.0.5:3142 --apply"),
    ("docker applied again", "$ctl setup docker -addr 10.0.0.5:3142 --apply"),
    ("docker undone", "$ctl setup docker -addr 10.0.0.5:3142 --undo"),
    ("docker undone again", "$ctl setup docker -addr 10.0.0.5:3142 --undo"),
    ("snap undone", "$ctl setup snap -addr 10.0.0.5:3142 --undo"),
    ("snap undone again", "$ctl setup snap -addr 10.0.0.5:3142 --undo"),
    ("k3s script after undo", "$ctl setup k3s -addr 10.0.0.5:3142 --undo && $ctl setup k3s -addr 10.0.0.5:3142 | sh"),
];

#[test]
#[ignore = "needs root to make a mount namespace; test.sh runs it as root"]
fn a_service_is_restarted_when_its_file_changed_and_only_if_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let systemctl = bin.join("systemctl");
    std::fs::write(&systemctl, FAKE_SYSTEMCTL).unwrap();
    std::fs::set_permissions(&systemctl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let log = dir.path().join("systemctl.log");
    let mut driver = String::from(
        "set -eu\ncp /etc/ld.so.cache \"$DIR/ld.so.cache\" 2>/dev/null || true\nmount -t tmpfs tmpfs /etc\n\
         cp \"$DIR/ld.so.cache\" /etc/ 2>/dev/null || true\n",
    );
    for (name, step) in STEPS {
        driver.push_str(&format!("echo '== {name}' >> \"$SYSTEMCTL_LOG\"\n{step} >> \"$DIR/said\" 2>&1\n"));
    }
    driver.push_str("test ! -e /etc/docker/daemon.json || cat /etc/docker/daemon.json >> \"$DIR/said\"\n");
    let ran = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &driver])
        .env("DIR", dir.path())
        .env("ctl", env!("CARGO_BIN_EXE_pkgproxyctl"))
        .env("SYSTEMCTL_LOG", &log)
        .env("ACTIVE", "snapd.service k3s-agent.service docker.service")
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()))
        .env_remove("PKGPROXY_SETUP_ROOT")
        .output()
        .unwrap();
    let said = std::fs::read_to_string(dir.path().join("said")).unwrap_or_default();
    assert!(ran.status.success(), "{}{said}", String::from_utf8_lossy(&ran.stderr));

    let log = std::fs::read_to_string(&log).unwrap();
    let mut asked: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in log.lines() {
        match line.strip_prefix("== ") {
            Some(step) => asked.push((step, Vec::new())),
            None => asked.last_mut().expect("a step first").1.push(line),
        }
    }
    let of = |step: &str| asked.iter().find(|(name, _)| *name == step).map(|(_, lines)| lines.clone()).unwrap();
    let restarted = |unit: &str| format!("try-restart {unit}");
    let snap = ["daemon-reload", "is-active --quiet snapd.service", &restarted("snapd.service")];
    assert_eq!(of("snap applied"), snap, "{said}");
    for unchanged in ["snap applied again", "snap script", "docker applied again", "docker undone again"] {
        assert!(of(unchanged).is_empty(), "{unchanged}: nothing changed, nothing restarted: {:?}", of(unchanged));
    }
    assert_eq!(of("snap undone again"), Vec::<&str>::new());
    let k3s = of("k3s applied");
    assert!(k3s.contains(&restarted("k3s-agent.service").as_str()), "the agent, which runs: {k3s:?}");
    assert!(!k3s.contains(&restarted("k3s.service").as_str()), "not the server, which does not: {k3s:?}");
    let rke2 = of("rke2 applied");
    assert!(rke2.iter().all(|line| !line.starts_with("try-restart")), "nothing of rke2 runs: {rke2:?}");
    assert!(said.contains("rke2-server.service, rke2-agent.service not running: read when it starts"), "{said}");
    for changed in ["docker applied", "docker undone"] {
        assert!(of(changed).contains(&restarted("docker.service").as_str()), "{changed}: {:?}", of(changed));
    }
    assert_eq!(of("snap undone"), snap);
    let script = of("k3s script after undo");
    assert_eq!(script.iter().filter(|line| **line == restarted("k3s-agent.service")).count(), 2, "{script:?}");
}
