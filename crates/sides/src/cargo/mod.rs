//! The cargo side: a sparse registry for cargo
//! (`sparse+http://HOST:3142/cargo/index/`) in front of crates.io's index,
//! and of each registry configured beside it (`/cargo/NAME/index/`), each
//! the instances of one pool.
//!
//! - `config.json` is pkgproxy's own: its `dl` points at pkgproxy and
//!   names each crate's SHA-256 (`/cargo/crates/NAME/VERSION/SHA256`), so
//!   every download says what it must be. It is written from the
//!   upstream's (kept as an index file is: its `api` and `auth-required`
//!   passed on, its `dl` telling where crates are fetched), or, when that
//!   was never had and cannot be, without it: cargo can start offline.
//! - Index files (`1/a`, `2/ab`, `3/a/abc`, `ab/cd/abcd…`) are revalidated
//!   after `index_ttl`, carry pkgproxy's own `ETag` (cargo revalidates each
//!   with `If-None-Match`), and one listing only some of the versions the
//!   held one lists is a lagging mirror's: refused, the held one kept.
//! - Crates never change: fetched from where the upstream's `dl` says,
//!   checked against the SHA-256 their URL names while they stream. A crate
//!   of a version the held index file does not list refreshes that file
//!   first (once in a while), so a lockfile naming a version published a
//!   minute ago works offline afterwards.
//! - A request with credentials (a registry that says `auth-required`, or
//!   any client that sends `Authorization`) goes upstream with them, and
//!   what it brings is kept in a space of its own (`cargo/NAME/private/`),
//!   served per crate only to clients the registry accepts for that
//!   crate, never to a client without credentials.
//! - Under the fleet's policy (`[policy]`), an index file is served without
//!   the lines of the versions the policy refuses, and their crates are
//!   refused with a `403` saying why (`gate.rs`). A registry configured
//!   with `policy = false` is not judged.

mod gate;
mod index;
pub mod needs;
mod reporting;
pub mod setup;
mod upstream_config;

use arc_swap::Guard;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use pkgproxy_cache::{Cache, Class, PassedAnswer, Verifier};
use sha2::{Digest, Sha256};

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{
    Access, CachedRequest, ClientAuthorization, DatedResume, Decision, Etag, LocalAnswer, Located, Origin, Refusal,
    Reply, Rewrite, UpstreamAuth, Wanted,
};
use crate::failure::Failure;
use crate::id::SideId;
use crate::instances::Instances;
use crate::named::{Naming, NEGATIVE_TTL, REFRESH_EVERY};
use crate::needs::{HeldBodies, Needs, NeedsError};
use crate::remembered::RememberedAnswers;
use crate::role::{
    Explaining, Fetching, FetchingAhead, Private, Remembering, Resolving, Rewriting, Roles, UpstreamFailures,
};
use crate::route::Request;
use crate::{ClientSetup, Side, UpstreamPath};
use upstream_config::UpstreamConfig;

/// crates.io's sparse index, when none is configured.
pub const DEFAULT_INDEX: &str = "https://index.crates.io";
/// Where crates.io's `config.json` has cargo download crates.
const CRATES_IO_DOWNLOADS: &str = "https://static.crates.io/crates";
/// How long an index file (and `config.json`) is served without asking.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(300);
/// How long a client's access to an `auth-required` registry, once the
/// registry confirmed it, is taken as given.
const ACCESS_RECHECK: Duration = Duration::from_secs(300);
/// The largest `config.json` read.
const CONFIG_LIMIT: u64 = 64 * 1024;
/// The largest index file whose dependencies are fetched ahead.
const FOLLOWED_FILE_LIMIT: u64 = 8 * 1024 * 1024;
/// crates.io's name in keys and pools.
const CRATES_IO: &str = "crates-io";

/// The cargo side's configuration, as written (`[cargo]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// crates.io's sparse index, its mirrors (`https://host[/prefix]`);
    /// empty: crates.io's own.
    #[serde(default)]
    pub index: Vec<String>,
    /// How long an index file is served without asking the upstream.
    #[serde(default, with = "humantime_serde")]
    pub index_ttl: Option<Duration>,
    /// Other registries, each at `/cargo/NAME/index/`.
    #[serde(default)]
    pub registry: Vec<RegistryOptions>,
}

