//! The daemon's settings: the raw configuration file, and the validated
//! [`Settings`] the server runs with. Flags and environment variables are the
//! command line's business; they arrive here already merged.

pub mod clients;
mod cluster;
mod file;
mod floor;
mod placement;
pub mod shadow;
mod size;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pkgproxy_cache::{Clock, SystemClock};
use pkgproxy_sides::SidesConfig;
use pkgproxy_upstream::offline::auto::Trigger;
use pkgproxy_upstream::offline::{Mode, Switch};
use tokio::sync::Notify;

use pkgproxy_upstream::proxy::{ProxyAddress, UpstreamProxy};
use pkgproxy_upstream::{AddressPolicy, Keepalive, Penalties, PoolSettings, Resolver, Timeouts, UpstreamConfig};

use file::UpstreamSection;
pub use file::{ConfigFile, FileError, ServerSection, ShadowSection, EXAMPLE};
pub use floor::{Floor, DEFAULT_REVALIDATE_FLOOR};
pub use shadow::{ShadowConfig, ShadowConfigError, Step};
pub use size::{parse_size, Size};

/// How a mode set at run time is kept across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Nothing keeps it: a restart starts in the mode the flags say.
    None,
    /// pkgproxy's own snap: the mode is its `offline-mode` setting, saved
    /// with `snapctl set`.
    Snap,
}

/// Everything the server needs to run, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the cache lives.
    pub cache_dir: PathBuf,
    /// Where what is not cache is kept (`-state-dir`; beside the cache by
    /// default): the traffic history the status page charts.
    pub state_dir: PathBuf,
    /// Every side's configuration.
    pub sides: SidesConfig,
    /// The way out.
    pub upstream: UpstreamConfig,
    /// Threads serving the proxy listener (one per core by default).
    pub proxy_threads: usize,
    /// How a mode set at run time is kept across restarts.
    pub persistence: Persistence,
    /// What puts offline mode in effect automatically.
    pub auto_offline: Trigger,
    /// The shadows: where copies of the traffic go (`[mirror.NAME]`).
    pub shadows: Vec<ShadowConfig>,
    /// The wall clock (the system's; tests inject their own).
    pub clock: Arc<dyn Clock>,
    /// Where the listener's TLS certificate comes from.
    pub tls: crate::tls::Source,
    /// The limits the cache keeps to.
    pub quota: pkgproxy_cache::Quota,
    /// How long requests in flight may take to finish once a stop is asked.
    pub shutdown_grace: std::time::Duration,
    /// Whether `/` shows the status page (and `/pkgproxy/v1/status` its JSON).
    pub status_page: bool,
    /// Whether `/metrics` is served on the proxy listener too.
    pub status_metrics: bool,
    /// Whether `/cache/` lists what the cache holds (and
    /// `/pkgproxy/v1/cache` its JSON).
    pub browse_page: bool,
    /// Where the access log goes (`-access-log`); none by default.
    pub access_log: Option<crate::access_log::Target>,
    /// How the configuration is read again (`SIGHUP`, `pkgproxyctl reload`).
    pub reload: Reload,
    /// Who may connect to the proxy listener, how often, for how long.
    pub clients: clients::ClientLimits,
    /// The shared tier this node publishes to and reads from, if any
    /// (`[cluster]`; read at start only).
    pub cluster: Option<pkgproxy_cluster::ClusterConfig>,
    /// How recent a revalidation answers a client asking for a fresh copy
    /// (`[server] revalidate_floor`).
    pub revalidate_floor: std::time::Duration,
    /// The keys whose signatures an import of a bundle trusts.
    pub trusted_keys: Vec<crate::signing::PublicKey>,
    /// The fleet's policy (`[policy]`, and the malicious-package records
    /// signed bundles brought); `None`: none.
    pub policy: Option<Arc<pkgproxy_policy::Policy>>,
    /// `[policy]` as written, for the policy made again when a bundle
    /// brings records.
    pub policy_options: Option<pkgproxy_policy::Options>,
}

