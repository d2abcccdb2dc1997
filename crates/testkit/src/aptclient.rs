//! A real `apt-get`, sandboxed in a temporary directory.
//!
//! It owns the apt state of one simulated client machine: its own
//! `sources.list`, lists, archives, dpkg status and configuration, all under
//! one temporary directory that is removed on drop. Every run goes through an
//! `APT_CONFIG` file that sets `Dir::Etc::Parts`, so the system's
//! `/etc/apt/apt.conf.d` (with its `docker-clean` style hooks) is never read,
//! and through a deadline, so a hung apt fails the test instead of hanging it.
//!
//! What it must not do: read or write the system's apt state, inherit a proxy
//! from the environment, or send traffic anywhere but the URLs it is given.

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long one apt-get run may take before it is killed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// What one apt-get run did.
#[derive(Debug)]
pub struct AptOutput {
    /// Exit status (killed by a signal if it timed out).
    pub status: ExitStatus,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
    /// True if it was killed for running past its deadline.
    pub timed_out: bool,
}

impl AptOutput {
    /// True if apt-get exited 0 in time.
    pub fn success(&self) -> bool {
        self.status.success() && !self.timed_out
    }

    /// Panics, printing both streams, unless apt-get exited 0 in time.
    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert!(self.success(), "apt-get failed: {self}");
        self
    }

    /// Panics, printing both streams, if apt-get exited 0.
    #[track_caller]
    pub fn assert_failure(&self) -> &Self {
        assert!(!self.success(), "apt-get unexpectedly succeeded: {self}");
        self
    }

    /// True if stdout or stderr contains `needle`.
    pub fn contains(&self, needle: &str) -> bool {
        self.stdout.contains(needle) || self.stderr.contains(needle)
    }
}

impl std::fmt::Display for AptOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let timed_out = if self.timed_out { " (timed out)" } else { "" };
        write!(f, "{}{timed_out}\n--- stdout ---\n{}\n--- stderr ---\n{}", self.status, self.stdout, self.stderr)
    }
}

/// One sandboxed apt client. See the module docs.
#[derive(Debug)]
pub struct AptSandbox {
    /// The sandbox root; everything apt reads or writes is under it.
    dir: TempDir,
    /// Extra `-o key=value` options passed to every run.
    options: Vec<(String, String)>,
    /// Deadline of each run.
    timeout: Duration,
}

impl AptSandbox {
    /// A fresh apt state whose only source is
    /// `deb [signed-by=KEYRING] SOURCE_BASE testing main`.
    ///
    /// `proxy_url` (e.g. `http://127.0.0.1:3142/`) becomes
    /// `Acquire::http::Proxy`; `None` connects directly. `source_base` is the
    /// repository URL, e.g. `http://127.0.0.1:PORT/debian`.
    pub fn new(proxy_url: Option<&str>, source_base: &str, keyring: &Path) -> AptSandbox {
        let dir = tempfile::Builder::new().prefix("pkgproxy-apt-").tempdir().expect("create apt sandbox dir");
        let sb = dir.path();
        for sub in [
            "etc/apt/apt.conf.d",
            "etc/apt/sources.list.d",
            "etc/apt/preferences.d",
            "etc/apt/trusted.gpg.d",
            "var/lib/apt/lists/partial",
            "var/cache/apt/archives/partial",
            "var/lib/dpkg",
            "var/log/apt",
            "keys",
            "download",
        ] {
            fs::create_dir_all(sb.join(sub)).expect("create sandbox dir");
        }
        fs::write(sb.join("var/lib/dpkg/status"), "").expect("write empty dpkg status");
        let key = sb.join("keys/archive-keyring.gpg");
        fs::copy(keyring, &key).expect("copy keyring into the sandbox");
        let source = format!("deb [signed-by={}] {} testing main\n", key.display(), source_base.trim_end_matches('/'));
        fs::write(sb.join("etc/apt/sources.list"), source).expect("write sources.list");
        fs::write(sb.join("apt.conf"), apt_conf(sb, proxy_url)).expect("write apt.conf");
        AptSandbox { dir, options: Vec::new(), timeout: DEFAULT_TIMEOUT }
    }