/// A registry beside crates.io, as written (`[[cargo.registry]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryOptions {
    /// Its name: `/cargo/NAME/index/`.
    pub name: String,
    /// Its sparse index's URLs, the mirrors of one pool.
    pub index: Vec<String>,
    /// Whether the fleet's policy (`[policy]`) judges its crates: `false`
    /// for a registry whose crates the fleet publishes itself.
    #[serde(default)]
    pub policy: Option<bool>,
}

/// How `[cargo]` names its registries: crates.io built in, and each
/// `[[cargo.registry]]` at `/cargo/NAME/`.
const NAMING: Naming = Naming {
    side: SideId::Cargo,
    table: "registry",
    urls: "index",
    built_in: CRATES_IO,
    default_url: DEFAULT_INDEX,
    reserved: &["index", "crates"],
    refused: |_| false,
    rule: "a registry's name is lower-case letters, digits, - and _ (not index, crates or crates-io)",
    no_urls: "give the URLs of its sparse index",
};

/// A registry pkgproxy serves.
#[derive(Debug, Clone)]
struct Registry {
    /// Its name in keys and pools (`crates-io`, or the configured one).
    name: String,
    /// Where it is mounted below `/cargo`: `""` for crates.io, `/NAME`.
    mount: String,
    /// Its index's instances.
    index: Instances,
    /// Whether the fleet's policy judges its crates.
    gated: bool,
}

impl Registry {
    fn key(&self, below: &str) -> String {
        format!("cargo/{}/{below}", self.name)
    }

    /// The key of `below` in `space`.
    fn key_in(&self, space: Space, below: &str) -> String {
        match space {
            Space::Shared => self.key(below),
            Space::Private => format!("cargo/{}/private/{below}", self.name),
        }
    }

    fn index_origin(&self, path: String) -> Origin {
        Origin { pool: format!("cargo {}", self.name), instances: self.index.urls().to_vec(), path }
    }

    fn crates_pool(&self) -> String {
        format!("cargo {} crates", self.name)
    }
}

/// The crate and version of `url`, a download of crates.io's
/// (`.../crates/NAME/NAME-VERSION.crate`, or `.../crates/NAME/VERSION/download`
/// as cargo asks for it).
fn crates_io_download(url: &str) -> Option<(&str, &str)> {
    let below = crate::instances::path_below(CRATES_IO_DOWNLOADS, url)?;
    let below = below.split(['?', '#']).next()?.strip_prefix('/')?;
    let (name, file) = below.split_once('/')?;
    let version = match file.split_once('/') {
        Some((version, "download")) => version,
        Some(_) => return None,
        None => file.strip_suffix(".crate")?.strip_prefix(name)?.strip_prefix('-')?,
    };
    (index::is_crate_name(name) && index::is_version(version)).then_some((name, version))
}

/// Whose keys a request is served under: what anyone may read, or what a
/// client's own credentials brought, served only to clients the registry
/// accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Shared,
    Private,
}

impl Space {
    /// The space of a request with `headers`.
    fn of(headers: &http::HeaderMap) -> Space {
        match headers.contains_key(http::header::AUTHORIZATION) {
            true => Space::Private,
            false => Space::Shared,
        }
    }
}

/// What a cache key of this side names: its registry, its space and what
/// is below them (`config.json`, `index/...`, `crates/...`).
struct Keyed<'c, 'k> {
    registry: &'c Registry,
    space: Space,
    below: &'k str,
}

/// The cargo side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    registries: Vec<Registry>,
    index_ttl: Duration,
}

