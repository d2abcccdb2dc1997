//! The `pkgproxy` daemon's command line: flags (with one dash or two), their
//! `PKGPROXY_*` variables, the configuration file, the listening sockets,
//! logging and signals. A bad value stops the daemon before it serves,
//! with a message naming the flag or the variable it came from.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use pkgproxy_server::access_log::Target as AccessLogTarget;
use pkgproxy_server::config::{ConfigFile, Overrides, Persistence, EXAMPLE};
use pkgproxy_server::{Listeners, Settings};
use pkgproxy_upstream::offline::auto::Trigger;
use pkgproxy_upstream::offline::Mode;
use tokio::net::UnixListener;

use crate::paths;

/// What pkgproxy is, in one sentence naming every side's clients (the
/// help's first line and the manual page's NAME).
fn about() -> String {
    format!(
        "A caching proxy for package managers and images: {} fetch each package, module or image through it \
         once, checked, and get it from the cache from then on, also with the network gone.",
        pkgproxy_sides::every_client()
    )
}

/// What the short and the long help close with.
fn after_help_common() -> String {
    let clients: Vec<&str> = pkgproxy_sides::setup_clients().map(|client| client.name).collect();
    format!(
        "Every flag can also be given in the environment as PKGPROXY_<NAME> (PKGPROXY_ADDR, PKGPROXY_CACHE_DIR, \
         ...); a flag wins over its variable.

Point a client at it, on the client: pkgproxyctl setup CLIENT --addr HOST:3142
({}).
The status page, http://HOST:3142/, shows the same lines and what pkgproxy does.",
        clients.join(", ")
    )
}

/// The long help's closing text: the short one, then the configuration
/// file's every key, indented.
fn after_long_help() -> String {
    let example: Vec<String> = EXAMPLE.lines().map(|line| format!("    {line}").trim_end().to_string()).collect();
    format!(
        "{}\n\nThe configuration file (TOML, optional; /etc/pkgproxy/pkgproxy.toml when there is one) \
         holds what flags cannot say well. Every key, with its default or a typical value:\n\n{}",
        after_help_common(),
        example.join("\n")
    )
}

/// The short help's closing text: pointing at the long one.
fn after_help() -> String {
    format!("{}\n\npkgproxy --help (and pkgproxy(8)) shows every key of the configuration file.", after_help_common())
}

/// The daemon's flags.
// The doc comments are the help a user reads, in its words ("[HOST]:PORT"),
// not links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, Parser)]
#[command(name = "pkgproxy", version)]
struct Flags {
    /// Address to listen on for proxy requests: [HOST]:PORT, HOST an IP address or
    /// `localhost`; `:PORT` listens on every interface.
    #[arg(long, env = "PKGPROXY_ADDR", default_value = ":3142", value_name = "[HOST]:PORT")]
    addr: String,

    /// Cache directory. Default: $CACHE_DIRECTORY if set, /var/cache/pkgproxy as root,
    /// else the user's cache folder + /pkgproxy.
    #[arg(long, env = "PKGPROXY_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,

    /// Read-only control socket (GET /pkgproxy/v1/info). Default: stats.sock in
    /// $RUNTIME_DIRECTORY, /run/pkgproxy as root, else the user's runtime folder.
    #[arg(long, env = "PKGPROXY_STATS_SOCKET_PATH", value_name = "PATH")]
    stats_socket_path: Option<PathBuf>,

    /// Read-write control socket. Default: admin.sock beside the stats socket's default.
    #[arg(long, env = "PKGPROXY_ADMIN_SOCKET_PATH", value_name = "PATH")]
    admin_socket_path: Option<PathBuf>,

    /// TOML configuration file (see below). Default: pkgproxy.toml in
    /// $CREDENTIALS_DIRECTORY or $CONFIGURATION_DIRECTORY, else, as root,
    /// /etc/pkgproxy/pkgproxy.toml, when there is one.
    #[arg(long, env = "PKGPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// What is kept that is not cache: the listener's TLS certificate, which
    /// clients pin. Default: $STATE_DIRECTORY if set, /var/lib/pkgproxy as root,
    /// else the user's state folder + /pkgproxy.
    #[arg(long, env = "PKGPROXY_STATE_DIR", value_name = "DIR")]
    state_dir: Option<PathBuf>,

