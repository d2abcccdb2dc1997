//! The pkgproxy daemon as a test runs it: the real binary, in its own
//! process, on `127.0.0.1:0`, with a cache and control sockets in a
//! temporary folder. The test finds the bound address through the stats
//! socket, as an operator would, and can `kill -9` and restart it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use pkgproxy_control::{ControlClient, Info, ModeRequest, OfflineReport};
use serde_json::Value;

/// A running pkgproxy.
pub struct Daemon {
    binary: PathBuf,
    dir: tempfile::TempDir,
    config: Option<String>,
    extra_args: Vec<String>,
    env: Vec<(String, String)>,
    wrapper: Vec<String>,
    child: Option<Child>,
    proxy_addr: String,
}

impl Daemon {
    /// Starts `binary` with `config` (the TOML file's text, if any) and
    /// waits until it serves.
    pub async fn start(binary: impl Into<PathBuf>, config: Option<&str>) -> Daemon {
        Self::start_with(binary, config, &[]).await
    }

    /// As [`Daemon::start`], with extra command-line arguments.
    pub async fn start_with(binary: impl Into<PathBuf>, config: Option<&str>, args: &[&str]) -> Daemon {
        Self::start_with_env(binary, config, args, &[]).await
    }

    /// As [`Daemon::start_with`], with extra environment variables.
    pub async fn start_with_env(
        binary: impl Into<PathBuf>,
        config: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Daemon {
        Self::start_wrapped(&[], binary, config, args, env).await
    }

    /// As [`Daemon::start_with_env`], run through `wrapper` (for example
    /// `ip netns exec NAME`, which execs the daemon in place).
    pub async fn start_wrapped(
        wrapper: &[&str],
        binary: impl Into<PathBuf>,
        config: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Daemon {
        let mut daemon = Daemon {
            wrapper: wrapper.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            binary: binary.into(),
            dir: tempfile::Builder::new().prefix("pkgproxy-test").tempdir().expect("temp dir"),
            config: config.map(str::to_string),
            extra_args: args.iter().map(|a| a.to_string()).collect(),
            child: None,
            proxy_addr: String::new(),
        };
        daemon.spawn().await;
        daemon
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    /// The stats socket.
    pub fn stats_socket(&self) -> PathBuf {
        self.dir.path().join("stats.sock")
    }

    /// The daemon's log (stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    /// Replaces the configuration file's text (the daemon reads it again on
    /// `SIGHUP` or `pkgproxyctl reload`, and at its next start).
    pub fn rewrite_config(&mut self, text: &str) {
        std::fs::write(self.dir.path().join("pkgproxy.toml"), text).expect("write config");
        self.config = Some(text.to_string());
    }

    /// Sends `signal` to the daemon.
    pub fn signal(&self, signal: libc::c_int) {
        let pid = self.pid().expect("the daemon runs") as libc::pid_t;
        // SAFETY: kill(2) on the child this harness started.
        unsafe { libc::kill(pid, signal) };
    }

    /// `host:port` of the proxy listener.
    pub fn proxy_addr(&self) -> &str {
        &self.proxy_addr
    }

    /// `http://host:port/`, as apt's `Acquire::http::Proxy` wants it.
    pub fn proxy_url(&self) -> String {
        format!("http://{}/", self.proxy_addr)
    }

    async fn spawn(&mut self) {
        let dir = self.dir.path();
        let given = |flag: &str| self.extra_args.iter().any(|a| a.trim_start_matches('-').starts_with(flag));
        let mut args = vec![];
        // A test that needs a known port (daemons that point at each other)
        // passes its own -addr.
        if !given("addr") {
            args.extend(["-addr".to_string(), "127.0.0.1:0".to_string()]);
        }
        // What is not cache is the test's too; and a configuration file of
        // the machine's (/etc/pkgproxy) is never read.
        if !given("state-dir") {
            args.extend(["-state-dir".to_string(), path_arg(&dir.join("state"))]);
        }
        // A test that says where systemd's folders are lets the daemon find
        // its file there.
        let finds_its_own =
            self.env.iter().any(|(name, _)| name == "CONFIGURATION_DIRECTORY" || name == "CREDENTIALS_DIRECTORY");
        if self.config.is_none() && !given("config") && !finds_its_own {
            args.extend(["-config".to_string(), "/dev/null".to_string()]);
        }
        args.extend([
            "-cache-dir".to_string(),
            path_arg(&dir.join("cache")),
            "-stats-socket-path".to_string(),
            path_arg(&self.stats_socket()),
            "-admin-socket-path".to_string(),
            path_arg(&dir.join("admin.sock")),
            "-log-level".to_string(),
            "debug".to_string(),
        ]);
        if let Some(config) = &self.config {
            let path = dir.join("pkgproxy.toml");
            std::fs::write(&path, config).expect("write config");
            args.extend(["-config".to_string(), path_arg(&path)]);
        }
        // The test machine's own network must not switch test daemons
        // offline; tests of auto-offline say what they want.
        if !given("auto-offline") {
            args.extend(["-auto-offline".to_string(), "off".to_string()]);
        }
        // Nor its disk, short of free space, evict what a test cached (5 %
        // of a large disk is many gigabytes); tests of disk pressure say
        // what they keep free, by the flag or in the file.
        if !given("cache-min-free") && !self.config.as_deref().is_some_and(sets_min_free) {
            args.extend(["-cache-min-free".to_string(), "0".to_string()]);
        }
        args.extend(self.extra_args.iter().cloned());
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("daemon.log")).expect("daemon log");
        let mut command = match self.wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
        let child = command
            .args(&args)
            .env_remove("RUST_LOG")
            // A proxy of the machine's is not the tests' (one that wants
            // one sets it).
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start pkgproxy");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("pkgproxy exited at start with {status}:\n{}", self.log());
            }
            if let Ok(info) = self.stats().info().await {
                self.proxy_addr = info.listen_address;
                return;
            }
            assert!(Instant::now() < deadline, "pkgproxy did not come up:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The client of the stats socket.
    pub fn stats(&self) -> ControlClient {
        ControlClient::new(self.stats_socket())
    }

    /// The client of the admin socket.
    pub fn admin_client(&self) -> ControlClient {
        ControlClient::new(self.admin_socket())
    }

    /// `GET /pkgproxy/v1/info` on the stats socket.
    pub async fn info(&self) -> Info {
        self.stats().info().await.expect("the stats socket answers /pkgproxy/v1/info")
    }

    /// `GET /metrics` on the stats socket.
    pub async fn metrics(&self) -> String {
        self.stats().metrics().await.expect("the stats socket answers /metrics")
    }

    /// The daemon's resident memory in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The most memory the daemon has held so far (its peak resident set
    /// size), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let pid = self.child.as_ref().expect("daemon running").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field} in proc status"));
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{field} value"))
    }

    /// The admin socket.
    pub fn admin_socket(&self) -> PathBuf {
        self.dir.path().join("admin.sock")
    }

    /// A request on the admin socket, whatever it is answered: the status
    /// and the JSON answer.
    pub async fn admin(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let method = http::Method::from_bytes(method.as_bytes()).expect("a method");
        let body = body.map(|b| Bytes::from(b.to_string()));
        let (status, answer) = self.admin_client().send(method, path, body).await.expect("the admin socket answers");
        (status.as_u16(), serde_json::from_slice(&answer).expect("a JSON answer"))
    }

    /// Puts `mode` in effect over the admin socket.
    pub async fn set_offline_mode(&self, mode: &str) -> OfflineReport {
        let request = ModeRequest { mode: mode.to_string(), from: None, cluster: false };
        self.admin_client().set_offline(&request).await.expect("the admin socket sets the mode")
    }

    /// The running daemon's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|child| child.id())
    }

    /// `kill -9`: no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
        }
    }

    /// `SIGTERM`, and waits for it to stop, as a service manager does;
    /// how it exited (`None`: it was not running).
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: signalling a child this process started and has not
        // reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        Some(child.wait().expect("reap"))
    }

    /// Starts the daemon again on the same cache, stopped or not.
    pub async fn start_again(&mut self) {
        self.spawn().await;
    }

    /// Starts the daemon again on the same cache, stopped or not, with
    /// other extra arguments.
    pub async fn start_again_with(&mut self, args: &[&str]) {
        self.extra_args = args.iter().map(|a| a.to_string()).collect();
        self.spawn().await;
    }

    /// Kills the daemon with `SIGKILL` once what it served is committed (the
    /// stats socket answers after those commits), and starts it again on
    /// the same cache.
    pub async fn restart(&mut self) {
        if self.child.is_some() {
            let _ = self.stats().info().await;
        }
        self.kill9();
        self.spawn().await;
    }

    /// Starts the daemon again on the same cache with other extra arguments.
    pub async fn restart_with(&mut self, args: &[&str]) {
        self.extra_args = args.iter().map(|a| a.to_string()).collect();
        self.restart().await;
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn path_arg(path: &Path) -> String {
    path.to_str().expect("UTF-8 temp path").to_string()
}

/// Whether the configuration file's text sets `[cache] min_free`.
fn sets_min_free(config: &str) -> bool {
    let Ok(table) = config.parse::<toml::Table>() else { return false };
    table.get("cache").and_then(|cache| cache.get("min_free")).is_some()
}
