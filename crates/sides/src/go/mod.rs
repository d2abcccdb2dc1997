//! The go side: a caching module proxy (`GOPROXY=http://HOST:3142/go`)
//! chained to one or more upstream module proxies, the instances of one
//! pool.
//!
//! Requests are the module proxy protocol's (`go help goproxy`), below
//! `/go`: `MODULE/@v/list`, `MODULE/@v/VERSION.{info,mod,zip}`,
//! `MODULE/@latest`, and the checksum database proxied under
//! `sumdb/NAME/{supported,latest,lookup/..,tile/..}`. Module paths and
//! versions arrive case-encoded (`!` + lower case) and percent-encoded
//! (`%21`); both are decoded, checked and encoded again, so one module has
//! one cache key. `.info`, `.mod`, `.zip`, lookups and tiles never change;
//! `list`, `@latest` and the database's `latest` are revalidated after a
//! window. Under the fleet's policy a version is timed by its `.info`, and
//! lists and `@latest` name only what it serves (`gate.rs`).

mod dirhash;
mod gate;
mod integrity;
pub mod needs;
pub mod path;
mod reporting;
pub mod setup;
pub mod sumdb;

use arc_swap::Guard;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use pkgproxy_cache::{Cache, Class, PassedAnswer, Verifier};

pub use dirhash::{check_zip, hash_mod};
pub use integrity::{GoVerifier, VersionsVerifier};
pub use sumdb::Sums;

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{Asking, CachedRequest, DatedResume, Decision, Origin, Redirects, Refusal, Reply, Wanted};
use crate::id::SideId;
use crate::instances::Instances;
use crate::role::{Explaining, Fetching, Remembering, Roles};
use crate::route::Request;
use crate::{ClientSetup, Side, UpstreamPath};
use path::{escape, is_module_path, is_version, unescape};
use sumdb::parse_lookup;

/// The upstream module proxy when none is configured.
pub const DEFAULT_PROXY: &str = "https://proxy.golang.org";
/// How long `list` and `@latest` answers stay fresh.
pub const DEFAULT_LIST_TTL: Duration = Duration::from_secs(300);
/// How long a `404` or `410` of the upstream is remembered.
pub const DEFAULT_NEGATIVE_TTL: Duration = Duration::from_secs(60);
/// The checksum database proxied (and consulted for `.zip` and `.mod`).
pub const DEFAULT_SUMDB: &str = "sum.golang.org";

/// The go side's configuration, as written (`[go]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// Upstream module proxies (`http[s]://host[:port][/prefix]`); empty: the default.
    #[serde(default)]
    pub proxies: Vec<String>,
    /// Freshness window of `list` and `@latest`.
    #[serde(default, with = "humantime_serde")]
    pub list_ttl: Option<Duration>,
    /// How long `404`/`410` answers are remembered.
    #[serde(default, with = "humantime_serde")]
    pub negative_ttl: Option<Duration>,
    /// The checksum database's name, or `off`.
    pub sumdb: Option<String>,
    /// Whether the fleet's policy (`[policy]`) judges the modules of these
    /// proxies (default `true`); `false` for proxies of modules the fleet
    /// publishes itself.
    #[serde(default)]
    pub policy: Option<bool>,
}

/// What a request of the go side asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoFile {
    /// `@v/list`.
    List,
    /// `@latest`.
    Latest,
    /// `@v/VERSION.info`.
    Info(String),
    /// `@v/VERSION.mod`.
    Mod(String),
    /// `@v/VERSION.zip`.
    Zip(String),
}

/// The go side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    proxies: Instances,
    list_ttl: Duration,
    negative_ttl: Duration,
    sumdb: Option<String>,
    /// Whether the fleet's policy judges the modules served.
    gated: bool,
}

impl Config {
    /// Validates `config`.
    pub fn new(config: &Options) -> Result<Self, ConfigError> {
        let bad = |key: &str, reason: &str| ConfigError::new(SideId::Go, key, reason);
        let proxies = Instances::new(&config.proxies, Some(DEFAULT_PROXY)).map_err(|reason| bad("proxies", &reason))?;
        let sumdb = match config.sumdb.as_deref() {
            None => Some(DEFAULT_SUMDB.to_string()),
            Some("off") => None,
            Some(name) if is_sumdb_name(name) => Some(name.to_string()),
            Some(_) => return Err(bad("sumdb", "must be a host name like sum.golang.org, or \"off\"")),
        };
        let list_ttl = config.list_ttl.unwrap_or(DEFAULT_LIST_TTL);
        let negative_ttl = config.negative_ttl.unwrap_or(DEFAULT_NEGATIVE_TTL);
        Ok(Config { proxies, list_ttl, negative_ttl, sumdb, gated: config.policy.unwrap_or(true) })
    }