    /// Log level: error, warn, info, debug or trace, or a tracing filter such as
    /// `info,pkgproxy_cache=debug`. Default: info, or $RUST_LOG when set.
    #[arg(long, env = "PKGPROXY_LOG_LEVEL", value_name = "LEVEL")]
    log_level: Option<String>,

    /// The offline mode at start: online (ask upstream as needed; the default),
    /// offline (serve only what is cached, send nothing upstream) or store-overloaded
    /// (leave an upstream that shows trouble alone for a while). Changed at run time
    /// with `pkgproxyctl offline MODE`.
    #[arg(long, env = "PKGPROXY_OFFLINE_MODE", value_name = "MODE")]
    offline_mode: Option<String>,

    /// Start offline: `--offline` alone is `--offline-mode offline`; `--offline false`
    /// (PKGPROXY_OFFLINE=0) leaves the mode to --offline-mode.
    #[arg(long, env = "PKGPROXY_OFFLINE", value_name = "true|false", num_args = 0..=1, default_missing_value = "true")]
    offline: Option<String>,

    /// Put offline mode in effect while the host is offline, over the configured mode:
    /// network (no usable default route; the default on Linux), airplane-mode (at least
    /// one radio, none unblocked) or off. A change must hold for 5 s.
    #[arg(long, env = "PKGPROXY_AUTO_OFFLINE", value_name = "TRIGGER")]
    auto_offline: Option<String>,

    /// How long apt's dists/ files fetched by name (InRelease, Packages.xz, ...) are
    /// served without revalidation, e.g. 5m, 30s, 0s. Default: 5m.
    #[arg(long, env = "PKGPROXY_APT_INDEX_TTL", value_name = "DURATION")]
    apt_index_ttl: Option<String>,

    /// The most the cache holds, e.g. 50GiB; the least recently used entries are
    /// evicted beyond it (over [cache] max_size). Default: unlimited.
    #[arg(long, env = "PKGPROXY_CACHE_MAX_SIZE", value_name = "SIZE")]
    cache_max_size: Option<String>,

    /// Free space kept on the cache's disk, e.g. 5% or 10GiB: below it the least
    /// recently used entries are evicted (over [cache] min_free). Default: 5%.
    #[arg(long, env = "PKGPROXY_CACHE_MIN_FREE", value_name = "SIZE|SHARE")]
    cache_min_free: Option<String>,

    /// Log lines as text (under systemd, where JOURNAL_STREAM is set, without a
    /// timestamp: the journal adds its own) or as json, one object a line.
    #[arg(long, env = "PKGPROXY_LOG_FORMAT", value_name = "FORMAT", default_value = "text")]
    log_format: String,

    /// On SIGTERM or SIGINT, how long requests in flight and their downloads may
    /// take to finish before pkgproxy exits anyway, e.g. 30s. A second signal
    /// exits at once. Default: 30s.
    #[arg(long, env = "PKGPROXY_SHUTDOWN_GRACE", value_name = "DURATION")]
    shutdown_grace: Option<String>,

    /// Write one JSON object per proxy request to PATH (appended; reopened on
    /// SIGHUP, for log rotation), or to stderr with `-`: time, client, method,
    /// side, uri, cache (hit, miss, revalidated, stale, refused, passed,
    /// local), status, bytes, duration_ms, upstream. Default: off.
    #[arg(long, env = "PKGPROXY_ACCESS_LOG", value_name = "PATH")]
    access_log: Option<PathBuf>,
}

/// Where a flag's value came from, for error messages.
fn source_of(matches: &ArgMatches, id: &str, env: &str) -> String {
    let flag = format!("--{}", id.replace('_', "-"));
    match matches.value_source(id) {
        Some(ValueSource::EnvVariable) => format!("{flag} (from ${env})"),
        _ => flag,
    }
}

