//! What the end-to-end tests share: the daemon binary, the shared test
//! repository and an origin serving it, and configuration snippets.

use std::path::Path;

use pkgproxy_control::Info;
use pkgproxy_metrics::UpstreamCounter;

use crate::inproc::Server;
use pkgproxy_testkit::{AptRepo, Daemon, Origin};

/// The daemon under test.
pub const PKGPROXY: &str = env!("CARGO_BIN_EXE_pkgproxy");

/// Runs `pkgproxyctl ARGS` against `daemon`'s sockets.
pub fn pkgproxyctl(daemon: &Daemon, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(args)
        .arg("-admin-socket-path")
        .arg(daemon.admin_socket())
        .arg("-stats-socket-path")
        .arg(daemon.stats_socket())
        .output()
        .expect("pkgproxyctl runs")
}

/// An `[[apt.archive]]` table for `name` with `mirrors`.
pub fn archive(name: &str, mirrors: &[String]) -> String {
    let quoted: Vec<String> = mirrors.iter().map(|m| format!("{m:?}")).collect();
    format!("[[apt.archive]]\nname = {name:?}\nmirrors = [{}]\n", quoted.join(", "))
}

/// `[server] revalidate_floor` as documented: a client's `max-age=0`
/// within it of a revalidation is answered by that revalidation.
pub const REVALIDATE_FLOOR: std::time::Duration = std::time::Duration::from_secs(10);

/// `config` with every client's `max-age=0` or `no-cache` honoured as it
/// comes (`[server] revalidate_floor = "0s"`): for a daemon, whose clock a
/// test cannot move, in tests of what a revalidation does.
pub fn revalidating_at_once(config: &str) -> String {
    format!("{config}\n[server]\nrevalidate_floor = \"0s\"\n")
}

/// The shared repository served by a fresh origin, and a daemon that knows
/// the origin as archive `local`.
pub async fn origin_and_daemon() -> (&'static AptRepo, Origin, Daemon) {
    origin_and_daemon_with(|config| config).await
}

/// [`origin_and_daemon`], honouring every client's `max-age=0` as it comes
/// ([`revalidating_at_once`]).
pub async fn origin_and_revalidating_daemon() -> (&'static AptRepo, Origin, Daemon) {
    origin_and_daemon_with(|config| revalidating_at_once(&config)).await
}

async fn origin_and_daemon_with(configure: impl Fn(String) -> String) -> (&'static AptRepo, Origin, Daemon) {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let config = configure(archive("local", &[format!("{}/debian", origin.url())]));
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    (repo, origin, daemon)
}

/// The shared repository served by a fresh origin, and a server in this
/// process that knows the origin as archive `local`.
pub async fn origin_and_server() -> (&'static AptRepo, Origin, Server) {
    let repo = AptRepo::shared_default();
    let origin = Origin::serve(repo.root()).await;
    let server = Server::start(Some(&archive("local", &[format!("{}/debian", origin.url())]))).await;
    (repo, origin, server)
}

/// A pkgproxy whose state a test reads: the daemon binary or a server in
/// this process.
pub trait Inspected {
    /// `/pkgproxy/v1/info`.
    async fn info(&self) -> Info;
}

impl Inspected for Daemon {
    async fn info(&self) -> Info {
        Daemon::info(self).await
    }
}

impl Inspected for Server {
    async fn info(&self) -> Info {
        Server::info(self).await
    }
}

/// The counters of the one way out, from `/pkgproxy/v1/info`.
pub async fn upstream_counts(daemon: &Daemon) -> (u64, u64) {
    let upstream = daemon.info().await.upstream;
    (upstream.get(UpstreamCounter::Requests), upstream.get(UpstreamCounter::Connections))
}

/// Hex SHA-256 of a file.
pub fn sha256_file(path: &std::path::Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).expect("read file")))
}

/// Hex SHA-256 of bytes.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The bytes the cache takes on disk: its blobs, and every file beside
/// them (its index, the sides' indexes).
pub fn on_disk(cache: &Path) -> u64 {
    fn walk(path: &Path) -> u64 {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                std::fs::read_dir(path).map(|dir| dir.flatten().map(|e| walk(&e.path())).sum()).unwrap_or(0)
            }
            Ok(meta) => meta.len(),
            Err(_) => 0,
        }
    }
    let beside = std::fs::read_dir(cache).map(|dir| {
        dir.flatten()
            .filter_map(|entry| entry.metadata().ok())
            .filter(|meta| meta.is_file())
            .map(|meta| meta.len())
            .sum()
    });
    walk(&cache.join("blobs")) + beside.unwrap_or(0)
}
