//! The real `skopeo` (Debian's skopeo package), pulling through a mirror:
//! a `registries.conf` whose registries' own locations are a closed port
//! on 127.0.0.1 (so a fallback never leaves the machine) and whose mirror
//! is the address the test gives, for Docker Hub at the root and for other
//! registries under a path prefix.

use std::path::PathBuf;
use std::process::Command;

/// What a `skopeo` run did.
#[derive(Debug)]
pub struct SkopeoOutput {
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// A sandboxed `skopeo` whose mirror is pkgproxy.
pub struct SkopeoSandbox {
    dir: tempfile::TempDir,
}

impl SkopeoSandbox {
    /// A `skopeo` pulling `docker.io`, `ghcr.io` and `quay.io` images
    /// through the mirror at `mirror` (`HOST:PORT`).
    pub fn new(mirror: &str) -> SkopeoSandbox {
        let dir = tempfile::tempdir().expect("temporary folder");
        let mut conf = String::from("unqualified-search-registries = []\n");
        for (registry, prefix) in [("docker.io", ""), ("ghcr.io", "/ghcr.io"), ("quay.io", "/quay.io")] {
            conf.push_str(&format!(
                "[[registry]]\nprefix = \"{registry}\"\nlocation = \"127.0.0.1:9\"\ninsecure = true\n[[registry.mirror]]\nlocation = \"{mirror}{prefix}\"\ninsecure = true\n"
            ));
        }
        std::fs::write(dir.path().join("registries.conf"), conf).expect("registries.conf");
        SkopeoSandbox { dir }
    }

    /// The folder of the OCI layout `name` that `copy` writes.
    pub fn layout(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `skopeo copy docker://IMAGE oci:LAYOUT:latest`.
    pub fn copy(&self, image: &str, layout: &str) -> SkopeoOutput {
        let destination = format!("oci:{}:latest", self.layout(layout).display());
        self.run(&["copy", &format!("docker://{image}"), &destination])
    }

    /// `skopeo ARGS` with the sandbox's configuration.
    pub fn run(&self, args: &[&str]) -> SkopeoOutput {
        let conf = self.dir.path().join("registries.conf");
        let output = Command::new("skopeo")
            .arg("--insecure-policy")
            .arg("--registries-conf")
            .arg(&conf)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("TMPDIR", self.dir.path())
            .output()
            .expect("skopeo (Debian's skopeo package) runs");
        SkopeoOutput {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}