/// The daemon's configuration, validated.
struct Daemon {
    addr: SocketAddr,
    log_json: bool,
    stats_socket: PathBuf,
    admin_socket: PathBuf,
    log_filter: tracing_subscriber::EnvFilter,
    settings: Settings,
    /// The configuration file read, if any.
    config: Option<PathBuf>,
    cache_dir: PathBuf,
    state_dir: PathBuf,
}

/// The daemon's command line, as parsed and as documented (`--help`, the
/// manual page).
pub fn command() -> clap::Command {
    Flags::command().about(about()).long_about(None).after_help(after_help()).after_long_help(after_long_help())
}

fn parse(args: Vec<std::ffi::OsString>) -> anyhow::Result<Daemon> {
    let matches = command().get_matches_from(args);
    let flags = Flags::from_arg_matches(&matches).expect("clap checked the flags");

    let addr = parse_addr(&flags.addr).with_context(|| source_of(&matches, "addr", "PKGPROXY_ADDR"))?;
    let log_filter = log_filter(flags.log_level.as_deref())
        .with_context(|| source_of(&matches, "log_level", "PKGPROXY_LOG_LEVEL"))?;
    let log_json = match flags.log_format.as_str() {
        "text" => false,
        "json" => true,
        other => Err(anyhow::anyhow!("{other:?} is not a log format (text, json)"))
            .with_context(|| source_of(&matches, "log_format", "PKGPROXY_LOG_FORMAT"))?,
    };
    let apt_index_ttl = duration(flags.apt_index_ttl.as_deref())
        .with_context(|| source_of(&matches, "apt_index_ttl", "PKGPROXY_APT_INDEX_TTL"))?;
    let shutdown_grace = duration(flags.shutdown_grace.as_deref())
        .with_context(|| source_of(&matches, "shutdown_grace", "PKGPROXY_SHUTDOWN_GRACE"))?;
    let config = match flags.config.clone() {
        Some(path) => Some(path),
        None => paths::default_config(),
    };
    let file = match &config {
        Some(path) => ConfigFile::load(path).with_context(|| source_of(&matches, "config", "PKGPROXY_CONFIG"))?,
        None => ConfigFile::default(),
    };
    let cache_dir = non_empty(flags.cache_dir, &matches, "cache_dir", "PKGPROXY_CACHE_DIR")?
        .unwrap_or_else(paths::default_cache_dir);
    let stats_socket = non_empty(flags.stats_socket_path, &matches, "stats_socket_path", "PKGPROXY_STATS_SOCKET_PATH")?
        .unwrap_or_else(paths::default_stats_socket);
    let admin_socket = non_empty(flags.admin_socket_path, &matches, "admin_socket_path", "PKGPROXY_ADMIN_SOCKET_PATH")?
        .unwrap_or_else(paths::default_admin_socket);
    if stats_socket == admin_socket {
        bail!("--stats-socket-path and --admin-socket-path must differ (both are {})", stats_socket.display());
    }
    let offline_mode = start_mode(&matches, flags.offline_mode.as_deref(), flags.offline.as_deref())?;
    let auto_offline = match flags.auto_offline.as_deref() {
        Some(value) => Trigger::parse(value)
            .map_err(anyhow::Error::msg)
            .with_context(|| source_of(&matches, "auto_offline", "PKGPROXY_AUTO_OFFLINE"))?,
        None => Trigger::platform_default(),
    };
    let cache_max_size = flags.cache_max_size.clone();
    let cache_min_free = flags.cache_min_free.clone();
    let state_dir = non_empty(flags.state_dir, &matches, "state_dir", "PKGPROXY_STATE_DIR")?
        .unwrap_or_else(paths::default_state_dir);
    let overrides = Overrides {
        offline_mode,
        persistence: persistence(),
        auto_offline,
        cache_max_size,
        cache_min_free,
        state_dir: Some(state_dir.clone()),
    };
    let mut settings =
        settings_from(cache_dir.clone(), &file, &overrides, apt_index_ttl).with_context(|| match &config {
            Some(path) => format!("configuration file {}", path.display()),
            None => "configuration".to_string(),
        })?;
    let reread = reread(config.clone(), cache_dir.clone(), overrides, apt_index_ttl);
    settings.reload.reread = Some(std::sync::Arc::new(reread));
    if let Some(grace) = shutdown_grace {
        settings.shutdown_grace = grace;
    }
    settings.access_log = non_empty(flags.access_log, &matches, "access_log", "PKGPROXY_ACCESS_LOG")?.map(|path| {
        match path.as_os_str() == "-" {
            true => AccessLogTarget::Stderr,
            false => AccessLogTarget::File(path),
        }
    });
    Ok(Daemon { addr, log_json, stats_socket, admin_socket, log_filter, settings, config, cache_dir, state_dir })
}

