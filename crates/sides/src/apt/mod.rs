//! The apt side: a forward proxy for `Acquire::http::Proxy`.
//!
//! Requests name a mirror of an archive (`http://deb.debian.org/debian/...`).
//! Only archive-shaped paths (`dists/`, `pool/`) on known or configured
//! archive hosts are served; everything else is refused, so pkgproxy is not
//! an open proxy. `pool/**` and `dists/**/by-hash/**` never change under
//! their name and are cached forever; other `dists/**` files are revalidated
//! after a window.

mod archives;
mod classify;
pub mod closure;
pub mod deb822;
pub mod index;
mod integrity;
pub mod needs;
pub mod packages;
pub mod release;
mod reporting;
pub mod setup;

use arc_swap::Guard;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use pkgproxy_cache::{Cache, Verifier};

pub use archives::{builtin, Archive, HostPattern, Mirror};

use crate::config::{Configures, Reloadable};
use crate::decision::{CachedRequest, Decision, Refusal, Target};
use crate::id::SideId;
use crate::learned::Learned;
use crate::needs::{HeldBodies, Needs, NeedsError};
use crate::role::{Evicting, Exporting, Forwarding, Informing, Resolving, Roles};
use crate::route::Request;
use crate::{ClientSetup, Side};
use index::{AptIndex, IndexError};

/// The default freshness window of `dists/**` files fetched by name.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(300);

/// The apt side's configuration, as written (`[apt]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// Freshness window of `dists/**` files fetched by name (default
    /// [`DEFAULT_INDEX_TTL`]).
    #[serde(default, with = "humantime_serde")]
    pub index_ttl: Option<Duration>,
    /// Archives beside the built-in ones, or mirrors for a built-in one
    /// (`[[apt.archive]]`).
    #[serde(default, rename = "archive")]
    pub archives: Vec<ArchiveConfig>,
}

/// An archive from the configuration file (`[[apt.archive]]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveConfig {
    /// Its name (a built-in name adds mirrors to that archive).
    pub name: String,
    /// Its mirrors' base URLs (`http://host[:port]/prefix`).
    pub mirrors: Vec<String>,
}

/// A configuration the apt side cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// An archive's name is empty or has characters unfit for a cache key.
    #[error("apt.archive name {0:?} must be non-empty and use only a-z, 0-9, '.', '_' and '-'")]
    BadName(String),
    /// An archive has no mirrors.
    #[error("apt.archive {0:?} has no mirrors")]
    NoMirrors(String),
    /// A mirror URL is malformed or unsupported.
    #[error("apt.archive {archive:?} mirror {url:?}: {reason}")]
    BadMirror {
        /// The archive's name.
        archive: String,
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The apt side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    archives: Vec<Archive>,
    index_ttl: Duration,
}

impl Config {
    /// Validates `options`.
    pub fn from_options(options: &Options) -> Result<Self, ConfigError> {
        Config::new(&options.archives, options.index_ttl.unwrap_or(DEFAULT_INDEX_TTL))
    }

    /// Builds the side from the built-in archives plus `configured` ones.
    pub fn new(configured: &[ArchiveConfig], index_ttl: Duration) -> Result<Self, ConfigError> {
        let mut archives = builtin();
        for config in configured {
            let mirrors = parse_mirrors(config)?;
            let urls: Vec<String> = mirrors.iter().map(Mirror::to_string).collect();
            match archives.iter_mut().find(|a| a.name == config.name) {
                Some(existing) => {
                    existing.mirrors.extend(mirrors);
                    existing.configured = true;
                    existing.pool.extend(urls);
                }
                None => archives.push(Archive { name: config.name.clone(), mirrors, configured: true, pool: urls }),
            }
        }
        Ok(Config { archives, index_ttl })
    }

    /// How long a `dists/**` file fetched by name stays fresh.
    pub fn index_ttl(&self) -> Duration {
        self.index_ttl
    }

    /// The archives, built-in and configured.
    pub fn archives(&self) -> &[Archive] {
        &self.archives
    }

    /// Decides what to do with a request for `target`, from the archives
    /// alone (the index adds what it knows, see [`Apt::classify`]).
    pub fn classify(&self, target: &Target) -> Decision {
        classify::classify(&self.archives, target, self.index_ttl)
    }

