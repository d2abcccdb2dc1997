//! The real `snap` command (Debian's snapd package), daemonless, in a
//! sandbox: its own home, no proxy unless the test sets one, and
//! `SNAPPY_FORCE_API_URL` pointing where the test says. `snap download`
//! and `snap known --remote` talk to the store themselves.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What a `snap` run did.
#[derive(Debug)]
pub struct SnapOutput {
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// How long it took.
    pub elapsed: Duration,
    /// The folder it ran in.
    pub dir: PathBuf,
}

impl SnapOutput {
    /// The bytes of `file` in the folder it ran in.
    pub fn file(&self, file: &str) -> Option<Vec<u8>> {
        std::fs::read(self.dir.join(file)).ok()
    }
}

/// A sandboxed `snap`.
pub struct SnapSandbox {
    home: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl SnapSandbox {
    /// A `snap` talking to the store API at `api_url` (keep its trailing slash).
    pub fn new(api_url: &str) -> SnapSandbox {
        let home = tempfile::tempdir().expect("temporary folder");
        SnapSandbox { home, env: vec![("SNAPPY_FORCE_API_URL".into(), api_url.into())] }
    }

    /// Sets `name` to `value` in every run's environment.
    pub fn with_env(mut self, name: &str, value: &str) -> SnapSandbox {
        self.env.push((name.into(), value.into()));
        self
    }

    /// A new folder of the sandbox, named `name`.
    pub fn folder(&self, name: &str) -> PathBuf {
        let dir = self.home.path().join(name);
        std::fs::create_dir_all(&dir).expect("folder");
        dir
    }

    /// Runs `snap ARGS` in the folder `name`.
    pub fn run(&self, name: &str, args: &[&str]) -> SnapOutput {
        self.run_in(&self.folder(name), args)
    }

    /// Runs `snap ARGS` in `dir`.
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> SnapOutput {
        let mut command = Command::new("snap");
        command.args(args).current_dir(dir).env_clear();
        command.env("PATH", std::env::var("PATH").unwrap_or_default()).env("HOME", self.home.path());
        command.env("LANG", "C.UTF-8");
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let started = Instant::now();
        let output = command.output().expect("snap (Debian's snapd package) runs");
        SnapOutput {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            elapsed: started.elapsed(),
            dir: dir.to_path_buf(),
        }
    }
}