    /// pkgproxy's path for `url`, an upstream's own: below one of the
    /// proxies or the Go module mirror (what `GOPROXY` named before), or
    /// of the checksum database pkgproxy proxies.
    fn upstream_path(&self, url: &str) -> Option<String> {
        let prefix = crate::route::prefix_of(SideId::Go)?;
        let proxied = self.proxies.path_below(url).or_else(|| crate::instances::path_below(DEFAULT_PROXY, url));
        if let Some(below) = proxied {
            return Some(format!("{prefix}{below}"));
        }
        let sumdb = self.sumdb.as_deref()?;
        let below = crate::instances::path_below(&format!("https://{sumdb}"), url)?;
        Some(format!("{prefix}/sumdb/{sumdb}{below}"))
    }

    /// The upstream proxies' base URLs.
    pub fn proxies(&self) -> &[String] {
        self.proxies.urls()
    }

    /// How long `list` and `@latest` answers stay fresh.
    pub fn list_ttl(&self) -> Duration {
        self.list_ttl
    }

    /// How long a `404` or `410` is remembered.
    pub fn negative_ttl(&self) -> Duration {
        self.negative_ttl
    }

    /// Decides what to do with `GET /go{path}` (`path` still
    /// percent-encoded, starting with `/`).
    pub fn classify(&self, raw_path: &str) -> Decision {
        let path = match crate::path::checked_path(raw_path) {
            Ok(path) => path,
            Err(refusal) => return Decision::Refuse(refusal),
        };
        let Some(path) = path.strip_prefix('/') else {
            return Decision::Refuse(not_found("not a module proxy path"));
        };
        let classified = match path.strip_prefix("sumdb/") {
            Some(rest) => self.classify_sumdb(rest),
            None => classify_module(path),
        };
        match classified {
            Ok((relative, class)) => Decision::cache(self.cached(relative, class)),
            Err(refusal) => Decision::Refuse(refusal),
        }
    }

    fn classify_sumdb(&self, rest: &str) -> Result<(String, Class), Refusal> {
        let (name, endpoint) = rest.split_once('/').ok_or_else(|| not_found("not a checksum database path"))?;
        if self.sumdb.as_deref() != Some(name) {
            return Err(not_found(&format!("checksum database {name} is not proxied")));
        }
        let class = match endpoint {
            "supported" | "latest" => Class::Revalidated,
            _ if endpoint.starts_with("lookup/") => {
                let (module, version) = endpoint["lookup/".len()..]
                    .rsplit_once('@')
                    .ok_or_else(|| Refusal::bad_request("a lookup names MODULE@VERSION"))?;
                let (module, version) = module_version(module, version)?;
                return Ok((format!("sumdb/{name}/lookup/{}@{}", escape(&module), escape(&version)), Class::Immutable));
            }
            _ if endpoint.starts_with("tile/") && is_tile_path(&endpoint["tile/".len()..]) => Class::Immutable,
            _ => return Err(not_found("not a checksum database path")),
        };
        Ok((format!("sumdb/{name}/{endpoint}"), class))
    }

    fn cached(&self, relative: String, class: Class) -> CachedRequest {
        let origin =
            Origin { pool: "go".to_string(), instances: self.proxies().to_vec(), path: format!("/{relative}") };
        CachedRequest {
            wanted: Wanted { fresh_for: self.list_ttl, ..Wanted::default() },
            asking: Asking {
                // An upstream proxy's redirect (to its storage, say) is
                // followed here, through the one way out: the go command would
                // resolve a relative one against pkgproxy, and fetch an
                // absolute one uncached, and not at all offline.
                redirects: Redirects::Followed,
                ..Asking::default()
            },
            reply: Reply {
                // A version's files and the checksum database's records never
                // change under their names; lists and `latest` do.
                dated_resume: match class {
                    Class::Immutable => DatedResume::Honoured,
                    Class::Revalidated => DatedResume::WholeFile,
                },
                ..Reply::default()
            },
            ..CachedRequest::new(SideId::Go, format!("go/{relative}"), origin, class)
        }
    }