    /// True when a known archive has a mirror on `host` (any port): apt
    /// may reach it over a blind tunnel for `https://` sources.
    pub fn serves_host(&self, host: &str) -> bool {
        self.archives.iter().flat_map(|a| &a.mirrors).any(|m| m.is_on_host(host))
    }
}

/// The apt side at run time: its configuration and its index of what the
/// archives' `Release` and `Packages` files say.
#[derive(Debug)]
pub struct Apt {
    config: Reloadable<Config>,
    index: Arc<AptIndex>,
    /// The wall clock a Release's date is held against.
    clock: Arc<dyn pkgproxy_cache::Clock>,
}

/// Whether `path` (in a Release) is a `Packages` index of binaries.
fn is_packages_index(path: &str) -> bool {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    dir.rsplit('/').next().is_some_and(|last| last.starts_with("binary-"))
        && matches!(name, "Packages" | "Packages.gz" | "Packages.xz")
}

impl Apt {
    /// Opens the index beside the cache (`apt-index.redb` in `cache_dir`).
    pub fn open(config: Config, cache_dir: &Path, clock: Arc<dyn pkgproxy_cache::Clock>) -> Result<Self, IndexError> {
        let index = AptIndex::open(&cache_dir.join("apt-index.redb"))?;
        Ok(Apt { config: Reloadable::new(config), index: Arc::new(index), clock })
    }

    /// The side's validated configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }

    /// What the archives' `Release` and `Packages` files said, as learnt.
    pub fn index(&self) -> &AptIndex {
        &self.index
    }
}

impl Configures for Config {
    type Side = Apt;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Apt;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::from_options(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Apt, String> {
        Apt::open(self.clone(), cache.dir(), cache.clock()).map_err(|error| error.to_string())
    }

    fn held_by(side: &Apt) -> &Reloadable<Config> {
        &side.config
    }

    /// The configured mirrors (`scheme://host:port`): these may be on
    /// local addresses (each on its own port only).
    fn trusted(&self) -> Vec<String> {
        let configured = self.archives.iter().filter(|a| a.configured).flat_map(|a| &a.mirrors);
        configured
            .filter_map(|m| match &m.host {
                HostPattern::Exact(host) if host.contains(':') => {
                    Some(format!("{}://[{host}]:{}", if m.tls { "https" } else { "http" }, m.port))
                }
                HostPattern::Exact(host) => {
                    Some(format!("{}://{host}:{}", if m.tls { "https" } else { "http" }, m.port))
                }
                HostPattern::Country { .. } => None,
            })
            .collect()
    }
}

impl Side for Apt {
    fn id(&self) -> SideId {
        SideId::Apt
    }

    /// Decides what to do with a forward-proxy request: `GET` and `HEAD`
    /// of archive-shaped paths on known archives are cached, with what the
    /// index knows of `dists/` files (in memory: hits need it, to tell
    /// superseded entries); everything else is refused.
    fn classify(&self, request: &Request<'_>) -> Decision {
        if !matches!(*request.method, Method::GET | Method::HEAD) {
            return Decision::Refuse(Refusal::method_not_allowed("GET, HEAD"));
        }
        let Some(target) = request.target else {
            return Decision::Refuse(Refusal::bad_request("apt asks for absolute URLs, as of a forward proxy"));
        };
        match self.config().classify(target) {
            Decision::Cache(request) => Decision::cache(self.expecting_listed_sums(*request)),
            other => other,
        }
    }

    fn verifier(&self, request: &CachedRequest, _prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        self.checks(request)
    }

    /// The URL apt asks pkgproxy for to get what is cached under `key`
    /// (through the archive's first mirror with a host of its own), and
    /// its rank: a suite's `Release` files, then its indexes, then the
    /// pool.
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        let (name, relative) = key.strip_prefix("apt/")?.split_once('/')?;
        let config = self.config();
        let archive = config.archives().iter().find(|archive| archive.name == name)?;
        let (mirror, host) = archive.mirrors.iter().find_map(|mirror| match &mirror.host {
            HostPattern::Exact(host) => Some((mirror, host)),
            HostPattern::Country { .. } => None,
        })?;
        let host = if host.contains(':') { format!("[{host}]") } else { host.clone() };
        let port = if mirror.port == 80 { String::new() } else { format!(":{}", mirror.port) };
        let file = relative.rsplit('/').next().unwrap_or_default();
        let rank = match relative.starts_with("dists/") {
            true if matches!(file, "InRelease" | "Release" | "Release.gpg") => 0,
            true => 1,
            false => 2,
        };
        Some((rank, format!("http://{host}{port}{}/{relative}", mirror.prefix)))
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        Some(ClientSetup {
            clients: "apt, apt-get (in /etc/apt/apt.conf.d/01pkgproxy)".to_owned(),
            lines: vec![
                format!("Acquire::http::Proxy \"http://{host}/\";"),
                format!("pkgproxyctl setup apt --addr {host} | sudo sh"),
            ],
        })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            evicting: Some(self),
            exporting: Some(self),
            resolving: Some(self),
            reporting: Some(self),
            informing: Some(self),
            forwarding: Some(self),
            ..Roles::default()
        }
    }
}