impl Config {
    /// Validates `options`.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let configured = options.registry.iter().map(|registry| (&registry.name, &registry.index[..]));
        let registries = NAMING.registries(&options.index, configured)?;
        let gated = |name: &str| options.registry.iter().find(|registry| registry.name == name).and_then(|r| r.policy);
        let registries = registries.into_iter().map(|named| Registry {
            gated: gated(&named.name).unwrap_or(true),
            name: named.name,
            mount: named.mount,
            index: named.mirrors,
        });
        Ok(Config { registries: registries.collect(), index_ttl: options.index_ttl.unwrap_or(DEFAULT_INDEX_TTL) })
    }

    /// How long index files are served without asking.
    pub fn index_ttl(&self) -> Duration {
        self.index_ttl
    }

    /// The path below `/cargo` of `url`, a file of a registry's own index
    /// (on one of its instances, or crates.io's): below the registry whose
    /// URL it is deepest below.
    fn index_file_at(&self, url: &str) -> Option<String> {
        let (below, registry) = self
            .registries
            .iter()
            .filter_map(|registry| {
                let canonical =
                    || (registry.name == CRATES_IO).then(|| crate::instances::path_below(DEFAULT_INDEX, url));
                Some((registry.index.path_below(url).or_else(|| canonical().flatten())?, registry))
            })
            .min_by_key(|(below, _)| below.len())?;
        Some(format!("{}/index{below}", registry.mount))
    }

    /// The registry mounted at `mount` (`""`, `/NAME`).
    fn registry(&self, mount: &str) -> Option<&Registry> {
        self.registries.iter().find(|registry| registry.mount == mount)
    }

    /// The registry whose keys start `cargo/NAME/`.
    fn registry_of_key(&self, key: &str) -> Option<&Registry> {
        let name = key.strip_prefix("cargo/")?.split('/').next()?;
        self.registries.iter().find(|registry| registry.name == name)
    }

    fn keyed<'k>(&self, key: &'k str) -> Option<Keyed<'_, 'k>> {
        let registry = self.registry_of_key(key)?;
        let below = key.strip_prefix(&registry.key(""))?;
        Some(match below.strip_prefix("private/") {
            Some(below) => Keyed { registry, space: Space::Private, below },
            None => Keyed { registry, space: Space::Shared, below },
        })
    }
}

/// What a client's access to a request is granted for: the registry's
/// `config.json`, or one crate (its index file and its downloads).
enum Granted {
    Registry,
    Crate(String),
}

/// What a request below `/cargo` asks for.
#[derive(Debug, PartialEq, Eq)]
enum Asked<'p> {
    /// A registry's `config.json`.
    Config,
    /// An index file, its path lower-cased, and the crate.
    IndexFile(String, String),
    /// A crate: name, version and SHA-256.
    Crate(&'p str, &'p str, String),
}

/// The registry mount and what `path` (below `/cargo`, decoded) asks of
/// it.
fn parse(path: &str) -> Result<(String, Asked<'_>), Refusal> {
    let below = path.strip_prefix('/').ok_or_else(|| Refusal::not_found("not a registry path"))?;
    let (mount, rest) = match below.split_once('/') {
        Some(("index" | "crates", _)) => ("", below),
        Some((name, rest)) => (name, rest),
        None => return Err(Refusal::not_found("not a registry path: /cargo/index/... or /cargo/NAME/index/...")),
    };
    let mount = if mount.is_empty() { String::new() } else { format!("/{mount}") };
    if let Some(file) = rest.strip_prefix("index/") {
        if file == "config.json" {
            return Ok((mount, Asked::Config));
        }
        let lower = file.to_ascii_lowercase();
        let name =
            index::crate_of(&lower).ok_or_else(|| Refusal::not_found(format!("{file:?} is not an index file")))?;
        let name = name.to_owned();
        return Ok((mount, Asked::IndexFile(lower, name)));
    }
    if let Some(download) = rest.strip_prefix("crates/") {
        let mut parts = download.split('/');
        let (Some(name), Some(version), Some(sha256), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refusal::not_found("a crate is /crates/NAME/VERSION/SHA256"));
        };
        let sha256 = sha256.to_ascii_lowercase();
        if !index::is_crate_name(name) || !index::is_version(version) {
            return Err(Refusal::bad_request(format!("{name:?} {version:?} is not a crate's name and version")));
        }
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Refusal::bad_request("a crate's URL names its SHA-256, 64 hex digits"));
        }
        return Ok((mount, Asked::Crate(name, version, sha256)));
    }
    Err(Refusal::not_found("not a registry path: index/... or crates/..."))
}

/// The cargo side at run time: its configuration, what it learnt of each
/// registry's `config.json`, the "no such crate" answers it remembers, and
/// when it last refreshed an index file for a version it did not list.
#[derive(Debug)]
pub struct Cargo {
    config: Reloadable<Config>,
    cache: Cache,
    learned: Mutex<HashMap<String, UpstreamConfig>>,
    not_found: RememberedAnswers,
    refreshed: Mutex<HashMap<String, Instant>>,
}