    /// The module, and what of it, a cached request of this side is for
    /// (`None` for the checksum database's files).
    pub fn file_of(request: &CachedRequest) -> Option<(String, GoFile)> {
        let relative = request.key.strip_prefix("go/")?;
        if relative.starts_with("sumdb/") {
            return None;
        }
        if let Some(module) = relative.strip_suffix("/@latest") {
            return Some((unescape(module)?, GoFile::Latest));
        }
        let (module, file) = relative.rsplit_once("/@v/")?;
        let module = unescape(module)?;
        if file == "list" {
            return Some((module, GoFile::List));
        }
        let (version, extension) = file.rsplit_once('.')?;
        let version = unescape(version)?;
        match extension {
            "info" => Some((module, GoFile::Info(version))),
            "mod" => Some((module, GoFile::Mod(version))),
            "zip" => Some((module, GoFile::Zip(version))),
            _ => None,
        }
    }

    /// The request asking whether the upstream proxies the checksum database
    /// (`None` when it is off).
    pub fn sumdb_supported(&self) -> Option<CachedRequest> {
        let name = self.sumdb.as_ref()?;
        Some(self.cached(format!("sumdb/{name}/supported"), Class::Revalidated))
    }

    /// For a `.zip` or `.mod`, the checksum database lookup that gives its
    /// hash (`None` when the database is off, or for other files).
    pub fn lookup_for(&self, request: &CachedRequest) -> Option<CachedRequest> {
        let name = self.sumdb.as_ref()?;
        let (module, file) = Self::file_of(request)?;
        let version = match file {
            GoFile::Zip(version) | GoFile::Mod(version) => version,
            _ => return None,
        };
        let relative = format!("sumdb/{name}/lookup/{}@{}", escape(&module), escape(&version));
        Some(self.cached(relative, Class::Immutable))
    }

    /// The checks of a `.zip` or `.mod` download, with the hashes `sums`
    /// the checksum database gave (if any).
    pub fn verifier(&self, request: &CachedRequest, sums: Sums) -> Option<Arc<dyn Verifier>> {
        let (module, file) = Self::file_of(request)?;
        match file {
            GoFile::Zip(version) => Some(Arc::new(GoVerifier::zip(module, version, sums.zip))),
            GoFile::Mod(version) => Some(Arc::new(GoVerifier::gomod(module, version, sums.gomod))),
            GoFile::List => Some(Arc::new(VersionsVerifier::List)),
            GoFile::Info(_) | GoFile::Latest => Some(Arc::new(VersionsVerifier::Info)),
        }
    }
}

/// The go side at run time: its configuration and the "not found" answers
/// it remembers.
#[derive(Debug)]
pub struct Go {
    config: Reloadable<Config>,
    not_found: crate::remembered::RememberedAnswers,
}

impl Go {
    /// The side with nothing remembered yet.
    pub fn new(config: Config) -> Self {
        Go { config: Reloadable::new(config), not_found: crate::remembered::RememberedAnswers::default() }
    }

    /// The side's validated configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }
}

impl Configures for Config {
    type Side = Go;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Go;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, _cache: &Cache) -> Result<Go, String> {
        Ok(Go::new(self.clone()))
    }

    fn held_by(side: &Go) -> &Reloadable<Config> {
        &side.config
    }

    /// The configured proxies: these may be on local addresses (each on
    /// its own port only).
    fn trusted(&self) -> Vec<String> {
        self.proxies.trusted_urls()
    }

    /// Modules and the checksum database fetched through the parent
    /// pkgproxy at `parent` (`http://host:port`), a module proxy itself.
    fn chain(&mut self, parent: &str) {
        self.proxies.chain_to(parent, "/go");
    }
}

impl Side for Go {
    fn id(&self) -> SideId {
        SideId::Go
    }

    /// Decides what to do with a request below `/go`: the module proxy
    /// protocol is `GET` (and `HEAD`) only.
    fn classify(&self, request: &Request<'_>) -> Decision {
        match *request.method {
            Method::GET | Method::HEAD => self.config().classify(request.path),
            _ => Decision::Refuse(Refusal::method_not_allowed("GET, HEAD")),
        }
    }

    /// The checks of a `.zip` or `.mod` download, with the hashes of the
    /// lookup record among `prerequisites` (none when it could not be had:
    /// a zip is then only checked for its shape).
    fn verifier(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let (module, file) = Config::file_of(request)?;
        let sums = match (&file, prerequisites.get(1)) {
            (GoFile::Zip(version) | GoFile::Mod(version), Some(record)) => {
                parse_lookup(&String::from_utf8_lossy(record), &module, version)
            }
            (GoFile::Zip(version) | GoFile::Mod(version), None) => {
                tracing::debug!(module, version, "no checksum database record");
                Sums::default()
            }
            _ => Sums::default(),
        };
        self.config().verifier(request, sums)
    }

