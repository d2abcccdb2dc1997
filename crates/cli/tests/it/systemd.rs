//! pkgproxy under systemd, as systemd would run it: readiness and stop
//! notices on a notify socket the test binds (`Type=notify`), and a
//! listening socket passed as fd 3 (socket activation).

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::PKGPROXY;
use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{eventually, Daemon};

/// The next notice on `socket`, waiting at most ten seconds.
fn notice(socket: &UnixDatagram) -> String {
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0; 4096];
    let n = socket.recv(&mut buf).expect("a notice within ten seconds");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn ready_is_told_once_serving_and_stopping_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let mut daemon = Daemon::start_with_env(PKGPROXY, None, &[], &[("NOTIFY_SOCKET", path.to_str().unwrap())]).await;
    let ready = notice(&socket);
    assert!(ready.lines().any(|line| line == "READY=1"), "{ready}");
    let status = ready.lines().find_map(|line| line.strip_prefix("STATUS=")).expect("a status line");
    assert!(status.contains(&format!("serving on {}", daemon.proxy_addr())), "{status}");
    assert_eq!(send(daemon.proxy_addr(), "GET", "/", &[], b"").await.status, 200, "the listener answers");

    daemon.stop();
    let stopping = notice(&socket);
    assert!(stopping.lines().any(|line| line == "STOPPING=1"), "{stopping}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listening_socket_passed_as_fd_3_is_served_and_no_address_is_bound() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let fd = listener.as_raw_fd();
    let mut command = Command::new("sh");
    // LISTEN_PID is the shell's own pid, which exec keeps.
    command
        .args(["-c", "LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=proxy exec \"$0\" \"$@\""])
        .arg(PKGPROXY)
        .arg("-cache-dir")
        .arg(dir.path().join("cache"))
        .arg("-stats-socket-path")
        .arg(dir.path().join("stats.sock"))
        .arg("-admin-socket-path")
        .arg(dir.path().join("admin.sock"))
        .args(["-log-level", "info", "-auto-offline", "off"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("log")).unwrap());
    // SAFETY: only dup2 and fcntl, which are async-signal-safe, between
    // fork and exec.
    unsafe {
        command.pre_exec(move || {
            if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0);
            } else if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    drop(listener);
    eventually("the passed socket to be served", || async {
        let answer = tokio::time::timeout(Duration::from_secs(1), send(&addr, "GET", "/", &[], b"")).await.ok()?;
        (answer.status == 200 && String::from_utf8_lossy(&answer.body).contains("pkgproxy")).then_some(())
    })
    .await;
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(log.contains("socket systemd passed"), "{log}");
    assert!(log.contains(&format!("listen={addr}")), "{log}");
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert!(child.wait().unwrap().success(), "a clean stop");
}

/// `systemd-analyze ARGS` in `dir`, where it is installed.
fn systemd_analyze(dir: &std::path::Path, args: &[&str]) -> Option<std::process::Output> {
    Command::new("systemd-analyze").args(args).current_dir(dir).output().ok()
}

#[test]
fn the_units_pass_systemd_analyze_verify_and_expose_little() {
    let units = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/systemd");
    let dir = tempfile::tempdir().unwrap();
    for unit in ["pkgproxy.service", "pkgproxy.socket"] {
        let text = std::fs::read_to_string(units.join(unit)).unwrap();
        // The binary as built here stands for the installed one.
        let text = text.replace("ExecStart=/usr/bin/pkgproxy", &format!("ExecStart={PKGPROXY}"));
        std::fs::write(dir.path().join(unit), text).unwrap();
    }
    let Some(verified) = systemd_analyze(dir.path(), &["verify", "--man=no", "pkgproxy.service", "pkgproxy.socket"])
    else {
        eprintln!("SKIPPED: systemd-analyze is not installed");
        return;
    };
    let said = String::from_utf8_lossy(&verified.stderr).into_owned() + &String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success() && said.trim().is_empty(), "{said}");

    let security = systemd_analyze(dir.path(), &["security", "--offline=yes", "pkgproxy.service"]).unwrap();
    let report = String::from_utf8_lossy(&security.stdout).into_owned();
    let level = report
        .lines()
        .find_map(|line| line.split("Overall exposure level for pkgproxy.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|level| level.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}"));
    assert!(level <= 2.0, "exposure {level}, more than a network daemon writing only its cache needs:\n{report}");
}