impl Cargo {
    /// The side, knowing nothing yet of its registries' `config.json`.
    pub fn new(config: Config, cache: Cache) -> Cargo {
        Cargo {
            config: Reloadable::new(config),
            cache,
            learned: Mutex::default(),
            not_found: RememberedAnswers::default(),
            refreshed: Mutex::default(),
        }
    }

    /// The side's validated configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }

    /// What `registry`'s own `config.json` says, as last seen, or as the
    /// cache holds it.
    fn upstream_config(&self, registry: &Registry) -> Option<UpstreamConfig> {
        if let Some(known) = self.learned.lock().get(&registry.name) {
            return Some(known.clone());
        }
        let held = self.cache.read_small(&registry.key("config.json"), CONFIG_LIMIT)?;
        let parsed = UpstreamConfig::parse(&held)?;
        self.learn(registry, parsed.clone());
        Some(parsed)
    }

    fn learn(&self, registry: &Registry, config: UpstreamConfig) {
        self.learned.lock().insert(registry.name.clone(), config);
    }

    /// Whether `registry` wants credentials, as far as is known.
    fn auth_required(&self, registry: &Registry) -> bool {
        self.upstream_config(registry).is_some_and(|config| config.auth_required)
    }

    fn classify_path(&self, request: &Request<'_>) -> Result<Decision, Refusal> {
        let path = crate::path::checked_path(request.path)?;
        let (mount, asked) = parse(&path)?;
        let config = self.config();
        let registry = config.registry(&mount).ok_or_else(|| {
            Refusal::not_found(format!("no registry {:?} is configured", mount.trim_start_matches('/')))
        })?;
        let space = Space::of(request.headers);
        let (cached, granted) = match asked {
            Asked::Config => (self.config_json(registry, space, request), Granted::Registry),
            Asked::IndexFile(file, name) => {
                (self.index_file(registry, space, &file, config.index_ttl), Granted::Crate(name.to_ascii_lowercase()))
            }
            Asked::Crate(name, version, sha256) => {
                (self.crate_file(registry, space, name, version, sha256), Granted::Crate(name.to_ascii_lowercase()))
            }
        };
        Ok(Decision::cache(self.with_access(registry, &granted, cached, request)))
    }

    /// The upstream's `config.json`, served rewritten as pkgproxy's; when
    /// it cannot be had, pkgproxy's without it.
    fn config_json(&self, registry: &Registry, space: Space, request: &Request<'_>) -> CachedRequest {
        let served_at = request.served_at(&registry.mount);
        let fallback = LocalAnswer::json(
            StatusCode::OK,
            upstream_config::served(&served_at.base, self.upstream_config(registry).as_ref()),
        );
        CachedRequest {
            wanted: Wanted { fresh_for: self.config().index_ttl, ..Wanted::default() },
            reply: Reply {
                rewrite: Some(Rewrite::at(served_at)),
                fallback: Some(Arc::new(fallback)),
                ..Reply::default()
            },
            ..CachedRequest::new(
                SideId::Cargo,
                registry.key_in(space, "config.json"),
                registry.index_origin("/config.json".into()),
                Class::Revalidated,
            )
        }
    }

    /// An index file: revalidated after the window, with pkgproxy's own
    /// `ETag`.
    fn index_file(&self, registry: &Registry, space: Space, file: &str, fresh_for: Duration) -> CachedRequest {
        CachedRequest {
            wanted: Wanted { fresh_for, ..Wanted::default() },
            reply: Reply { etag: Etag::Content, ..Reply::default() },
            ..CachedRequest::new(
                SideId::Cargo,
                registry.key_in(space, &format!("index/{file}")),
                registry.index_origin(format!("/{file}")),
                Class::Revalidated,
            )
        }
    }

    /// The held index file of `name` on the registry mounted at `/cargo`,
    /// read as a client's request for it is cached (nothing routed again).
    fn held_index_file(&self, name: &str, held: &dyn HeldBodies) -> Option<Vec<u8>> {
        let config = self.config();
        let registry = config.registry("")?;
        let request = self.index_file(registry, Space::Shared, &index::file_path(name), config.index_ttl);
        held.read(&request, index::INDEX_LIMIT)
    }