/// The settings of `file` and the flags, with the client connection cap
/// drawn from this process's file limit where the file sets none.
/// `--apt-index-ttl`, the original pkgproxy's flag, wins over the file's
/// `[apt] index_ttl`.
fn settings_from(
    cache_dir: PathBuf,
    file: &ConfigFile,
    overrides: &Overrides,
    apt_index_ttl: Option<std::time::Duration>,
) -> Result<Settings, pkgproxy_server::config::SettingsError> {
    let mut file = file.clone();
    if let Some(ttl) = apt_index_ttl {
        let ttl = humantime::format_duration(ttl).to_string();
        file.sides.set(pkgproxy_sides::SideId::Apt, "index_ttl", &ttl);
    }
    let mut settings = Settings::new(cache_dir, &file, overrides)?;
    if file.server.max_connections.is_none() {
        settings.clients.max_connections =
            pkgproxy_server::config::clients::connections_for_file_limit(open_file_limit());
    }
    Ok(settings)
}

/// The soft limit of open files (raised to the hard one at start).
///
/// No limit at all reads as `u64::MAX`, as `RLIM_INFINITY` is.
fn open_file_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Reads the settings again as they were read at start, from the same
/// flags and the file at `config` as it is now (`SIGHUP`, `pkgproxyctl
/// reload`).
fn reread(
    config: Option<PathBuf>,
    cache_dir: PathBuf,
    overrides: Overrides,
    apt_index_ttl: Option<std::time::Duration>,
) -> impl Fn() -> Result<Settings, String> + Send + Sync + 'static {
    move || {
        let file = match &config {
            Some(path) => ConfigFile::load(path).map_err(|error| crate::report::said(&error.into()))?,
            None => ConfigFile::default(),
        };
        settings_from(cache_dir.clone(), &file, &overrides, apt_index_ttl).map_err(|error| match &config {
            Some(path) => format!("configuration file {}: {error}", path.display()),
            None => error.to_string(),
        })
    }
}

fn duration(value: Option<&str>) -> anyhow::Result<Option<std::time::Duration>> {
    value
        .map(|v| humantime::parse_duration(v).with_context(|| format!("{v:?} is not a duration (e.g. 5m, 30s)")))
        .transpose()
}

/// pkgproxy's own snap keeps the offline mode in its settings; a snap that
/// merely bundles pkgproxy has other options and is left alone.
fn persistence() -> Persistence {
    match std::env::var("SNAP_NAME") {
        Ok(name) if name == "pkgproxy" => Persistence::Snap,
        _ => Persistence::None,
    }
}

/// The start mode from `--offline-mode` and `--offline`. When both are given
/// they must name the same mode: neither the order of the flags nor the
/// order the environment is read in may decide.
fn start_mode(matches: &ArgMatches, mode: Option<&str>, offline: Option<&str>) -> anyhow::Result<Option<Mode>> {
    let mode_source = || source_of(matches, "offline_mode", "PKGPROXY_OFFLINE_MODE");
    let offline_source = || source_of(matches, "offline", "PKGPROXY_OFFLINE");
    let mode = mode.map(|m| m.parse::<Mode>()).transpose().with_context(mode_source)?;
    let offline = offline.map(parse_bool).transpose().with_context(offline_source)?;
    match (mode, offline) {
        (Some(mode), Some(true)) if mode != Mode::Offline => {
            bail!(
                "{} says {} but {} says offline: give one, or make them agree",
                mode_source(),
                mode.word(),
                offline_source()
            )
        }
        (Some(mode), _) => Ok(Some(mode)),
        (None, Some(true)) => Ok(Some(Mode::Offline)),
        (None, _) => Ok(None),
    }
}

