//! A real `containerd` (Debian's containerd package) of the test's own:
//! its root, state and socket in a temporary folder, the CRI plugin off,
//! no TCP listener, and a `hosts.toml` per registry sending pulls to a
//! mirror (the way a node using pkgproxy is set up), driven with `ctr
//! content fetch`. containerd needs root.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running containerd. Dropping it stops it.
pub struct Containerd {
    dir: tempfile::TempDir,
    child: Child,
}

/// What a `ctr` run did.
#[derive(Debug)]
pub struct CtrOutput {
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output and error.
    pub output: String,
}

impl Containerd {
    /// Starts containerd, pulling `docker.io` and `ghcr.io` images, and
    /// any other registry's (`_default`, as `pkgproxyctl setup containerd`
    /// writes it), through the mirror at `mirror` (`HOST:PORT`), with the
    /// registries' own addresses a closed port (a fallback never leaves
    /// the machine).
    pub async fn start(mirror: &str) -> Containerd {
        let dir = tempfile::tempdir().expect("temporary folder");
        let root = dir.path();
        let config = format!(
            "version = 2\nroot = \"{r}/root\"\nstate = \"{r}/state\"\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \"{r}/containerd.sock\"\n[ttrpc]\n  address = \"{r}/ttrpc.sock\"\n[metrics]\n  address = \"\"\n",
            r = root.display()
        );
        std::fs::write(root.join("config.toml"), config).expect("config");
        for registry in ["docker.io", "ghcr.io", "_default"] {
            let hosts = root.join("certs.d").join(registry);
            std::fs::create_dir_all(&hosts).expect("certs.d");
            let toml = format!("server = \"http://127.0.0.1:9\"\n[host.\"http://{mirror}\"]\n  capabilities = [\"pull\", \"resolve\"]\n");
            std::fs::write(hosts.join("hosts.toml"), toml).expect("hosts.toml");
        }
        let child = Command::new("containerd")
            .arg("--config")
            .arg(root.join("config.toml"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.join("containerd.log")).expect("log"))
            .spawn()
            .expect("containerd (Debian's containerd package) runs");
        let containerd = Containerd { dir, child };
        let socket = containerd.socket();
        for _ in 0..200 {
            if socket.exists() {
                return containerd;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "containerd did not start: {}",
            std::fs::read_to_string(containerd.dir.path().join("containerd.log")).unwrap_or_default()
        );
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("containerd.sock")
    }

    /// `ctr content fetch IMAGE` through the mirror.
    pub fn fetch(&self, image: &str) -> CtrOutput {
        self.fetch_as(image, None)
    }

    /// `ctr content fetch [--user USER:PASSWORD] IMAGE` through the mirror:
    /// containerd answers a registry's challenge with the account's
    /// credentials.
    pub fn fetch_as(&self, image: &str, user: Option<&str>) -> CtrOutput {
        let output = Command::new("ctr")
            .arg("--address")
            .arg(self.socket())
            .args(["content", "fetch", "--hosts-dir"])
            .arg(self.dir.path().join("certs.d"))
            .args(user.iter().flat_map(|user| ["--user", user]))
            .arg(image)
            .output()
            .expect("ctr runs");
        CtrOutput {
            success: output.status.success(),
            output: format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