    /// A crate, from where the registry's `config.json` says, checked
    /// against the SHA-256 its URL names.
    fn crate_file(
        &self,
        registry: &Registry,
        space: Space,
        name: &str,
        version: &str,
        sha256: String,
    ) -> CachedRequest {
        let pool = registry.crates_pool();
        let origin = self
            .upstream_config(registry)
            .and_then(|config| config.download(&pool, name, version, &sha256))
            .unwrap_or(Origin { pool, instances: Vec::new(), path: String::new() });
        let key = registry.key_in(space, &format!("crates/{name}/{version}/{sha256}"));
        let mut request = CachedRequest {
            reply: Reply { dated_resume: DatedResume::Honoured, ..Reply::default() },
            ..CachedRequest::new(SideId::Cargo, key, origin, Class::Immutable)
        };
        request.wanted.expected.sha256 = Some(sha256);
        request
    }

    /// `request` of `registry`, with the client's credentials when it gave
    /// any, or when the registry wants them: the registry then confirms
    /// each client may read what is cached, per crate (a crate's grant is
    /// confirmed with its index file, which the index itself serves).
    fn with_access(
        &self,
        registry: &Registry,
        granted: &Granted,
        mut cached: CachedRequest,
        request: &Request<'_>,
    ) -> CachedRequest {
        let authorization = request.headers.get(http::header::AUTHORIZATION);
        if authorization.is_none() && !self.auth_required(registry) {
            return cached;
        }
        let whose = match authorization {
            Some(authorization) => {
                cached.asking.auth = UpstreamAuth::Client(ClientAuthorization(authorization.clone()));
                hex::encode(&Sha256::digest(authorization.as_bytes())[..16])
            }
            None => "as pkgproxy".to_owned(),
        };
        let (what, confirmed_at) = match granted {
            Granted::Registry => ("config.json", None),
            Granted::Crate(name) => {
                (name.as_str(), Some(registry.index_origin(format!("/{}", index::file_path(name)))))
            }
        };
        let grant = format!("cargo {} {what} {whose}", registry.name);
        cached.access = Some(Box::new(Access { confirmed_at, ..Access::new(grant, ACCESS_RECHECK) }));
        cached
    }

    /// For a crate: its registry's `config.json` (where it is downloaded),
    /// then, when the held index file does not list its version and was
    /// not refreshed for that a moment ago, the index file asked again.
    fn crate_prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        let config = self.config();
        let Some(Keyed { registry, space, below }) = config.keyed(&request.key) else { return Vec::new() };
        let Some(download) = below.strip_prefix("crates/") else { return Vec::new() };
        let mut parts = download.split('/');
        let (Some(name), Some(version)) = (parts.next(), parts.next()) else { return Vec::new() };
        let mut config_json = CachedRequest::new(
            SideId::Cargo,
            registry.key_in(space, "config.json"),
            registry.index_origin("/config.json".into()),
            Class::Revalidated,
        );
        config_json.wanted.fresh_for = config.index_ttl;
        config_json.asking = request.asking.clone();
        let mut needed = vec![config_json];
        let file = index::file_path(name);
        let index_key = registry.key_in(space, &format!("index/{file}"));
        let listed =
            self.cache.read_small(&index_key, index::INDEX_LIMIT).is_some_and(|held| index::lists(&held, version));
        if !listed && self.may_refresh(&index_key) {
            let mut refreshed = self.index_file(registry, space, &file, Duration::ZERO);
            refreshed.asking = request.asking.clone();
            needed.push(refreshed);
        }
        needed
    }

    /// Whether `key` may be fetched again for a version it does not list:
    /// not within [`REFRESH_EVERY`] of the last time.
    fn may_refresh(&self, key: &str) -> bool {
        let now = Instant::now();
        let mut refreshed = self.refreshed.lock();
        refreshed.retain(|_, at| now.duration_since(*at) < REFRESH_EVERY);
        match refreshed.contains_key(key) {
            true => false,
            false => {
                refreshed.insert(key.to_owned(), now);
                true
            }
        }
    }
}

impl Configures for Config {
    type Side = Cargo;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Cargo;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Cargo, String> {
        Ok(Cargo::new(self.clone(), cache.clone()))
    }

    fn held_by(side: &Cargo) -> &Reloadable<Config> {
        &side.config
    }