fn parse_bool(value: &str) -> anyhow::Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => bail!("{value:?} is not true or false"),
    }
}

fn non_empty(value: Option<PathBuf>, matches: &ArgMatches, id: &str, env: &str) -> anyhow::Result<Option<PathBuf>> {
    match value {
        Some(path) if path.as_os_str().is_empty() => bail!("{}: must not be empty", source_of(matches, id, env)),
        other => Ok(other),
    }
}

/// Parses `--addr`: `:PORT` (every interface), `IP:PORT`, `[IPv6]:PORT` or
/// `localhost:PORT`.
fn parse_addr(value: &str) -> anyhow::Result<SocketAddr> {
    let (host, port) = value.rsplit_once(':').with_context(|| format!("{value:?} is not [HOST]:PORT"))?;
    let port: u16 = port.parse().with_context(|| format!("{port:?} in {value:?} is not a port number"))?;
    let ip = match host.trim_start_matches('[').trim_end_matches(']') {
        "" => Ipv6Addr::UNSPECIFIED.into(),
        "localhost" => Ipv4Addr::LOCALHOST.into(),
        ip => ip.parse().with_context(|| format!("{host:?} in {value:?} is not an IP address or localhost"))?,
    };
    Ok(SocketAddr::new(ip, port))
}

fn log_filter(level: Option<&str>) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    let text = match level {
        Some(level) => level.to_string(),
        None => std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| "info".to_string()),
    };
    let known = ["error", "warn", "info", "debug", "trace", "off"];
    let simple = !text.contains(['=', ',']);
    if simple && !known.contains(&text.to_ascii_lowercase().as_str()) {
        bail!("{text:?} is not a log level (error, warn, info, debug, trace)");
    }
    tracing_subscriber::EnvFilter::try_new(&text).with_context(|| format!("{text:?} is not a log filter"))
}

/// Connections waiting to be accepted. A burst of thousands (a CI fleet
/// starting) waits here: beyond it the kernel drops their SYN, and each
/// retries a second or three later (10,000 connections at once saw a
/// p99 of 1.8 s with 1,024). The kernel caps it at `net.core.somaxconn`.
const LISTEN_BACKLOG: i32 = 4096;

/// Binds the proxy listener; `[::]` listens on IPv4 too, falling back to
/// `0.0.0.0` where IPv6 is off.
fn bind_proxy(addr: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    let bind = |addr: SocketAddr| -> std::io::Result<std::net::TcpListener> {
        let domain = socket2::Domain::for_address(addr);
        let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
        if addr.is_ipv6() {
            socket.set_only_v6(false)?;
        }
        socket.set_reuse_address(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        Ok(socket.into())
    };
    let listener = match bind(addr) {
        Err(e) if addr.ip() == Ipv6Addr::UNSPECIFIED && e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            bind(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), addr.port()))
        }
        other => other,
    }
    .with_context(|| format!("cannot listen on {addr}"))?;
    Ok(listener)
}

/// Binds a control socket, replacing a stale socket file but never one a
/// running daemon still answers on.
fn bind_socket(path: &Path, mode: u32) -> anyhow::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            bail!("{} exists and is not a socket", path.display());
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!("{} is in use by another running pkgproxy", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("cannot remove stale socket {}", path.display()))?;
    }
    let listener = UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    Ok(listener)
}

/// Completes at the first SIGTERM or SIGINT; a second one exits the
/// process at once (nothing partial enters the cache either way: a
/// download is committed only whole).
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::warn!("a second stop signal: exiting now");
        std::process::exit(1);
    });
}

