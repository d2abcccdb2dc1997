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
    printed(&["setup", client, "-addr", addr])
}

/// The script `pkgproxyctl setup CLIENT -addr ADDR` prints on a machine
/// under `root` with `envs` set, reading the file it is for there, as
/// `pkgproxyctl setup CLIENT | sh` does (a block in a user's file is put
/// in only where it was found to fit).
fn script_on(root: &Path, envs: &[(&str, &str)], client: &str, addr: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["setup", client, "-addr", addr])
        .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
        .env("PKGPROXY_SETUP_ROOT", root)
        .env_remove("CARGO_HOME")
        .env_remove("NPM_CONFIG_USERCONFIG")
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    assert!(output.status.success(), "{client}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// The script that takes the setup back: `--undo --print`.
fn undo_script(client: &str, addr: &str) -> String {
    printed(&["setup", client, "-addr", addr, "--undo", "--print"])
}

/// What `pkgproxyctl ARGS` prints, with no daemon to ask.
fn printed(args: &[&str]) -> String {
    let client = args[1];
    let output = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(args)
        .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{client}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Pipes `script` to `sh` with `root` standing for `/`.
fn run(script: &str, root: &Path) {
    assert!(sh(script, root).status.success(), "{script}");
}

/// Pipes `script` to `sh` with `root` standing for `/`; how it went.
fn sh(script: &str, root: &Path) -> std::process::Output {
    sh_with(script, root, &std::env::var("PATH").unwrap())
}

/// A `PATH` holding only the POSIX tools and `jq`: a host without python3.
fn without_python() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    for tool in ["sh", "grep", "mkdir", "printf", "mv", "jq"] {
        let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().unwrap();
        let found = String::from_utf8(found.stdout).unwrap();
        assert!(!found.trim().is_empty(), "{tool} is installed (test.sh installs jq)");
        std::os::unix::fs::symlink(found.trim(), dir.path().join(tool)).unwrap();
    }
    let path = dir.path().display().to_string();
    (dir, path)
}

fn sh_with(script: &str, root: &Path, path: &str) -> std::process::Output {
    use std::io::Write;
    let mut sh = Command::new("sh")
        .env("PATH", path)
        .env("PKGPROXY_SETUP_ROOT", root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    sh.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    sh.wait_with_output().unwrap()
}

/// Every file under `root`, with its content.
fn tree(root: &Path) -> Vec<(String, String)> {
    let files = pkgproxy_testkit::tree::files(root).into_iter();
    files.map(|(path, bytes)| (path.display().to_string(), String::from_utf8(bytes).unwrap())).collect()
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
        ("docker", "etc/docker/daemon.json", "\"http://10.0.0.5:3142\""),
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

        let undo = undo_script(client, "10.0.0.5:3142");
        assert!(undo.starts_with("#!/bin/sh\n#"), "a commented script: {undo}");
        run(&undo, root.path());
        let left = tree(root.path());
        match client {
            "docker" => assert_eq!(left.len(), 1, "daemon.json stays, without the mirror: {left:?}"),
            _ => assert!(left.is_empty(), "{client}: the file is gone: {left:?}"),
        }
        assert!(left.iter().all(|(_, text)| !text.contains("10.0.0.5")), "{client}: {left:?}");
        run(&undo, root.path());
        assert_eq!(tree(root.path()), left, "{client}: a second undo changes nothing");
    }
}

#[test]
fn the_docker_script_merges_into_the_daemon_json_there_and_takes_only_its_mirror_back() {
    let (_tools, jq_only) = without_python();
    for path in [std::env::var("PATH").unwrap(), jq_only] {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("etc/docker/daemon.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let before = r#"{"log-driver": "journald", "registry-mirrors": ["https://mirror.gcr.io"], "insecure-registries": ["10.0.0.5:3142"]}"#;
        std::fs::write(&file, before).unwrap();
        let run = |script: &str| assert!(sh_with(script, root.path(), &path).status.success(), "{path}: {script}");
        let read = || -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap() };
        run(&script("docker", "10.0.0.5:3142"));
        let merged = read();
        assert_eq!(merged["registry-mirrors"], serde_json::json!(["http://10.0.0.5:3142", "https://mirror.gcr.io"]));
        assert_eq!(merged["log-driver"], "journald", "the rest is kept");
        let once = std::fs::read_to_string(&file).unwrap();
        run(&script("docker", "10.0.0.5:3142"));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), once, "a second run changes nothing");

        run(&undo_script("docker", "10.0.0.5:3142"));
        let undone = read();
        assert_eq!(undone["registry-mirrors"], serde_json::json!(["https://mirror.gcr.io"]), "{path}");
        assert_eq!(undone["insecure-registries"], serde_json::json!(["10.0.0.5:3142"]), "not pkgproxy's to take");
        assert_eq!(tree(root.path()).len(), 1, "no file left behind");
    }
}