    /// The indexes configured: these may be on local addresses (each on
    /// its own port only; where their crates are, if local too, is trusted
    /// in `[upstream] trust`).
    fn trusted(&self) -> Vec<String> {
        self.registries.iter().flat_map(|registry| registry.index.trusted_urls()).collect()
    }

    /// Every registry's index fetched from the parent pkgproxy at `parent`
    /// (`http://host:port`); its `config.json` then names the parent's
    /// crates.
    fn chain(&mut self, parent: &str) {
        for registry in &mut self.registries {
            let mount = format!("/cargo{}/index", registry.mount);
            registry.index.chain_to(parent, &mount);
        }
    }
}

impl Side for Cargo {
    fn id(&self) -> SideId {
        SideId::Cargo
    }

    /// A sparse registry is `GET` (and `HEAD`) only.
    fn classify(&self, request: &Request<'_>) -> Decision {
        match *request.method {
            Method::GET | Method::HEAD => self.classify_path(request).unwrap_or_else(Decision::Refuse),
            _ => Decision::Refuse(Refusal::method_not_allowed("GET, HEAD")),
        }
    }

    /// An index file must be the crate's, and not older than the one held.
    fn verifier(&self, request: &CachedRequest, _prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let file = request.key.split_once("/index/")?.1;
        let name = index::crate_of(file)?.to_owned();
        let held = self.cache.read_small(&request.key, index::INDEX_LIMIT).map(|held| index::versions(&held));
        Some(Arc::new(index::IndexVerifier { name, held }))
    }

    /// cargo prints the body of an error and does not retry a `4xx`: what
    /// cannot be had now is a `424` saying why, at once, not minutes of
    /// retried `5xx`.
    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        failure.not_held("pkgproxyctl warm cargo Cargo.lock fetches what a build needs")
    }

    /// The request cargo makes for what is cached under `key`: a
    /// registry's `config.json` ranks before its index files and crates.
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        let config = self.config();
        let Keyed { registry, space: Space::Shared, below } = config.keyed(key)? else { return None };
        let prefix = crate::route::prefix_of(SideId::Cargo)?;
        match below {
            "config.json" => Some((0, format!("{prefix}{}/index/config.json", registry.mount))),
            _ => Some((1, format!("{prefix}{}/{below}", registry.mount))),
        }
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let lines = vec![
            "[source.crates-io]".to_owned(),
            "replace-with = \"pkgproxy\"".to_owned(),
            "[source.pkgproxy]".to_owned(),
            format!("registry = \"sparse+http://{host}/cargo/index/\""),
            format!("pkgproxyctl setup cargo --addr {host} | sh"),
        ];
        Some(ClientSetup { clients: "cargo".to_owned(), lines })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            fetching: Some(self),
            remembering: Some(self),
            fetching_ahead: Some(self),
            rewriting: Some(self),
            private: Some(self),
            resolving: Some(self),
            reporting: Some(self),
            explaining: Some(self),
            gating: Some(self),
            ..Roles::default()
        }
    }
}

impl Fetching for Cargo {
    fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        match request.key.contains("/crates/") {
            true => self.crate_prerequisites(request),
            false => Vec::new(),
        }
    }

    /// A crate is fetched from where its registry's `config.json` says,
    /// with the credentials of the index instance on that host, if one
    /// is; a client's own go along, as cargo itself sends its token to
    /// `dl`.
    fn located(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Located> {
        let config = self.config();
        let Keyed { registry, below, .. } = config.keyed(&request.key)?;
        let upstream = UpstreamConfig::parse(prerequisites.first()?)?;
        self.learn(registry, upstream.clone());
        let download = below.strip_prefix("crates/")?;
        let mut parts = download.split('/');
        let (name, version, sha256) = (parts.next()?, parts.next()?, parts.next()?);
        let mut origin = upstream.download(&registry.crates_pool(), name, version, sha256)?;
        if let Some(instance) = origin.instances.first().and_then(|host| registry.index.origin_of(host)) {
            origin.instances = vec![instance];
        }
        Some(Located::at_registry(origin))
    }

    /// An index's `5xx` is told as pkgproxy's `424`, as an unreachable
    /// index is.
    fn upstream_failures(&self) -> UpstreamFailures {
        UpstreamFailures { errors_fail: true, waits_fail: false }
    }
}