impl Evicting for Apt {
    /// The entries under `keys` were removed by hand: a suite whose
    /// `InRelease` or `Release` went has its Release forgotten, so the
    /// next one fetched is taken whatever its date (a Release held by
    /// mistake, dated ahead, would otherwise keep every genuine one out).
    /// Blocking.
    fn removed(&self, keys: &[String]) {
        let suites = keys.iter().filter_map(|key| {
            let (archive, relative) = integrity::archive_and_path(key)?;
            Some(format!("{archive}/{}", integrity::release_suite(relative)?))
        });
        for suite in suites {
            match self.index.forget_release(&suite) {
                Ok(true) => tracing::info!(suite, "the suite's Release is forgotten with its InRelease"),
                Ok(false) => {}
                Err(error) => tracing::warn!(suite, %error, "cannot forget the suite's Release"),
            }
        }
    }

    /// The key prefixes under which superseded entries may lie: the
    /// `dists/` folder of every suite whose Release is held.
    fn superseded_prefixes(&self) -> Vec<String> {
        self.index.suites().into_iter().map(|suite| format!("apt/{suite}/")).collect()
    }

    /// Whether the entry `key` (`apt/ARCHIVE/dists/...`) holds an index file
    /// other than the one the suite's Release lists now, or is a by-hash
    /// file the Release does not list (of an older Release): apt will
    /// never ask for those bytes again.
    fn superseded(&self, key: &str, entry: &pkgproxy_cache::Entry) -> bool {
        let Some((archive, relative)) = key.strip_prefix("apt/").and_then(|rest| rest.split_once('/')) else {
            return false;
        };
        if !relative.starts_with("dists/") {
            return false;
        }
        if let Some((dir, _)) = relative.split_once("/by-hash/") {
            let Some(sha256) = hex::decode(&entry.sha256).ok().and_then(|sha| <[u8; 32]>::try_from(sha).ok()) else {
                return false;
            };
            let folder = format!("{archive}/{dir}/");
            let suite_held = self.index.suites().iter().any(|suite| folder.starts_with(&format!("{suite}/")));
            return suite_held && self.index.name_by_hash(archive, dir, &sha256).is_none();
        }
        let Some(listed) = self.index.index_file(archive, relative) else { return false };
        hex::encode(listed.sha256) != entry.sha256
    }
}

impl Exporting for Apt {
    /// The cache keys of what proves `key`, a pool file of an archive:
    /// each suite of that archive the index holds a Release of, its
    /// `InRelease` and the `Packages` indexes the Release lists (by name:
    /// a request by hash is answered from the same bytes). Empty for other
    /// keys.
    fn proving_keys(&self, key: &str) -> Vec<String> {
        let Some((archive, relative)) = key.strip_prefix("apt/").and_then(|rest| rest.split_once('/')) else {
            return Vec::new();
        };
        if !relative.starts_with("pool/") {
            return Vec::new();
        }
        let prefix = format!("{archive}/");
        let mut keys = Vec::new();
        for suite in self.index.suites().iter().filter_map(|suite| suite.strip_prefix(&prefix)) {
            let Some(release) = self.index.release(&format!("{prefix}{suite}")) else { continue };
            keys.push(format!("apt/{archive}/{suite}/InRelease"));
            let indexes = release.files.keys().filter(|path| is_packages_index(path));
            keys.extend(indexes.map(|path| format!("apt/{archive}/{suite}/{path}")));
        }
        keys
    }
}

impl Resolving for Apt {
    fn needs(&self, asked: serde_json::Value, held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        self.install_needs(asked, held)
    }
}