/// Tells the server of every `SIGHUP` (it reads its configuration again)
/// and every `SIGUSR1` (it reopens its access log).
fn forward_signals(reload: &pkgproxy_server::config::Reload) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    for (kind, name, notify) in
        [(SignalKind::hangup(), "SIGHUP", &reload.hangup), (SignalKind::user_defined1(), "SIGUSR1", &reload.reopen)]
    {
        let mut signals = signal(kind).with_context(|| format!("{name} handler"))?;
        let notify = std::sync::Arc::clone(notify);
        tokio::spawn(async move {
            while signals.recv().await.is_some() {
                notify.notify_one();
            }
        });
    }
    Ok(())
}

/// Says where the settings come from, and keeps the listener's certificate
/// where a cleared cache leaves it: one made in the cache folder by an
/// earlier version is moved to the state folder (LXD clients pin it).
fn settle_in(daemon: &Daemon) {
    match &daemon.config {
        Some(path) => tracing::info!(file = %path.display(), "configuration read"),
        None => tracing::info!("no configuration file: the defaults, and the flags"),
    }
    let (old, new) = (daemon.cache_dir.join("tls"), daemon.state_dir.join("tls"));
    if old == new || !old.join("cert.pem").is_file() || new.join("cert.pem").exists() {
        return;
    }
    match move_certificate(&old, &new) {
        Ok(()) => {
            tracing::info!(from = %old.display(), to = %new.display(), "moved the listener's TLS certificate out of the cache")
        }
        Err(error) => {
            tracing::warn!(from = %old.display(), to = %new.display(), %error, "the listener's TLS certificate stays in the cache folder")
        }
    }
}

/// Copies the certificate and key in `old` to `new` (the key readable by
/// its owner only), then removes them from `old`.
fn move_certificate(old: &Path, new: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(new)?;
    for (name, mode) in [("key.pem", 0o600), ("cert.pem", 0o644)] {
        std::fs::copy(old.join(name), new.join(name))?;
        std::fs::set_permissions(new.join(name), std::fs::Permissions::from_mode(mode))?;
    }
    for name in ["cert.pem", "key.pem"] {
        std::fs::remove_file(old.join(name))?;
    }
    let _ = std::fs::remove_dir(old);
    Ok(())
}

async fn serve(daemon: Daemon) -> anyhow::Result<()> {
    forward_signals(&daemon.settings.reload)?;
    settle_in(&daemon);
    let passed = crate::systemd::passed_sockets()?;
    if passed.proxy.is_some() {
        tracing::info!("listening on the proxy socket systemd passed; --addr is not bound");
    }
    // Socket files this process made, removed when it stops (never those
    // systemd holds).
    let mut made = Vec::new();
    let mut control = |passed: Option<std::os::unix::net::UnixListener>, path: &Path, mode, flag: &str| {
        let listener = match passed {
            Some(passed) => UnixListener::from_std(passed).with_context(|| flag.to_string())?,
            None => {
                made.push(path.to_path_buf());
                bind_socket(path, mode).with_context(|| flag.to_string())?
            }
        };
        anyhow::Ok(listener)
    };
    let listeners = Listeners {
        stats: control(passed.stats, &daemon.stats_socket, 0o666, "--stats-socket-path")?,
        admin: control(passed.admin, &daemon.admin_socket, 0o600, "--admin-socket-path")?,
        proxy: passed.proxy.map_or_else(|| bind_proxy(daemon.addr).context("--addr"), Ok)?,
    };
    let shutdown = async {
        shutdown_signal().await;
        crate::systemd::stopping();
    };
    let result = pkgproxy_server::run(daemon.settings, listeners, shutdown, crate::systemd::ready).await;
    for socket in made {
        let _ = std::fs::remove_file(socket);
    }
    Ok(result?)
}

/// One allocator arena per core, unless `MALLOC_ARENA_MAX` says otherwise.
/// glibc gives threads up to eight arenas per core, and each keeps what was
/// freed in it: the blocking threads that commit the index and open files
/// came to hold 10 to 12 MiB more than the async threads' own (41 MiB
/// against 30 at the small-hit benchmark, throughput unchanged).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, |cores| cores.get()).max(2);
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets an allocator parameter; called before
        // any thread is started. No safe wrapper exists (rustix has none).
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