#[test]
fn an_undo_script_leaves_a_file_pkgproxy_did_not_write() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("etc/apt/apt.conf.d/01pkgproxy");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "Acquire::http::Proxy \"http://mine:3128/\";\n").unwrap();
    let output = sh(&undo_script("apt", "10.0.0.5:3142"), root.path());
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not pkgproxy's"));
    assert!(std::fs::read_to_string(&file).unwrap().contains("mine:3128"));
}

#[test]
fn the_lxd_profile_setups_print_their_commands_with_no_daemon() {
    for client in ["lxd", "snapcraft"] {
        let text = printed(&["setup", client, "-addr", "10.0.0.5:3142", "--print"]);
        assert!(text.contains("lxc profile set"), "{client}: {text}");
        assert!(text.contains("GOPROXY=http://10.0.0.5:3142/go"), "{client}: {text}");
        assert!(text.contains("Acquire::http::Proxy \"http://10.0.0.5:3142/\";"), "{client}: {text}");
    }
    let daemon = printed(&["setup", "lxd-daemon", "-addr", "10.0.0.5:3142"]);
    assert!(daemon.contains("lxc config set core.proxy_http http://10.0.0.5:3142"), "{daemon}");
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

/// The clients set up by a file pkgproxy writes whole, and where it is.
const WHOLE_FILES: [(&str, &str); 7] = [
    ("apt", "etc/apt/apt.conf.d/01pkgproxy"),
    ("go", "etc/profile.d/pkgproxy-go.sh"),
    ("snap", "etc/systemd/system/snapd.service.d/pkgproxy.conf"),
    ("containerd", "etc/containerd/certs.d/_default/hosts.toml"),
    ("podman", "etc/containers/registries.conf.d/50-pkgproxy.conf"),
    ("k3s", "etc/rancher/k3s/registries.yaml"),
    ("rke2", "etc/rancher/rke2/registries.yaml"),
];

/// The marker pkgproxy's own files carry.
const MARKER: &str = "Written by pkgproxyctl setup";

/// `pkgproxyctl ARGS` with `PKGPROXY_SETUP_ROOT=root` and no daemon:
/// whether it succeeded, and what it said.
fn ctl_under(root: &Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(args)
        .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
        .env("PKGPROXY_SETUP_ROOT", root)
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said)
}

