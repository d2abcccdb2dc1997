//! The real `lxc` (Debian's lxd-client), with no LXD daemon: for
//! simplestreams remotes it lists, inspects and exports images by itself.
//! Its configuration (`config.yml` with the test's remotes, pinned
//! certificates in `servercerts/`) is a folder of the sandbox's own
//! (`LXD_CONF`), its `HOME` is the sandbox, and its environment is
//! cleared but for `PATH`, so nothing of the user's LXD setup leaks in.
//!
//! An `http://` remote works only when written into `config.yml` (`lxc
//! remote add` refuses it for simplestreams). lxc then tries each image
//! file at `http://http://HOST/…` first, looking up a host named `http`;
//! with no DNS that fails at once and it goes on to the configured URL.

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

impl LxcOutput {
    /// Standard output as JSON (for `--format=json` runs); `Null` when it
    /// is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_default()
    }
}

/// A sandboxed `lxc`.
pub struct LxcSandbox {
    dir: tempfile::TempDir,
}

impl LxcSandbox {
    /// An `lxc` whose remotes are `remotes` (name, URL), all simplestreams,
    /// with `local` the default. With no remotes no `config.yml` is
    /// written, so lxc starts from its built-in defaults as on a fresh
    /// install (what `pkgproxyctl setup lxd-remote` meets).
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

    /// `lxc image list REMOTE: --format=json`: every image, containers
    /// and VMs, with its fingerprint, serial and aliases.
    pub fn list(&self, remote: &str) -> LxcOutput {
        self.run(&["image", "list", &format!("{remote}:"), "--format=json"])
    }

    /// `lxc image export IMAGE` (`REMOTE:ALIAS`, the container image) into
    /// the sandbox's folder `name`.
    pub fn export(&self, image: &str, name: &str) -> LxcOutput {
        self.export_with(&[], image, name)
    }

    /// `lxc image export --vm IMAGE`: the VM image (metadata and disk).
    pub fn export_vm(&self, image: &str, name: &str) -> LxcOutput {
        self.export_with(&["--vm"], image, name)
    }

    fn export_with(&self, flags: &[&str], image: &str, name: &str) -> LxcOutput {
        let target = self.out(name);
        std::fs::create_dir_all(&target).expect("the export folder");
        let target = format!("{}/", target.display());
        self.run(&[&["image", "export"], flags, &[image, &target]].concat())
    }

    /// The files `export` wrote into folder `name` (named after the
    /// items' paths), by name, sorted.
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