/// Raises the soft limit of open files to the hard one: every client, every
/// upstream and every held blob handle is a descriptor, and the soft default
/// (often 1024) is a limit for interactive shells, not for daemons.
///
/// A refusal leaves the soft limit as it was: the daemon runs
/// with fewer descriptors rather than not at all.
fn raise_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    // `None` is no limit, above every number.
    let (soft, hard) = (limit.current.unwrap_or(u64::MAX), limit.maximum.unwrap_or(u64::MAX));
    if soft < hard {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum });
    }
}

/// Logs to stderr: JSON objects with `-log-format json`; text otherwise,
/// without a timestamp under systemd (the journal stamps each line).
fn init_logging(daemon: &Daemon) {
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt().with_env_filter(daemon.log_filter.clone()).with_writer(std::io::stderr);
    match (daemon.log_json, std::env::var_os("JOURNAL_STREAM").is_some()) {
        (true, _) => logs.json().init(),
        (false, true) => logs.without_time().with_ansi(false).init(),
        (false, false) => logs.with_ansi(ansi).init(),
    }
}

/// Runs the daemon; the exit code is non-zero when it could not start.
pub fn main() -> ExitCode {
    raise_file_limit();
    limit_malloc_arenas();
    let args = crate::args::normalise(std::env::args_os());
    let daemon = match parse(args) {
        Ok(daemon) => daemon,
        Err(error) => {
            eprintln!("pkgproxy: {}", crate::report::said(&error));
            return ExitCode::from(2);
        }
    };
    init_logging(&daemon);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("pkgproxy: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(daemon)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("pkgproxy: {}", crate::report::said(&error));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_addr(":3142").unwrap(), "[::]:3142".parse().unwrap());
        assert_eq!(parse_addr("127.0.0.1:0").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(parse_addr("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        assert_eq!(parse_addr("localhost:80").unwrap(), "127.0.0.1:80".parse().unwrap());
        assert!(parse_addr("3142").is_err());
        assert!(parse_addr(":99999").is_err());
        assert!(parse_addr("example.com:80").is_err());
    }

    #[test]
    fn the_configuration_example_in_the_help_is_read_as_written() {
        assert!(after_help().contains("pkgproxy --help"), "-h points at the long help");
        let help = after_long_help();
        let block: Vec<&str> = help
            .lines()
            .skip_while(|line| !line.starts_with("The configuration file"))
            .skip(2)
            .map(|line| line.strip_prefix("    ").unwrap_or(line))
            .collect();
        let file = ConfigFile::parse(&block.join("\n")).unwrap();
        let apt: pkgproxy_sides::apt::Options = file.sides.section(pkgproxy_sides::SideId::Apt).unwrap();
        assert_eq!(apt.archives.len(), 1, "{help}");
        assert_eq!(file.upstream.resolve.len(), 1, "{help}");
        assert_eq!(file.mirror["shadow"].max_inflight, Some(100), "{help}");
        let go: pkgproxy_sides::go::Options = file.sides.section(pkgproxy_sides::SideId::Go).unwrap();
        assert_eq!(go.sumdb.as_deref(), Some("sum.golang.org"), "{help}");
        assert!(file.cluster.is_some_and(|cluster| cluster.peer_secret.is_some()), "every key: {help}");
        let lxd: pkgproxy_sides::lxd::Options = file.sides.section(pkgproxy_sides::SideId::Lxd).unwrap();
        assert_eq!(lxd.remotes.len(), 1, "{help}");
    }

    #[test]
    fn the_configuration_reference_holds_every_key_as_the_help_does() {
        let reference = include_str!("../../../docs/configuration.md");
        assert!(reference.contains(EXAMPLE), "docs/configuration.md's every key is the example, as it is");
    }

    #[test]
    fn log_levels() {
        assert!(log_filter(Some("debug")).is_ok());
        assert!(log_filter(Some("info,pkgproxy_cache=debug")).is_ok());
        assert!(log_filter(Some("loud")).is_err());
    }
}
