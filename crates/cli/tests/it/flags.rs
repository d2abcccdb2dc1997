//! The daemon's command line: both flag spellings, `PKGPROXY_*` variables,
//! and bad values refused at start with the flag or variable named.

use std::process::Command;

use crate::common::PKGPROXY;
use pkgproxy_control::ControlClient;
use pkgproxy_testkit::eventually;

/// Runs the daemon with `args` and `env`, expecting it to refuse to start.
fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(PKGPROXY);
    command
        .args(["-cache-dir", dir.path().join("c").to_str().unwrap()])
        .args(["-stats-socket-path", dir.path().join("s.sock").to_str().unwrap()])
        .args(["-admin-socket-path", dir.path().join("a.sock").to_str().unwrap()])
        .args(["-addr", "127.0.0.1:0"])
        .args(args);
    for var in
        ["PKGPROXY_ADDR", "PKGPROXY_CACHE_DIR", "PKGPROXY_CONFIG", "PKGPROXY_LOG_LEVEL", "PKGPROXY_APT_INDEX_TTL"]
    {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    let output = command.output().unwrap();
    assert!(!output.status.success(), "pkgproxy {args:?} {env:?} should refuse to start");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_values_are_refused_naming_the_flag_or_variable() {
    let err = refused(&["--addr", "nonsense"], &[]);
    assert!(err.contains("-addr"), "{err}");
    let err = refused(&["-log-level", "loud"], &[]);
    assert!(err.contains("-log-level"), "{err}");
    let err = refused(&["-apt-index-ttl", "soon"], &[]);
    assert!(err.contains("-apt-index-ttl"), "{err}");
    let err = refused(&[], &[("PKGPROXY_APT_INDEX_TTL", "soon")]);
    assert!(err.contains("PKGPROXY_APT_INDEX_TTL"), "{err}");
    let err = refused(&["-config", "/nonexistent/pkgproxy.toml"], &[]);
    assert!(err.contains("-config") && err.contains("/nonexistent/pkgproxy.toml"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "the error once: {err}");
    let err = refused(&["-no-such-flag"], &[]);
    assert!(err.contains("no-such-flag"), "{err}");
    let err = refused(&["-log-format", "xml"], &[]);
    assert!(err.contains("-log-format") && err.contains("xml"), "{err}");
    let err = refused(&["-shutdown-grace", "later"], &[]);
    assert!(err.contains("-shutdown-grace"), "{err}");
    let err = refused(&[], &[("PKGPROXY_CACHE_MIN_FREE", "lots")]);
    assert!(err.contains("--cache-min-free \"lots\""), "{err}");
}

#[test]
fn bad_configuration_files_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let write = |text: &str| {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let err = refused(&["-config", &write("[apt]\nindex_tll = \"5m\"\n")], &[]);
    assert!(err.contains("index_tll"), "{err}");
    let err = refused(&["-config", &write("[[apt.archive]]\nname = \"x\"\nmirrors = [\"ftp://x/debian\"]\n")], &[]);
    assert!(err.contains("apt.archive") && err.contains("ftp://x/debian"), "{err}");
    let err = refused(&["-config", &write("[upstream]\nresolve = [\"nonsense\"]\n")], &[]);
    assert!(err.contains("upstream.resolve"), "{err}");
    let err = refused(&["-config", &write("[upstream]\ndeadline = \"0s\"\n")], &[]);
    assert!(err.contains("upstream.deadline"), "{err}");
    let err =
        refused(&["-config", &write("[mirror.shadow]\ntarget = \"http://127.0.0.1:1\"\npercentage = 200\n")], &[]);
    assert!(err.contains("mirror.shadow.percentage"), "{err}");
    let err = refused(&["-config", &write("[mirror.shadow]\ntarget = \"gopher://x\"\n")], &[]);
    assert!(err.contains("mirror.shadow.target"), "{err}");
}

#[test]
fn help_documents_every_flag_and_its_variable() {
    let output = Command::new(PKGPROXY).arg("-help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--addr",
        "--cache-dir",
        "--stats-socket-path",
        "--admin-socket-path",
        "--config",
        "--log-level",
        "--apt-index-ttl",
        "--log-format",
        "--shutdown-grace",
    ] {
        assert!(help.contains(flag), "help lacks {flag}:\n{help}");
    }
    for var in ["PKGPROXY_ADDR", "PKGPROXY_CACHE_DIR", "PKGPROXY_STATS_SOCKET_PATH", "PKGPROXY_CONFIG"] {
        assert!(help.contains(var), "help lacks {var}:\n{help}");
    }
    assert!(help.contains("pkgproxyctl setup CLIENT"), "help says how to point a client at it");
    for side in ["apt", "go", "snap", "docker", "containerd", "lxd"] {
        assert!(help.contains(side), "help names {side}:\n{help}");
    }
    assert!(help.contains("[cluster]") && help.contains("peer_secret"), "--help shows every key:\n{help}");
    let short = Command::new(PKGPROXY).arg("-h").output().unwrap();
    let short = String::from_utf8_lossy(&short.stdout);
    assert!(short.contains("pkgproxy --help") && !short.contains("peer_secret"), "-h is short, pointing at --help");
}

#[tokio::test(flavor = "multi_thread")]
async fn variables_configure_the_daemon_and_flags_win_over_them() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats.sock");
    let child = Command::new(PKGPROXY)
        .env("PKGPROXY_ADDR", "127.0.0.1:0")
        .env("PKGPROXY_CACHE_DIR", dir.path().join("from-variable"))
        .env("PKGPROXY_STATS_SOCKET_PATH", &stats)
        .env("PKGPROXY_ADMIN_SOCKET_PATH", dir.path().join("admin.sock"))
        .args(["--cache-dir", dir.path().join("from-flag").to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _running = KilledOnDrop(child);
    let client = ControlClient::new(&stats);
    let served = || async { client.info().await.ok() };
    let info = eventually("the daemon to serve its stats socket at the variable's path", served).await;
    assert!(info.listen_address.starts_with("127.0.0.1:"), "{info:?}");
    assert!(info.cache_dir.ends_with("from-flag"), "the flag wins: {info:?}");
    assert!(dir.path().join("from-flag").join("index.redb").exists());
    assert!(!dir.path().join("from-variable").exists());
}

/// A daemon started by hand, killed however the test ends.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_are_json_objects_with_log_format_json_and_unstamped_text_under_systemd() {
    let daemon = pkgproxy_testkit::Daemon::start_with(PKGPROXY, None, &["-log-format", "json"]).await;
    let log = daemon.log();
    let lines: Vec<&str> = log.lines().filter(|line| !line.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for line in &lines {
        let object: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(object["timestamp"].is_string() && object["level"].is_string(), "{line}");
    }
    assert!(lines.iter().any(|line| line.contains("pkgproxy is serving")), "{log}");

    let journal = pkgproxy_testkit::Daemon::start_with_env(PKGPROXY, None, &[], &[("JOURNAL_STREAM", "8:1234")]).await;
    let log = journal.log();
    let serving = log.lines().find(|line| line.contains("pkgproxy is serving")).expect("the serving line");
    assert!(serving.trim_start().starts_with("INFO"), "the journal stamps lines itself: {serving}");
}

#[test]
fn completions_and_manual_pages_come_from_the_flags() {
    let ctl = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl")).args(args).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let bash = ctl(&["completions", "bash"]);
    assert!(bash.contains("_pkgproxyctl()") && bash.contains("verify"), "{bash}");
    let checked = Command::new("bash").arg("-n").arg("-c").arg(&bash).status().unwrap();
    assert!(checked.success(), "bash reads it");
    for shell in ["zsh", "fish"] {
        assert!(ctl(&["completions", shell]).contains("pkgproxyctl"), "{shell}");
    }
    let daemon = ctl(&["manpage", "pkgproxy"]);
    assert!(daemon.contains(".TH pkgproxy 8"), "{daemon}");
    assert!(daemon.contains("shutdown\\-grace") && daemon.contains("PKGPROXY_CACHE_DIR"), "every flag: {daemon}");
    let ctl_page = ctl(&["manpage", "pkgproxyctl"]);
    assert!(ctl_page.contains(".TH pkgproxyctl 1") && ctl_page.contains("completions"), "{ctl_page}");
}

#[test]
fn pkgproxyctl_says_a_missing_daemon_once_and_how_to_mend_it() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["info", "--stats-socket-path", "/nonexistent/stats.sock"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(said.contains("no pkgproxy at /nonexistent/stats.sock") && said.contains("is it running"), "{said}");
    assert_eq!(said.matches("No such file or directory").count(), 1, "{said}");
}

/// The configuration file the package installs: four lines saying what
/// it is, then the example with every line commented out, section headers
/// too.
fn shipped_file() -> Vec<String> {
    let commented = |line: &str| match line.is_empty() || line.starts_with('#') {
        true => line.to_string(),
        false => format!("# {line}"),
    };
    let opening = ["# pkgproxy's configuration: ...", "# ...", "# ...", ""].map(String::from);
    opening.into_iter().chain(pkgproxy_server::config::EXAMPLE.lines().map(commented)).collect()
}

/// The shipped file with the lines starting `# PREFIX` uncommented, as an
/// admin does; and the line number of each.
fn uncommented(prefixes: &[&str]) -> (String, Vec<usize>) {
    let mut lines = shipped_file();
    let mut numbers = Vec::new();
    for prefix in prefixes {
        let at = lines.iter().position(|line| line.starts_with(&format!("# {prefix}"))).expect("in the example");
        lines[at] = lines[at][2..].to_string();
        numbers.push(at + 1);
    }
    (lines.join("\n") + "\n", numbers)
}

#[test]
fn a_key_uncommented_in_the_shipped_file_is_placed_where_it_belongs() {
    let dir = tempfile::tempdir().unwrap();
    let start = |text: &str| {
        let path = dir.path().join("pkgproxy.toml");
        std::fs::write(&path, text).unwrap();
        refused(&["-config", path.to_str().unwrap()], &[])
    };
    let (text, lines) = uncommented(&["max_size ="]);
    let err = start(&text);
    assert!(
        err.contains(&format!("line {}, column 1: unknown key `max_size` above every section header", lines[0])),
        "{err}"
    );
    assert!(err.contains("it is a key of [cache], whose header on line 5 is commented out"), "{err}");

    let (text, lines) = uncommented(&["[status]", "trusted_keys ="]);
    let err = start(&text);
    assert!(err.contains(&format!("line {}, column 1: unknown key `trusted_keys` in [status]", lines[1])), "{err}");
    assert!(err.contains("it is a key of [bundles]"), "{err}");

    let (text, lines) = uncommented(&["[npm]", "page ="]);
    let err = start(&text);
    assert!(err.contains(&format!("line {}, column 1: unknown key `page` in [npm]", lines[1])), "{err}");
    assert!(err.contains("it is a key of [status]"), "{err}");
}

#[test]
fn a_misspelt_section_or_key_is_named_with_its_line_and_the_likely_one() {
    let dir = tempfile::tempdir().unwrap();
    let start = |text: &str| {
        let path = dir.path().join("pkgproxy.toml");
        std::fs::write(&path, text).unwrap();
        refused(&["-config", path.to_str().unwrap()], &[])
    };
    let err = start("[cache]\nmax_size = \"1GiB\"\n\n[nmp]\nindex_ttl = \"5m\"\n");
    assert!(err.contains("line 4, column 1: unknown section [nmp]: did you mean [npm]?"), "{err}");
    let err = start("[cache]\nmax_szie = \"1GiB\"\n");
    assert!(err.contains("line 2, column 1: unknown key `max_szie` in [cache]: did you mean `max_size`?"), "{err}");
    let err = start("[npm]\nindex_tll = \"5m\"\n");
    assert!(err.contains("line 2, column 1: unknown key `index_tll` in [npm]: did you mean `index_ttl`?"), "{err}");
}
