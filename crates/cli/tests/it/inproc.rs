//! The in-process tier: `pkgproxy_server::run` in the test's own runtime,
//! on `127.0.0.1:0`, with a clock the test may move (mini-redis's
//! `start_server`). For request-path tests: no process to spawn, and time
//! that a test controls. Flags, `kill -9` and the real clients keep the
//! binary ([`pkgproxy_testkit::Daemon`]).

use std::sync::Arc;
use std::time::SystemTime;

use pkgproxy_cache::ManualClock;
use pkgproxy_control::{ControlClient, Info};
use pkgproxy_server::config::{ConfigFile, Overrides};
use pkgproxy_server::{Listeners, Settings};
use tokio::sync::oneshot;

/// A server running in this process.
pub struct Server {
    dir: tempfile::TempDir,
    proxy_addr: String,
    stats: ControlClient,
    admin: ControlClient,
    clock: Arc<ManualClock>,
    _stop: oneshot::Sender<()>,
}

impl Server {
    /// Serves with the configuration file `config` (its text, if any).
    pub async fn start(config: Option<&str>) -> Server {
        Server::start_on(Server::bind(), config).await
    }

    /// A proxy listener on `127.0.0.1:0`, bound now: its address can go into
    /// another server's configuration before this one starts on it.
    pub fn bind() -> std::net::TcpListener {
        let proxy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy listener");
        proxy.set_nonblocking(true).expect("a non-blocking listener");
        proxy
    }

    /// Serves on `proxy` (from [`Server::bind`]) with `config`.
    pub async fn start_on(proxy: std::net::TcpListener, config: Option<&str>) -> Server {
        let dir = tempfile::Builder::new().prefix("pkgproxy-inproc").tempdir().expect("a temporary folder");
        let file = ConfigFile::parse(config.unwrap_or_default()).expect("a valid configuration file");
        let overrides = Overrides::default();
        let mut settings = Settings::new(dir.path().join("cache"), &file, &overrides).expect("valid settings");
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        settings.clock = clock.clone();
        settings.proxy_threads = 2;
        let proxy_addr = proxy.local_addr().expect("its address").to_string();
        let (stats_path, admin_path) = (dir.path().join("stats.sock"), dir.path().join("admin.sock"));
        let listeners = Listeners {
            proxy,
            stats: tokio::net::UnixListener::bind(&stats_path).expect("bind the stats socket"),
            admin: tokio::net::UnixListener::bind(&admin_path).expect("bind the admin socket"),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(error) = pkgproxy_server::run(settings, listeners, shutdown, |_| {}).await {
                panic!("the server stopped: {error}");
            }
        });
        let (stats, admin) = (ControlClient::new(stats_path), ControlClient::new(admin_path));
        pkgproxy_testkit::eventually("the server to serve", || async { stats.info().await.ok() }).await;
        Server { dir, proxy_addr, stats, admin, clock, _stop: stop }
    }

    /// `host:port` of the proxy listener.
    pub fn proxy_addr(&self) -> &str {
        &self.proxy_addr
    }

    /// The cache's folder.
    pub fn cache_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("cache")
    }

    /// `/pkgproxy/v1/info`.
    pub async fn info(&self) -> Info {
        self.stats.info().await.expect("the stats socket answers")
    }

    /// A client of the admin socket.
    pub fn admin(&self) -> &ControlClient {
        &self.admin
    }

    /// The clock the server reads: move it instead of waiting.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }
}