impl Informing for Apt {
    /// What the index has learnt.
    fn learned(&self) -> Vec<Learned> {
        let (suites, pool_files) = self.index.counts();
        let count = |name, help, value| Learned { group: "apt_index", name, help, value };
        vec![
            count("suites", "Suites whose Release the apt index knows.", suites as u64),
            count("pool_files", "Pool files the apt index knows.", pool_files),
        ]
    }

    fn expiring(&self, by: std::time::SystemTime) -> Vec<(String, std::time::SystemTime)> {
        self.index.valid_until_before(by)
    }
}

impl Forwarding for Apt {
    fn tunnels_to(&self, host: &str) -> bool {
        self.config().serves_host(host)
    }
}

fn parse_mirrors(config: &ArchiveConfig) -> Result<Vec<Mirror>, ConfigError> {
    let name_ok = !config.name.is_empty()
        && config.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if !name_ok {
        return Err(ConfigError::BadName(config.name.clone()));
    }
    if config.mirrors.is_empty() {
        return Err(ConfigError::NoMirrors(config.name.clone()));
    }
    config.mirrors.iter().map(|url| parse_mirror(&config.name, url)).collect()
}

fn parse_mirror(archive: &str, url: &str) -> Result<Mirror, ConfigError> {
    let bad = |reason| ConfigError::BadMirror { archive: archive.to_string(), url: url.to_string(), reason };
    let uri: http::Uri = url.parse().map_err(|_| bad("not a URL"))?;
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(bad("must start with http:// or https://")),
    };
    let host = uri.host().ok_or_else(|| bad("has no host"))?;
    if uri.query().is_some() {
        return Err(bad("must not have a query"));
    }
    let prefix = uri.path().trim_end_matches('/');
    crate::path::checked_path(&format!("{prefix}/")).map_err(|_| bad("has a malformed path"))?;
    Ok(Mirror {
        tls,
        host: HostPattern::Exact(host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()),
        port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
        prefix: prefix.to_string(),
    })
}

#[cfg(test)]
mod superseded_tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::apt::release::{FileSum, Release};

    fn entry(byte: u8) -> pkgproxy_cache::Entry {
        pkgproxy_cache::Entry {
            sha256: hex::encode([byte; 32]),
            size: 1,
            headers: vec![],
            validators: Default::default(),
            fetched_at: 0,
            class: pkgproxy_cache::Class::Revalidated,
            last_used_ns: 0,
        }
    }

    #[test]
    fn an_index_file_the_release_no_longer_lists_is_superseded() {
        let dir = tempfile::tempdir().unwrap();
        let local = ArchiveConfig { name: "local".into(), mirrors: vec!["http://127.0.0.1:8001/debian".into()] };
        let clock = Arc::new(pkgproxy_cache::SystemClock);
        let apt = Apt::open(Config::new(&[local], DEFAULT_INDEX_TTL).unwrap(), dir.path(), clock).unwrap();
        let files = [("main/binary-amd64/Packages".to_string(), FileSum { size: 1, sha256: [2; 32] })];
        let release = Release {
            date: Some(UNIX_EPOCH + Duration::from_secs(100)),
            acquire_by_hash: true,
            files: files.into_iter().collect(),
            ..Release::default()
        };
        apt.index.offer_release("local/dists/stable", release, std::time::SystemTime::now()).unwrap();
        let packages = "apt/local/dists/stable/main/binary-amd64/Packages";
        assert!(apt.superseded(packages, &entry(1)), "other bytes than the Release lists");
        assert!(!apt.superseded(packages, &entry(2)), "the listed bytes");
        assert!(!apt.superseded("apt/local/dists/stable/InRelease", &entry(1)), "not listed: unknown");
        assert!(!apt.superseded("apt/local/pool/main/h/hello.deb", &entry(1)), "pool files are not index files");
        let by_hash = |hex: &str| format!("apt/local/dists/stable/main/binary-amd64/by-hash/SHA256/{hex}");
        assert!(!apt.superseded(&by_hash(&hex::encode([2; 32])), &entry(2)), "the Release lists it");
        assert!(apt.superseded(&by_hash(&hex::encode([1; 32])), &entry(1)), "of an older Release");
        let other_suite = "apt/local/dists/testing/main/binary-amd64/by-hash/SHA256/01";
        assert!(!apt.superseded(other_suite, &entry(1)), "no Release held: unknown");
        assert_eq!(apt.superseded_prefixes(), ["apt/local/dists/stable/"]);
    }
}