/// What a script printed, both streams.
fn said(output: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn a_file_that_is_not_pkgproxy_s_is_left_byte_for_byte_by_every_path() {
    for (client, path) in WHOLE_FILES {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "# the admin's own\nconfigs: {registry.corp.lan: {auth: {password: keep-me}}}\n")
            .unwrap();
        let before = tree(root.path());

        let written = sh(&script(client, "10.0.0.5:3142"), root.path());
        let told = said(&written);
        assert!(!written.status.success(), "{client}: {told}");
        assert!(
            told.contains("is not pkgproxy's: left as it is") && told.contains("10.0.0.5:3142"),
            "{client}: {told}"
        );
        assert!(!told.contains(MARKER), "{client}: what to add by hand carries no marker: {told}");
        assert_eq!(tree(root.path()), before, "{client}: the script");

        let (applied, told) = ctl_under(root.path(), &["setup", client, "-addr", "10.0.0.5:3142", "--apply"]);
        assert!(!applied && told.contains("is not pkgproxy's: left as it is"), "{client}: {told}");
        assert!(told.contains("10.0.0.5:3142") && !told.contains(MARKER), "{client}: {told}");
        assert_eq!(tree(root.path()), before, "{client}: --apply");

        assert!(!sh(&undo_script(client, "10.0.0.5:3142"), root.path()).status.success(), "{client}");
        let (undone, told) = ctl_under(root.path(), &["setup", client, "-addr", "10.0.0.5:3142", "--undo"]);
        assert!(!undone && told.contains("not pkgproxy's"), "{client}: {told}");
        assert_eq!(tree(root.path()), before, "{client}: the undos");
    }
}

#[test]
fn apply_and_undo_work_under_the_setup_root_and_restart_only_when_something_changed() {
    for (client, path) in WHOLE_FILES {
        let restarts = matches!(client, "snap" | "k3s" | "rke2");
        let root = tempfile::tempdir().unwrap();
        let apply = ["setup", client, "-addr", "10.0.0.5:3142", "--apply"];
        let undo = ["setup", client, "-addr", "10.0.0.5:3142", "--undo"];

        // What was never applied: undone, nothing changes.
        assert!(ctl_under(root.path(), &undo).0, "{client}");
        run(&undo_script(client, "10.0.0.5:3142"), root.path());
        assert!(tree(root.path()).is_empty(), "{client}");

        let (applied, first) = ctl_under(root.path(), &apply);
        assert!(applied && root.path().join(path).exists(), "{client}: written under the root: {first}");
        assert_eq!(first.contains("restarting nothing ("), restarts, "{client}: {first}");
        let (applied, second) = ctl_under(root.path(), &apply);
        assert!(applied && second.contains("is as it should be"), "{client}: {second}");
        assert!(!second.contains("restarting"), "{client}: nothing changed, nothing to restart: {second}");
        let again = sh(&script(client, "10.0.0.5:3142"), root.path());
        assert!(again.status.success() && !said(&again).contains("restarting"), "{client}: {}", said(&again));

        let (undone, first) = ctl_under(root.path(), &undo);
        assert!(undone && first.contains("removed") && tree(root.path()).is_empty(), "{client}: {first}");
        assert_eq!(first.contains("restarting nothing ("), restarts, "{client}: {first}");
        let (undone, second) = ctl_under(root.path(), &undo);
        assert!(undone && second.contains("was not there") && !second.contains("restarting"), "{client}: {second}");
    }

    // dockerd's file is merged into: an undo where the mirror is not
    // there writes nothing, and a second apply changes nothing.
    let root = tempfile::tempdir().unwrap();
    let (undone, told) = ctl_under(root.path(), &["setup", "docker", "-addr", "10.0.0.5:3142", "--undo"]);
    assert!(undone && told.contains("nothing to take out") && tree(root.path()).is_empty(), "{told}");
    let apply = ["setup", "docker", "-addr", "10.0.0.5:3142", "--apply"];
    let (applied, first) = ctl_under(root.path(), &apply);
    assert!(applied && first.contains("restarting nothing (docker.service)"), "{first}");
    let (applied, second) = ctl_under(root.path(), &apply);
    assert!(applied && second.contains("already") && !second.contains("restarting"), "{second}");
}

/// Pipes `script` to `sh` with `root` standing for `/` and `CARGO_HOME`
/// set to `cargo_home`; how it went.
fn sh_cargo(script: &str, root: &Path, cargo_home: &str) -> std::process::Output {
    let script = format!("export CARGO_HOME={cargo_home}\n{script}");
    sh(&script, root)
}

