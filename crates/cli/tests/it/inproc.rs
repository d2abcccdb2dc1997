//! The in-process tier: `pkgproxy_server::run` in the test's own runtime,
//! on `127.0.0.1:0`, with a clock the test may move (mini-redis's
//! `start_server`). For request-path tests: no process to spawn, and time
//! that a test controls, across a clean restart and a reload too. `kill -9`
//! and the command line's own flags keep the binary
//! ([`pkgproxy_testkit::Daemon`]).

use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use pkgproxy_cache::ManualClock;
use pkgproxy_control::{ControlClient, Info};
use pkgproxy_server::config::{ConfigFile, Overrides};
use pkgproxy_server::{Listeners, Settings};
use tokio::sync::oneshot;

/// A server running in this process.
pub struct Server {
    dir: tempfile::TempDir,
    /// The configuration file's text: what a reload reads.
    config: Arc<Mutex<String>>,
    proxy_addr: String,
    stats: ControlClient,
    admin: ControlClient,
    clock: Arc<ManualClock>,
    running: Option<Running>,
}

/// A run of the server: what stops it, and its end.
struct Running {
    stop: oneshot::Sender<()>,
    ended: tokio::task::JoinHandle<()>,
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

    /// Serves with `config`, its clock showing `now` (times a fake
    /// upstream writes, as publish times, are then as old as the test
    /// says).
    pub async fn start_at(config: Option<&str>, now: SystemTime) -> Server {
        Server::start_on_at(Server::bind(), config, now).await
    }

    /// Serves on `proxy` (from [`Server::bind`]) with `config`.
    pub async fn start_on(proxy: std::net::TcpListener, config: Option<&str>) -> Server {
        Server::start_on_at(proxy, config, SystemTime::now()).await
    }

    async fn start_on_at(proxy: std::net::TcpListener, config: Option<&str>, now: SystemTime) -> Server {
        let dir = tempfile::Builder::new().prefix("pkgproxy-inproc").tempdir().expect("a temporary folder");
        let config = Arc::new(Mutex::new(config.unwrap_or_default().to_owned()));
        let clock = Arc::new(ManualClock::new(now));
        let proxy_addr = proxy.local_addr().expect("its address").to_string();
        let running = serve(dir.path(), &config, &clock, proxy, &Overrides::default());
        let stats = ControlClient::new(dir.path().join("stats.sock"));
        let admin = ControlClient::new(dir.path().join("admin.sock"));
        let server = Server { dir, config, proxy_addr, stats, admin, clock, running: Some(running) };
        server.until_serving().await;
        server
    }

    /// Stops the server as a clean stop does (what it writes then is
    /// written), and starts it again on the same cache, configuration,
    /// clock and address, with `overrides` (what the command line's flags
    /// set).
    pub async fn restart_with(&mut self, overrides: &Overrides) {
        if let Some(Running { stop, ended }) = self.running.take() {
            let _ = stop.send(());
            ended.await.expect("the server to stop cleanly");
        }
        let proxy = std::net::TcpListener::bind(&self.proxy_addr).expect("the same address again");
        proxy.set_nonblocking(true).expect("a non-blocking listener");
        self.running = Some(serve(self.dir.path(), &self.config, &self.clock, proxy, overrides));
        self.until_serving().await;
    }

    /// Replaces the configuration file's text with `config` and has the
    /// server read it again, as `pkgproxyctl reload` does.
    pub async fn reload_with(&self, config: &str) {
        *self.config.lock() = config.to_owned();
        let reloaded: serde_json::Value = self
            .admin
            .json(http::Method::POST, pkgproxy_control::RELOAD_PATH, None)
            .await
            .expect("the configuration reloaded");
        assert_eq!(reloaded["reloaded"], true, "{reloaded}");
    }

    /// Reloads with `config` as the configuration file's text, as
    /// `pkgproxyctl reload` does after the file changed: `Err` is why the
    /// server refused it (the one in use stays).
    pub async fn reconfigure(&self, config: &str) -> Result<(), String> {
        *self.config.lock() = config.to_owned();
        let reloaded: Result<serde_json::Value, _> =
            self.admin.json(http::Method::POST, pkgproxy_control::RELOAD_PATH, None).await;
        reloaded.map(|_| ()).map_err(|error| error.to_string())
    }

    async fn until_serving(&self) {
        pkgproxy_testkit::eventually("the server to serve", || async { self.stats.info().await.ok() }).await;
    }

    /// The stats socket's path.
    pub fn stats_socket(&self) -> std::path::PathBuf {
        self.dir.path().join("stats.sock")
    }

    /// The admin socket's path.
    pub fn admin_socket(&self) -> std::path::PathBuf {
        self.dir.path().join("admin.sock")
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

/// `overrides`, keeping no free space on the cache's disk unless the test
/// says how much: the test machine's disk, short of free space, must not
/// evict what a test cached (5 % of a large disk is many gigabytes).
fn kept_free(file: &ConfigFile, overrides: &Overrides) -> Overrides {
    let mut overrides = overrides.clone();
    if overrides.cache_min_free.is_none() && file.cache.min_free.is_none() {
        overrides.cache_min_free = Some("0".to_string());
    }
    overrides
}

/// Runs the server on the cache in `dir` with `config`, `clock` and
/// `overrides`, its sockets in `dir`, until its stop is sent.
fn serve(
    dir: &std::path::Path,
    config: &Arc<Mutex<String>>,
    clock: &Arc<ManualClock>,
    proxy: std::net::TcpListener,
    overrides: &Overrides,
) -> Running {
    let read = {
        let (config, cache, overrides) = (Arc::clone(config), dir.join("cache"), overrides.clone());
        move || {
            let text = config.lock().clone();
            let file = ConfigFile::parse(&text).map_err(|error| error.to_string())?;
            Settings::new(cache.clone(), &file, &kept_free(&file, &overrides)).map_err(|error| error.to_string())
        }
    };
    let mut settings = read().expect("valid settings");
    settings.clock = clock.clone();
    settings.reload.reread = Some(Arc::new(read));
    settings.proxy_threads = 2;
    let (stats_path, admin_path) = (dir.join("stats.sock"), dir.join("admin.sock"));
    for path in [&stats_path, &admin_path] {
        // A socket left by the run before.
        let _ = std::fs::remove_file(path);
    }
    let listeners = Listeners {
        proxy,
        stats: tokio::net::UnixListener::bind(&stats_path).expect("bind the stats socket"),
        admin: tokio::net::UnixListener::bind(&admin_path).expect("bind the admin socket"),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let ended = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(error) = pkgproxy_server::run(settings, listeners, shutdown, |_| {}).await {
            panic!("the server stopped: {error}");
        }
    });
    Running { stop, ended }
}