    /// Passes `-o key=value` to every later run, e.g. `("Acquire::Retries", "0")`.
    pub fn option(mut self, key: &str, value: &str) -> Self {
        self.options.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Sets how long each run may take before it is killed
    /// (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The sandbox root.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Where [`AptSandbox::download`] puts `.deb` files.
    pub fn download_dir(&self) -> PathBuf {
        self.dir().join("download")
    }

    /// Where `apt-get update` stores the fetched indexes.
    pub fn lists_dir(&self) -> PathBuf {
        self.dir().join("var/lib/apt/lists")
    }

    /// The `APT_CONFIG` file every run uses.
    pub fn config_path(&self) -> PathBuf {
        self.dir().join("apt.conf")
    }

    /// `apt-get update`; it fails if any index could not be fetched
    /// (`APT::Update::Error-Mode "any"`).
    pub fn update(&self) -> AptOutput {
        self.run(&["update"])
    }

    /// `apt-get download PACKAGES...` into [`AptSandbox::download_dir`].
    pub fn download(&self, packages: &[&str]) -> AptOutput {
        let mut args = vec!["download"];
        args.extend_from_slice(packages);
        self.run_in(&self.download_dir(), &args)
    }

    /// The `.deb` that [`AptSandbox::download`] fetched for `name`.
    ///
    /// Panics if there is none.
    pub fn downloaded(&self, name: &str) -> PathBuf {
        let prefix = format!("{name}_");
        let dir = self.download_dir();
        fs::read_dir(&dir)
            .expect("read download dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                let file = p.file_name().unwrap().to_string_lossy();
                file.starts_with(&prefix) && file.ends_with(".deb")
            })
            .unwrap_or_else(|| panic!("apt downloaded no {name}_*.deb into {}", dir.display()))
    }

    /// `apt-get ARGS...` run in the sandbox root.
    pub fn run(&self, args: &[&str]) -> AptOutput {
        self.run_in(self.dir(), args)
    }

    /// `apt-get ARGS...` run in `cwd`.
    pub fn run_in(&self, cwd: &Path, args: &[&str]) -> AptOutput {
        let mut cmd = Command::new("apt-get");
        cmd.current_dir(cwd)
            .env("APT_CONFIG", self.config_path())
            .env("LC_ALL", "C")
            .env("DEBIAN_FRONTEND", "noninteractive");
        for var in
            ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"]
        {
            cmd.env_remove(var);
        }
        for (key, value) in &self.options {
            cmd.arg("-o").arg(format!("{key}={value}"));
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a timeout also kills apt's methods.
            .process_group(0);
        let child = cmd.spawn().expect("spawn apt-get");
        wait_with_deadline(child, self.timeout)
    }
}

/// The `APT_CONFIG` file: everything under `sb`, no system parts, no proxy
/// from elsewhere.
fn apt_conf(sb: &Path, proxy_url: Option<&str>) -> String {
    let sb = sb.display();
    let proxy = proxy_url.unwrap_or("DIRECT");
    format!(
        r#"Dir "{sb}/";
Dir::State::status "{sb}/var/lib/dpkg/status";
Dir::Etc::Parts "{sb}/etc/apt/apt.conf.d";
APT::Architecture "amd64";
APT::Architectures {{ "amd64"; }};
APT::Sandbox::User "root";
Acquire::Languages "none";
APT::Update::Error-Mode "any";
Acquire::http::Proxy "{proxy}";
Acquire::https::Proxy "DIRECT";
"#
    )
}

/// Collects the child's output, killing its process group at the deadline.
fn wait_with_deadline(mut child: Child, timeout: Duration) -> AptOutput {
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for apt-get") {
            break status;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: plain kill(2) of the group we created for this child.
            unsafe {
                libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
            }
            break child.wait().expect("wait for killed apt-get");
        }
        thread::sleep(Duration::from_millis(10));
    };
    AptOutput { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap(), timed_out }
}

fn drain(mut stream: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stream.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}