#[test]
fn cargo_s_block_joins_the_user_s_config_and_leaves_the_rest_byte_for_byte() {
    let root = tempfile::tempdir().unwrap();
    let cargo_home = "/home/dev/.cargo";
    let file = root.path().join("home/dev/.cargo/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let own = "# the user's own\n[build]\njobs = 4\n\n[net]\ngit-fetch-with-cli = true";
    std::fs::write(&file, own).unwrap();

    let on_machine = |addr| script_on(root.path(), &[("CARGO_HOME", cargo_home)], "cargo", addr);
    let text = on_machine("10.0.0.5:3142");
    assert!(text.starts_with("#!/bin/sh\n#"), "{text}");
    let written = sh_cargo(&text, root.path(), cargo_home);
    assert!(written.status.success(), "{}", said(&written));
    let config = std::fs::read_to_string(&file).unwrap();
    assert!(config.starts_with(own), "the user's lines first, as they were: {config}");
    assert!(config.contains("[source.crates-io]\nreplace-with = \"pkgproxy\"\n"), "{config}");
    assert!(config.contains("registry = \"sparse+http://10.0.0.5:3142/cargo/index/\""), "{config}");
    let once = tree(root.path());
    assert!(sh_cargo(&text, root.path(), cargo_home).status.success());
    assert_eq!(tree(root.path()), once, "a second run changes nothing");
    let moved = sh_cargo(&on_machine("10.0.0.6:3142"), root.path(), cargo_home);
    assert!(moved.status.success(), "{}", said(&moved));
    let config = std::fs::read_to_string(&file).unwrap();
    assert!(config.contains("10.0.0.6:3142") && !config.contains("10.0.0.5:3142"), "one block, replaced: {config}");

    let undone = sh_cargo(&undo_script("cargo", "10.0.0.6:3142"), root.path(), cargo_home);
    assert!(undone.status.success(), "{}", said(&undone));
    let left = std::fs::read_to_string(&file).unwrap();
    assert_eq!(left.trim_end(), own, "the user's own lines, untouched");

    // The same by --apply and --undo.
    let apply = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
            .args(args)
            .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
            .env("PKGPROXY_SETUP_ROOT", root.path())
            .env("CARGO_HOME", cargo_home)
            .output()
            .unwrap();
        (output.status.success(), said(&output))
    };
    let (applied, told) = apply(&["setup", "cargo", "-addr", "10.0.0.5:3142", "--apply"]);
    assert!(applied, "{told}");
    assert!(std::fs::read_to_string(&file).unwrap().contains("sparse+http://10.0.0.5:3142/cargo/index/"));
    let (again, told) = apply(&["setup", "cargo", "-addr", "10.0.0.5:3142", "--apply"]);
    assert!(again && told.contains("is as it should be"), "{told}");
    let (undone, told) = apply(&["setup", "cargo", "-addr", "10.0.0.5:3142", "--undo"]);
    assert!(undone, "{told}");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim_end(), own);

    // A file that replaces crates.io itself is left as it is.
    let replacing = format!("{own}\n[source.crates-io]\nreplace-with = \"vendored\"\n");
    std::fs::write(&file, &replacing).unwrap();
    let refused = sh_cargo(&on_machine("10.0.0.5:3142"), root.path(), cargo_home);
    assert!(!refused.status.success());
    assert!(said(&refused).contains("sets source.crates-io itself: left as it is"), "{}", said(&refused));
    let refused = sh_cargo(&text, root.path(), cargo_home);
    assert!(!refused.status.success(), "printed for the file before");
    assert!(said(&refused).contains("left as it is"), "{}", said(&refused));
    let (applied, told) = apply(&["setup", "cargo", "-addr", "10.0.0.5:3142", "--apply"]);
    assert!(!applied && told.contains("left as it is") && told.contains("sparse+http://10.0.0.5:3142"), "{told}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), replacing, "byte for byte");

    // A file that held pkgproxy's block only goes with it.
    std::fs::remove_file(&file).unwrap();
    assert!(sh_cargo(&text, root.path(), cargo_home).status.success());
    assert!(sh_cargo(&undo_script("cargo", "10.0.0.5:3142"), root.path(), cargo_home).status.success());
    assert!(!file.exists(), "removed: it held pkgproxy's block only");
}