/// Reads the settings again, from the same command line and file.
pub type Reread = Arc<dyn Fn() -> Result<Settings, String> + Send + Sync>;

/// How a running server is asked to reload.
#[derive(Clone, Default)]
pub struct Reload {
    /// Reads the settings again; without it (a server not started from a
    /// command line), reloading is refused.
    pub reread: Option<Reread>,
    /// Notified on `SIGHUP`.
    pub hangup: Arc<Notify>,
    /// Notified on `SIGUSR1`: the access log is reopened (log rotation),
    /// and nothing else.
    pub reopen: Arc<Notify>,
}

impl std::fmt::Debug for Reload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reload").field("reread", &self.reread.is_some()).finish()
    }
}

/// How long requests in flight may take to finish at a stop, by default.
pub const DEFAULT_SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Settings that cannot be used, naming the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A side's section is wrong.
    #[error("{0}")]
    Side(String),
    /// A `[upstream] resolve` entry is wrong.
    #[error("upstream.resolve entry {entry:?}: {reason}")]
    Resolve {
        /// The entry as written.
        entry: String,
        /// What is wrong with it, for people.
        reason: &'static str,
    },
    /// An `[upstream] trust` entry is not an http(s) URL with a host.
    #[error("upstream.trust entry {url:?}: {reason}")]
    Trust {
        /// The entry as written.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `[server] allow` entry is not a network.
    #[error("{0}")]
    Clients(#[from] clients::ClientsError),
    /// `[server]` names a TLS certificate without its key, or a key
    /// without its certificate.
    #[error("server.tls_cert and server.tls_key go together")]
    TlsPair,
    /// `[cache] max_size`, `min_free` or `max_object_size` (or its flag)
    /// is not a size.
    #[error("{key} {value:?}: {reason}")]
    CacheSize {
        /// The key, or the flag.
        key: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `[mirror.NAME]` is wrong.
    #[error("{0}")]
    Shadow(#[from] ShadowConfigError),
    /// `[upstream] proxy`, or a proxy variable, is not a proxy's URL.
    #[error("upstream proxy: {reason}")]
    Proxy {
        /// What is wrong with it.
        reason: String,
    },
    /// A `[policy]` key is wrong.
    #[error("{0}")]
    Policy(#[from] pkgproxy_policy::PolicyError),
    /// A `[bundles] trusted_keys` entry is not a public key.
    #[error("bundles.trusted_keys: {0}")]
    TrustedKey(String),
    /// `[cluster]` is incomplete.
    #[error("cluster.{key} {reason}")]
    Cluster {
        /// The key at fault.
        key: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A time limit of `[upstream]` is zero, or the penalties are inverted.
    #[error("upstream.{key}: {reason}")]
    Upstream {
        /// The key of `[upstream]` at fault.
        key: &'static str,
        /// What is wrong with its value.
        reason: &'static str,
    },
}

/// Values given on the command line or in the environment, which win over
/// the file.
#[derive(Debug, Clone)]
pub struct Overrides {
    /// `-offline-mode` / `-offline`: the mode at start.
    pub offline_mode: Option<Mode>,
    /// Where a run-time mode is saved (the snap's settings inside
    /// pkgproxy's own snap).
    pub persistence: Persistence,
    /// `-auto-offline`.
    pub auto_offline: Trigger,
    /// `-cache-max-size`, as written.
    pub cache_max_size: Option<String>,
    /// `-cache-min-free`, as written.
    pub cache_min_free: Option<String>,
    /// `-state-dir`: where what is not cache is kept (the listener's TLS
    /// certificate, which clients pin); `None`: beside the cache.
    pub state_dir: Option<PathBuf>,
}

/// A side's error, without the credentials a configured mirror's URL may
/// carry: the error is logged, and told on the admin socket.
impl From<pkgproxy_sides::SectionError> for SettingsError {
    fn from(error: pkgproxy_sides::SectionError) -> Self {
        SettingsError::Side(crate::redact::urls_in(&error.to_string()))
    }
}

/// Nothing overridden: the file's values, the mode saved nowhere, no
/// switch going offline by itself.
impl Default for Overrides {
    fn default() -> Self {
        Overrides {
            offline_mode: None,
            persistence: Persistence::None,
            auto_offline: Trigger::Off,
            cache_max_size: None,
            cache_min_free: None,
            state_dir: None,
        }
    }
}

impl Settings {
    /// Validates the file's contents, with `overrides` applied.
    pub fn new(cache_dir: PathBuf, file: &ConfigFile, overrides: &Overrides) -> Result<Self, SettingsError> {
        let mut resolver = Resolver::default();
        let mut policy = AddressPolicy::default();
        for entry in &file.upstream.resolve {
            let (host, port, address) = parse_resolve(entry)?;
            resolver.pin(&host, port, vec![address]);
            policy.trust(&host, port);
        }
        let mut sides = SidesConfig::new(&file.sides).map_err(|error| file.side_error(error))?;
        for url in &file.upstream.trust {
            policy
                .trust_url(url)
                .map_err(|error| SettingsError::Trust { url: url.clone(), reason: error.to_string() })?;
        }
        for url in sides.trusted_urls() {
            // Each was checked as a URL when its side read it.
            if let Err(error) = policy.trust_url(&url) {
                tracing::warn!(url = crate::redact::without_user(&url), %error, "not trusted on local addresses");
            }
        }
        let shadows = file
            .mirror
            .iter()
            .map(|(name, section)| ShadowConfig::new(name, section))
            .collect::<Result<Vec<_>, _>>()?;
        for shadow in &shadows {
            if let Err(error) = policy.trust_url(&shadow.target) {
                tracing::warn!(target = crate::redact::without_user(&shadow.target), %error, "not trusted on local addresses");
            }
        }
        let proxy = match &file.upstream.proxy {
            Some(url) => ProxyAddress::parse(url).map(UpstreamProxy::all),
            None => UpstreamProxy::from_environment(|name| std::env::var(name).ok()),
        }
        .map_err(|reason| SettingsError::Proxy { reason })?;
        // `[upstream] proxy` is a parent pkgproxy (a corporate proxy comes
        // from the usual variables): every side draws from it.
        if let Some(parent) = file.upstream.proxy.as_ref().and(proxy.http.as_ref()) {
            sides.chain_to(&parent.base_url());
        }
        // A proxy on the LAN is where it was configured to be.
        for address in proxy.hosts_and_ports() {
            policy.trust(&address.host, address.port);
        }
        let upstream = UpstreamConfig {
            proxy,
            resolver,
            policy,
            pools: pool_settings(&file.upstream)?,
            keepalive: keepalive(&file.upstream)?,
            switch: Switch::new(overrides.offline_mode.unwrap_or_default()),
        };
        let tls = match (&file.server.tls_cert, &file.server.tls_key) {
            (Some(cert), Some(key)) => crate::tls::Source::Given { cert: cert.clone(), key: key.clone() },
            (None, None) => crate::tls::Source::Kept(overrides.state_dir.as_ref().unwrap_or(&cache_dir).join("tls")),
            _ => return Err(SettingsError::TlsPair),
        };
        let state_dir = overrides.state_dir.clone().unwrap_or_else(|| cache_dir.clone());
        let fleet_policy = self::policy(file.policy.as_ref(), &state_dir)?;
        let cache = &file.cache;
        let quota = quota(
            written(
                ("--cache-max-size", overrides.cache_max_size.as_deref()),
                ("cache.max_size", cache.max_size.as_deref()),
            ),
            written(
                ("--cache-min-free", overrides.cache_min_free.as_deref()),
                ("cache.min_free", cache.min_free.as_deref()),
            ),
            cache.max_object_size.as_deref().map(|value| ("cache.max_object_size", value)),
        )?;
        Ok(Settings {
            tls,
            quota,
            state_dir,
            cache_dir,
            sides,
            upstream,
            proxy_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            persistence: overrides.persistence,
            auto_offline: overrides.auto_offline,
            shadows,
            clock: Arc::new(SystemClock),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            status_page: file.status.page,
            status_metrics: file.status.metrics,
            browse_page: file.status.browse,
            access_log: None,
            reload: Default::default(),
            clients: clients::ClientLimits::new(&file.server)?,
            cluster: file
                .cluster
                .as_ref()
                .map(|section| cluster::settings(section, |name| std::env::var(name).ok()))
                .transpose()?,
            trusted_keys: trusted_keys(&file.bundles.trusted_keys)?,
            revalidate_floor: file.server.revalidate_floor.unwrap_or(DEFAULT_REVALIDATE_FLOOR),
            policy: fleet_policy,
            policy_options: file.policy.clone(),
        })
    }
}

/// Where the malicious-package records signed bundles brought are kept,
/// below the state directory.
pub fn taken_in_records(state_dir: &std::path::Path) -> PathBuf {
    state_dir.join("policy")
}

/// The fleet's policy: `[policy]` as written, with the records bundles
/// brought; none when neither is there.
pub fn policy(
    options: Option<&pkgproxy_policy::Options>,
    state_dir: &std::path::Path,
) -> Result<Option<Arc<pkgproxy_policy::Policy>>, SettingsError> {
    let taken_in = taken_in_records(state_dir);
    if options.is_none() && !taken_in.is_dir() {
        return Ok(None);
    }
    let options = options.cloned().unwrap_or_default();
    Ok(Some(Arc::new(options.policy(Some(&taken_in))?)))
}

/// `[bundles] trusted_keys`, each read (a path) and parsed.
fn trusted_keys(entries: &[String]) -> Result<Vec<crate::signing::PublicKey>, SettingsError> {
    let key = |entry: &String| crate::signing::PublicKey::named(entry);
    entries.iter().map(key).collect::<Result<_, _>>().map_err(|error| SettingsError::TrustedKey(error.to_string()))
}

/// A limit as written, and where: a flag's name (`--cache-max-size`) or a
/// key of the file (`cache.max_size`), so that its error names it.
type Written<'a> = (&'static str, &'a str);

/// The flag's value over the file's.
fn written<'a>(flag: (&'static str, Option<&'a str>), key: (&'static str, Option<&'a str>)) -> Option<Written<'a>> {
    match (flag, key) {
        ((flag, Some(value)), _) => Some((flag, value)),
        (_, (key, Some(value))) => Some((key, value)),
        _ => None,
    }
}

/// The cache's limits: `max_size` (unlimited without it) and `min_free`
/// (5 % of the file system without it).
fn quota(
    max_size: Option<Written>,
    min_free: Option<Written>,
    max_object_size: Option<Written>,
) -> Result<pkgproxy_cache::Quota, SettingsError> {
    let max_size = max_size.map(|(key, value)| size(key, value)).transpose()?;
    let max_object_size = max_object_size.map(|(key, value)| size(key, value)).transpose()?;
    let min_free = match min_free {
        None => pkgproxy_cache::MinFree::default(),
        Some((key, value)) => match value.trim().strip_suffix('%') {
            Some(percent) => {
                let share = percent.trim().parse::<f64>().ok().filter(|p| (0.0..=100.0).contains(p));
                let share = share.ok_or_else(|| SettingsError::CacheSize {
                    key,
                    value: value.to_string(),
                    reason: "a share is 0% to 100%".into(),
                })?;
                pkgproxy_cache::MinFree::Share((share * 100.0).round() as u32)
            }
            None => pkgproxy_cache::MinFree::Bytes(size(key, value)?),
        },
    };
    Ok(pkgproxy_cache::Quota { max_size, min_free, max_object_size })
}

/// A size as people write it (`50GiB`, `500 MB`, `1048576`).
fn size(key: &'static str, value: &str) -> Result<u64, SettingsError> {
    parse_size(value).map_err(|reason| SettingsError::CacheSize {
        key,
        value: value.to_string(),
        reason: format!("not a size (e.g. 50GiB, 500MB): {reason}"),
    })
}

/// A duration of `[upstream]`: the file's, else the default; never zero.
fn duration(key: &'static str, value: Option<Duration>, default: Duration) -> Result<Duration, SettingsError> {
    match value {
        Some(zero) if zero.is_zero() => Err(SettingsError::Upstream { key, reason: "must be longer than zero" }),
        Some(value) => Ok(value),
        None => Ok(default),
    }
}

fn pool_settings(file: &UpstreamSection) -> Result<PoolSettings, SettingsError> {
    let (t, p) = (Timeouts::default(), Penalties::default());
    let timeouts = Timeouts {
        connect: duration("connect_timeout", file.connect_timeout, t.connect)?,
        first_byte: duration("first_byte_timeout", file.first_byte_timeout, t.first_byte)?,
        retry: duration("retry_timeout", file.retry_timeout, t.retry)?,
        deadline: duration("deadline", file.deadline, t.deadline)?,
        body_idle: duration("idle_timeout", file.idle_timeout, t.body_idle)?,
        pool_idle: duration("pool_idle_timeout", file.pool_idle_timeout, t.pool_idle)?,
    };
    let penalties = Penalties {
        penalty_base: duration("penalty_base", file.penalty_base, p.penalty_base)?,
        penalty_max: duration("penalty_max", file.penalty_max, p.penalty_max)?,
        jitter: p.jitter,
    };
    if penalties.penalty_max < penalties.penalty_base {
        return Err(SettingsError::Upstream { key: "penalty_max", reason: "must not be shorter than penalty_base" });
    }
    Ok(PoolSettings { timeouts, penalties, seed: None })
}

fn keepalive(file: &UpstreamSection) -> Result<Keepalive, SettingsError> {
    let defaults = Keepalive::default();
    Ok(Keepalive {
        time: duration("keepalive_time", file.keepalive_time, defaults.time)?,
        interval: duration("keepalive_interval", file.keepalive_interval, defaults.interval)?,
    })
}

/// Parses `host:port:address` (curl's `--resolve` syntax; an IPv6 address in
/// brackets), where the address may carry a port of its own
/// (`host:443:127.0.0.1:8443`) to send the connection elsewhere.
fn parse_resolve(entry: &str) -> Result<(String, u16, SocketAddr), SettingsError> {
    let bad = |reason| SettingsError::Resolve { entry: entry.to_string(), reason };
    let mut parts = entry.splitn(3, ':');
    let (Some(host), Some(port), Some(address)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("expected host:port:address"));
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    let port: u16 = port.parse().map_err(|_| bad("port is not a number"))?;
    if let Ok(with_port) = address.parse::<SocketAddr>() {
        return Ok((host.to_ascii_lowercase(), port, with_port));
    }
    let address = address.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = address.parse().map_err(|_| bad("address is not an IP address"))?;
    Ok((host.to_ascii_lowercase(), port, SocketAddr::new(ip, port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_s_error_never_shows_a_mirror_s_credentials() {
        let file = ConfigFile::parse("[go]\nproxies = [\"https://puller:s3cret@/x\"]\n").unwrap();
        let error = Settings::new(PathBuf::from("/cache"), &file, &Overrides::default()).unwrap_err().to_string();
        assert!(error.starts_with("go.proxies: ") && !error.contains("s3cret") && !error.contains("puller"), "{error}");
    }

    #[test]
    fn the_example_configuration_is_valid() {
        let overrides = Overrides::default();
        let settings =
            Settings::new(PathBuf::from("/cache"), &ConfigFile::parse(EXAMPLE).unwrap(), &overrides).unwrap();
        assert_eq!(settings.shadows.len(), 1);
        // The example names a parent: the go side draws from its /go.
        assert_eq!(
            settings.sides.typed::<pkgproxy_sides::go::Config>().unwrap().proxies(),
            ["http://region-cache:3142/go"]
        );
        let without_parent = EXAMPLE.replace("proxy = \"http://region-cache:3142\"", "");
        let settings =
            Settings::new(PathBuf::from("/cache"), &ConfigFile::parse(&without_parent).unwrap(), &overrides).unwrap();
        assert_eq!(settings.sides.typed::<pkgproxy_sides::go::Config>().unwrap().proxies(), ["http://127.0.0.1:8001"]);
    }

    #[test]
    fn the_cache_s_flags_win_over_the_file_and_a_bad_limit_is_named_where_it_was_written() {
        use pkgproxy_cache::MinFree;
        let quota = |text: &str, max_size: Option<&str>, min_free: Option<&str>| {
            let file = ConfigFile::parse(text).unwrap();
            let overrides = Overrides {
                cache_max_size: max_size.map(str::to_string),
                cache_min_free: min_free.map(str::to_string),
                ..Overrides::default()
            };
            Settings::new(PathBuf::from("/cache"), &file, &overrides).map(|settings| settings.quota)
        };
        let file = "[cache]\nmax_size = \"1GiB\"\nmin_free = \"10%\"\n";
        let from_file = quota(file, None, None).unwrap();
        assert_eq!((from_file.max_size, from_file.min_free), (Some(1 << 30), MinFree::Share(1000)));
        let from_flags = quota(file, Some("2GiB"), Some("0")).unwrap();
        assert_eq!((from_flags.max_size, from_flags.min_free), (Some(2 << 30), MinFree::Bytes(0)));
        assert_eq!(quota("", None, None).unwrap().min_free, MinFree::Share(500), "5 % unless set");
        let error = quota(file, None, Some("lots")).unwrap_err().to_string();
        assert!(error.starts_with("--cache-min-free \"lots\": not a size"), "{error}");
        let error = quota(file, None, Some("120%")).unwrap_err().to_string();
        assert!(error.starts_with("--cache-min-free \"120%\": a share"), "{error}");
        let error = quota("[cache]\nmin_free = \"lots\"\n", None, None).unwrap_err().to_string();
        assert!(error.starts_with("cache.min_free \"lots\""), "{error}");
    }

    #[test]
    fn the_revalidate_floor_is_ten_seconds_unless_set() {
        let floor = |text: &str| {
            let file = ConfigFile::parse(text).unwrap();
            Settings::new(PathBuf::from("/cache"), &file, &Overrides::default()).unwrap().revalidate_floor
        };
        assert_eq!(floor(""), std::time::Duration::from_secs(10));
        assert_eq!(floor("[server]\nrevalidate_floor = \"0s\"\n"), std::time::Duration::ZERO);
        assert_eq!(floor("[server]\nrevalidate_floor = \"1m\"\n"), std::time::Duration::from_secs(60));
        let error = ConfigFile::parse("[server]\nrevalidate_floor = \"soon\"\n").unwrap_err().to_string();
        assert!(error.contains("revalidate_floor"), "{error}");
    }

    #[test]
    fn resolve_entries_parse_like_curl() {
        let (host, port, address) = parse_resolve("deb.debian.org:80:127.0.0.1").unwrap();
        assert_eq!((host.as_str(), port), ("deb.debian.org", 80));
        assert_eq!(address, "127.0.0.1:80".parse().unwrap());
        let (_, _, v6) = parse_resolve("x:8080:[::1]").unwrap();
        assert_eq!(v6, "[::1]:8080".parse().unwrap());
        let (_, port, elsewhere) = parse_resolve("deb.debian.org:443:127.0.0.1:8443").unwrap();
        assert_eq!((port, elsewhere), (443, "127.0.0.1:8443".parse().unwrap()));
        assert!(parse_resolve("x:80").is_err());
        assert!(parse_resolve("x:http:1.2.3.4").is_err());
    }
}
