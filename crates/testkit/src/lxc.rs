//! The real `lxc` (Debian's lxd-client), with no LXD daemon: for
//! simplestreams remotes it lists, inspects and exports images by itself.
//! Its configuration (`config.yml` with the test's remotes, pinned
//! certificates in `servercerts/`) is a folder of the sandbox's own
//! (`LXD_CONF`), and its environment is cleared but for `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What an `lxc` run did.
#[derive(Debug)]
pub struct LxcOutput {
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// A sandboxed `lxc`.
pub struct LxcSandbox {
    dir: tempfile::TempDir,
}

impl LxcSandbox {
    /// An `lxc` whose remotes are `remotes` (name, URL), all simplestreams.
    pub fn new(remotes: &[(&str, &str)]) -> LxcSandbox {
        let dir = tempfile::tempdir().expect("temporary folder");
        let conf = dir.path().join("conf");
        std::fs::create_dir_all(conf.join("servercerts")).expect("servercerts");
        let mut yaml = String::from("default-remote: local\nremotes:\n");
        for (name, url) in remotes {
            yaml.push_str(&format!("  {name}:\n    addr: \"{url}\"\n    protocol: simplestreams\n    public: true\n"));
        }
        yaml.push_str("aliases: {}\n");
        if !remotes.is_empty() {
            std::fs::write(conf.join("config.yml"), yaml).expect("config.yml");
        }
        LxcSandbox { dir }
    }

    /// The `LXD_CONF` folder.
    pub fn conf_dir(&self) -> PathBuf {
        self.dir.path().join("conf")
    }

    /// Pins `pem` as remote `name`'s certificate.
    pub fn pin(&self, name: &str, pem: &str) {
        std::fs::write(self.conf_dir().join("servercerts").join(format!("{name}.crt")), pem).expect("servercerts");
    }

    /// `lxc ARGS`.
    pub fn run(&self, args: &[&str]) -> LxcOutput {
        let output = Command::new("lxc")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("LXD_CONF", self.conf_dir())
            .output()
            .expect("lxc (Debian's lxd-client package) runs");
        LxcOutput {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// `lxc image list REMOTE: --format=csv`.
    pub fn list(&self, remote: &str) -> LxcOutput {
        self.run(&["image", "list", &format!("{remote}:"), "--format=csv"])
    }

    /// `lxc image export IMAGE` into the sandbox's folder `name`.
    pub fn export(&self, image: &str, name: &str) -> LxcOutput {
        let target = self.out(name);
        std::fs::create_dir_all(&target).expect("the export folder");
        self.run(&["image", "export", image, &format!("{}/", target.display())])
    }

    /// The files `export` wrote into folder `name`, by name, sorted.
    pub fn exported(&self, name: &str) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(self.out(name))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|entry| {
                        let bytes = std::fs::read(entry.path()).ok()?;
                        Some((entry.file_name().to_string_lossy().into_owned(), bytes))
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }

    fn out(&self, name: &str) -> PathBuf {
        Path::new(self.dir.path()).join("out").join(name)
    }
}