#[test]
fn pip_and_uv_get_pkgproxy_s_index_and_a_file_with_an_index_of_its_own_is_left_as_it_is() {
    for (client, path, expected) in [
        ("pip", "etc/pip.conf", "index-url = http://10.0.0.5:3142/pypi/simple/\ntrusted-host = 10.0.0.5\n"),
        ("uv", "etc/uv/uv.toml", "url = \"http://10.0.0.5:3142/pypi/simple/\"\ndefault = true\n"),
    ] {
        let root = tempfile::tempdir().unwrap();
        let text = script_on(root.path(), &[], client, "10.0.0.5:3142");
        run(&text, root.path());
        let written = std::fs::read_to_string(root.path().join(path)).unwrap();
        assert!(written.contains(expected), "{client}: {written}");
        let once = tree(root.path());
        run(&text, root.path());
        assert_eq!(tree(root.path()), once, "{client}: a second run changes nothing");
        run(&undo_script(client, "10.0.0.5:3142"), root.path());
        assert!(tree(root.path()).is_empty(), "{client}: the file held pkgproxy's block only");

        let own = match client {
            "pip" => "[global]\nindex-url = https://corp.example/simple/\n",
            _ => "[[index]]\nurl = \"https://corp.example/simple/\"\ndefault = true\n",
        };
        let file = root.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, own).unwrap();
        let refused = sh(&script_on(root.path(), &[], client, "10.0.0.5:3142"), root.path());
        assert!(
            !refused.status.success() && said(&refused).contains("itself: left as it is"),
            "{client}: {}",
            said(&refused)
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), own, "{client}: byte for byte");
    }
}

#[test]
fn npm_and_yarn_get_pkgproxy_s_registry_in_the_user_s_files_and_npm_reads_it() {
    for (client, path, expected) in [
        ("npm", "home/dev/.npmrc", "registry=http://10.0.0.5:3142/npm/\n"),
        (
            "yarn",
            "home/dev/.yarnrc.yml",
            "npmRegistryServer: \"http://10.0.0.5:3142/npm/\"\nunsafeHttpWhitelist:\n  - \"10.0.0.5\"\n",
        ),
    ] {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let own = match client {
            "npm" => "# the user's own\nsave-exact=true\n",
            _ => "# the user's own\nenableTelemetry: false\n",
        };
        std::fs::write(&file, own).unwrap();
        let on_machine = || {
            let script = script_on(root.path(), &[("HOME", "/home/dev")], client, "10.0.0.5:3142");
            format!("export HOME=/home/dev\nunset NPM_CONFIG_USERCONFIG\n{script}")
        };
        let text = on_machine();
        run(&text, root.path());
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(written.starts_with(own) && written.contains(expected), "{client}: {written}");
        let once = tree(root.path());
        run(&text, root.path());
        assert_eq!(tree(root.path()), once, "{client}: a second run changes nothing");
        if client == "npm" {
            let read = Command::new("npm")
                .args(["config", "get", "registry", "--userconfig"])
                .arg(&file)
                .env("npm_config_globalconfig", "/dev/null/npmrc")
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&read.stdout).trim(), "http://10.0.0.5:3142/npm/", "npm reads it");
        }
        let undo =
            format!("export HOME=/home/dev\nunset NPM_CONFIG_USERCONFIG\n{}", undo_script(client, "10.0.0.5:3142"));
        run(&undo, root.path());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), own, "{client}: taken back byte for byte");

        let registry = match client {
            "npm" => "registry=https://npm.corp.example/\n",
            _ => "npmRegistryServer: \"https://npm.corp.example/\"\n",
        };
        std::fs::write(&file, registry).unwrap();
        let refused = sh(&on_machine(), root.path());
        assert!(
            !refused.status.success() && said(&refused).contains("itself: left as it is"),
            "{client}: {}",
            said(&refused)
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), registry, "{client}: byte for byte");
    }
}