impl Remembering for Cargo {
    /// A "no such crate" remembered for the index file's key.
    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        self.not_found.get(&request.key, now, frozen)
    }

    /// Remembers the upstream's "no such crate" (`404`, `410`, `451`) for
    /// an index file, a minute: a crate published then is found.
    fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: Instant) {
        let no_such_crate = matches!(answer.status.as_u16(), 404 | 410 | 451);
        if no_such_crate && request.key.contains("/index/") && request.access.is_none() {
            self.not_found.remember(&request.key, Arc::clone(answer), NEGATIVE_TTL, now);
        }
    }
}

impl FetchingAhead for Cargo {
    /// An index file names the crates its releases depend on, fetched
    /// ahead of cargo: not for a client's credentials.
    fn follow_up_limit(&self, request: &CachedRequest) -> Option<u64> {
        (request.key.contains("/index/") && request.access.is_none()).then_some(FOLLOWED_FILE_LIMIT)
    }

    /// The index files of the crates an index file's newest releases
    /// depend on: what cargo asks for once it has read it.
    fn follow_ups(&self, request: &CachedRequest, body: &[u8]) -> Vec<CachedRequest> {
        let config = self.config();
        let Some(registry) = config.registry_of_key(&request.key) else { return Vec::new() };
        let follow =
            |name: &String| self.index_file(registry, Space::Shared, &index::file_path(name), config.index_ttl);
        index::dependencies(body).iter().map(follow).collect()
    }
}

impl Rewriting for Cargo {
    /// The upstream's `config.json` as pkgproxy's, for the host the client
    /// reached it by; what it says is learnt.
    fn rewrite(&self, rewrite: &Rewrite, body: &[u8]) -> Option<Bytes> {
        let upstream = UpstreamConfig::parse(body)?;
        let config = self.config();
        let mount = rewrite.served_at.base.rsplit_once("/cargo").map_or("", |(_, mount)| mount);
        if let Some(registry) = config.registry(mount) {
            self.learn(registry, upstream.clone());
        }
        Some(Bytes::from(upstream_config::served(&rewrite.served_at.base, Some(&upstream))))
    }
}

impl Private for Cargo {
    /// What an `auth-required` registry holds, and what any client's
    /// credentials brought, is for the registry's clients only.
    /// A registry that requires a login is private to its users.
    fn serves_privately(&self, path: &str, _query: Option<&str>) -> bool {
        let Ok(path) = crate::path::checked_path(path) else { return false };
        let Ok((mount, _)) = parse(&path) else { return false };
        let config = self.config();
        config.registry(&mount).is_some_and(|registry| self.auth_required(registry))
    }

    fn readable_by_anyone(&self, key: &str) -> bool {
        let config = self.config();
        config.keyed(key).is_none_or(|keyed| keyed.space == Space::Shared && !self.auth_required(keyed.registry))
    }
}

impl Resolving for Cargo {
    fn needs(&self, asked: serde_json::Value, _held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        self.lock_needs(asked)
    }
}

impl Explaining for Cargo {
    /// An index file below a registry's index, or a crate crates.io
    /// serves: its path at pkgproxy names its SHA-256, which only its index
    /// file says.
    fn upstream_path(&self, url: &str, held: &dyn HeldBodies) -> Option<UpstreamPath> {
        let config = self.config();
        let prefix = crate::route::prefix_of(SideId::Cargo)?;
        if let Some(path) = config.index_file_at(url) {
            return Some(UpstreamPath::At(format!("{prefix}{path}")));
        }
        let (name, version) = crates_io_download(url)?;
        let file = format!("{prefix}/index/{}", index::file_path(name));
        let Some(body) = self.held_index_file(name, held) else {
            return Some(UpstreamPath::Unknown(format!(
                "pkgproxy's path for a crate names its SHA-256, which only the crate's index file ({file}) says, \
                 and pkgproxy does not hold it: it cannot be known offline"
            )));
        };
        Some(match index::checksum(&body, version) {
            Some(sha256) => UpstreamPath::At(format!("{prefix}/crates/{name}/{version}/{sha256}")),
            None => UpstreamPath::Unknown(format!(
                "the held index file of {name} ({file}) does not list {version}: its SHA-256, which pkgproxy's \
                 path for it names, cannot be known offline"
            )),
        })
    }
}

#[cfg(test)]
mod tests;
