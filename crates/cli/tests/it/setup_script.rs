//! `pkgproxyctl setup CLIENT -addr HOST:PORT | sh`, as the original's
//! GitHub Action and its users' scripts run it: no running daemon is
//! needed, the script writes the client's setting (under
//! `PKGPROXY_SETUP_ROOT` here, standing for `/`), and running it twice
//! changes nothing. The clients then read it: apt-config and go.

use std::path::Path;
use std::process::{Command, Stdio};

/// The script `pkgproxyctl setup CLIENT -addr ADDR` prints, with no
/// daemon to ask (the sockets named do not exist).
fn script(client: &str, addr: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["setup", client, "-addr", addr])
        .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{client}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Pipes `script` to `sh` with `root` standing for `/`.
fn run(script: &str, root: &Path) {
    use std::io::Write;
    let mut sh = Command::new("sh").env("PKGPROXY_SETUP_ROOT", root).stdin(Stdio::piped()).spawn().unwrap();
    sh.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    assert!(sh.wait().unwrap().success(), "{script}");
}

/// Every file under `root`, with its content.
fn tree(root: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            match entry.file_type().unwrap().is_dir() {
                true => dirs.push(entry.path()),
                false => {
                    files.push((entry.path().display().to_string(), std::fs::read_to_string(entry.path()).unwrap()))
                }
            }
        }
    }
    files.sort();
    files
}

#[test]
fn each_client_s_script_writes_its_setting_once_with_no_daemon() {
    for (client, path, expected) in [
        ("apt", "etc/apt/apt.conf.d/01pkgproxy", "Acquire::http::Proxy \"http://10.0.0.5:3142/\";"),
        ("go", "etc/profile.d/pkgproxy-go.sh", "export GOPROXY=http://10.0.0.5:3142/go"),
        ("snap", "etc/systemd/system/snapd.service.d/pkgproxy.conf", "SNAPPY_FORCE_API_URL=http://10.0.0.5:3142/snap/"),
        ("containerd", "etc/containerd/certs.d/_default/hosts.toml", "[host.\"http://10.0.0.5:3142\"]"),
        ("podman", "etc/containers/registries.conf.d/50-pkgproxy.conf", "location = \"10.0.0.5:3142\""),
        ("k3s", "etc/rancher/k3s/registries.yaml", "- \"http://10.0.0.5:3142\""),
    ] {
        let text = script(client, "10.0.0.5:3142");
        assert!(text.starts_with("#!/bin/sh\n#"), "a commented script: {text}");
        let root = tempfile::tempdir().unwrap();
        run(&text, root.path());
        let written = std::fs::read_to_string(root.path().join(path)).unwrap_or_else(|e| panic!("{client}: {e}"));
        assert!(written.contains(expected), "{client}: {written}");
        let once = tree(root.path());
        run(&text, root.path());
        assert_eq!(tree(root.path()), once, "{client}: a second run changes nothing");
    }
}

#[test]
fn apt_and_go_read_what_the_scripts_write() {
    let root = tempfile::tempdir().unwrap();
    run(&script("apt", "127.0.0.1:3142"), root.path());
    // apt reads its parts folder before any -o: an APT_CONFIG file names it.
    let parts = root.path().join("etc/apt/apt.conf.d");
    let config = root.path().join("apt.conf");
    std::fs::write(&config, format!("Dir::Etc::parts \"{}\";\n", parts.display())).unwrap();
    let dumped =
        Command::new("apt-config").env("APT_CONFIG", &config).args(["dump", "Acquire::http::Proxy"]).output().unwrap();
    let dumped = String::from_utf8_lossy(&dumped.stdout);
    assert!(dumped.contains("Acquire::http::Proxy \"http://127.0.0.1:3142/\";"), "{dumped}");

    run(&script("go", "127.0.0.1:3142"), root.path());
    let profile = root.path().join("etc/profile.d/pkgproxy-go.sh");
    let go = Command::new("sh")
        .arg("-c")
        .arg(format!(". {} && go env GOPROXY", profile.display()))
        .env_remove("GOPROXY")
        .env("GOENV", "off")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&go.stdout).trim(), "http://127.0.0.1:3142/go");
}

#[test]
fn a_wrong_addr_is_refused_and_nothing_is_printed() {
    for addr in ["10.0.0.5", "10.0.0.5:0", ":3142", "a;b:3142", "$(reboot):3142", "[::1:3142", "x/y:3142"] {
        let output =
            Command::new(env!("CARGO_BIN_EXE_pkgproxyctl")).args(["setup", "apt", "-addr", addr]).output().unwrap();
        assert!(!output.status.success() && output.stdout.is_empty(), "{addr}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("-addr"), "{addr}");
    }
}