    /// The request the go command makes for what is cached under `key`:
    /// the checksum database's files rank before the modules they prove.
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        let relative = key.strip_prefix("go/")?;
        let rank = if relative.starts_with("sumdb/") { 0 } else { 1 };
        Some((rank, format!("{}/{relative}", crate::route::prefix_of(SideId::Go)?)))
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let lines =
            vec![format!("export GOPROXY=http://{host}/go"), format!("pkgproxyctl setup go --addr {host} | sudo sh")];
        Some(ClientSetup { clients: "the go command".to_owned(), lines })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            fetching: Some(self),
            remembering: Some(self),
            reporting: Some(self),
            explaining: Some(self),
            gating: Some(self),
            ..Roles::default()
        }
    }
}

impl Fetching for Go {
    /// For a `.zip` or `.mod`: whether the upstream has the checksum
    /// database (an upstream without it says so once, and is remembered,
    /// so no lookup is asked of it for every version), then the lookup
    /// record that gives the file's hash.
    fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        match (self.config().sumdb_supported(), self.config().lookup_for(request)) {
            (Some(supported), Some(lookup)) => vec![supported, lookup],
            _ => Vec::new(),
        }
    }
}

impl Remembering for Go {
    /// A remembered "not found" for the request's key.
    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        self.not_found.get(&request.key, now, frozen)
    }

    /// Remembers the upstream's "not found" (`404`, `410`) for the
    /// request's key for `negative_ttl`.
    fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: Instant) {
        if matches!(answer.status, StatusCode::NOT_FOUND | StatusCode::GONE) {
            self.not_found.remember(&request.key, Arc::clone(answer), self.config().negative_ttl, now);
        }
    }
}

impl Explaining for Go {
    fn upstream_path(&self, url: &str, _held: &dyn crate::needs::HeldBodies) -> Option<UpstreamPath> {
        self.config().upstream_path(url).map(UpstreamPath::At)
    }
}

fn classify_module(path: &str) -> Result<(String, Class), Refusal> {
    if let Some(module) = path.strip_suffix("/@latest") {
        let module = checked_module(module)?;
        return Ok((format!("{}/@latest", escape(&module)), Class::Revalidated));
    }
    let (module, file) = path.rsplit_once("/@v/").ok_or_else(|| not_found("not a module proxy path"))?;
    if file == "list" {
        let module = checked_module(module)?;
        return Ok((format!("{}/@v/list", escape(&module)), Class::Revalidated));
    }
    let (version, extension) = file.rsplit_once('.').ok_or_else(|| not_found("not a module proxy path"))?;
    if !matches!(extension, "info" | "mod" | "zip") {
        return Err(not_found("not a module proxy path"));
    }
    let (module, version) = module_version(module, version)?;
    Ok((format!("{}/@v/{}.{extension}", escape(&module), escape(&version)), Class::Immutable))
}

fn checked_module(escaped: &str) -> Result<String, Refusal> {
    unescape(escaped)
        .filter(|module| is_module_path(module))
        .ok_or_else(|| Refusal::bad_request(format!("{escaped:?} is not a valid module path")))
}

fn module_version(module: &str, version: &str) -> Result<(String, String), Refusal> {
    let module = checked_module(module)?;
    let version = unescape(version)
        .filter(|version| is_version(version))
        .ok_or_else(|| Refusal::bad_request(format!("{version:?} is not a valid module version")))?;
    Ok((module, version))
}

/// `H/L/K[/K...][.p/W]` or `H/data/K...`: digits, `x`-prefixed digits,
/// `data` and `.p`.
fn is_tile_path(path: &str) -> bool {
    !path.is_empty()
        && path.split('/').all(|element| {
            !element.is_empty()
                && element != "."
                && element != ".."
                && element.bytes().all(|b| b.is_ascii_digit() || b"xdatp.".contains(&b))
        })
}

fn is_sumdb_name(name: &str) -> bool {
    name.contains('.')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
        && !name.starts_with('.')
        && !name.contains("..")
}

fn not_found(reason: &str) -> Refusal {
    Refusal::not_found(reason)
}

#[cfg(test)]
mod tests;
