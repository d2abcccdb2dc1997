//! The npm side: a registry at `http://HOST:3142/npm/` in front of the npm
//! registry, and of each registry configured beside it (`/npm/NAME/`), each
//! the mirrors of one pool, for npm, pnpm and both yarns.
//!
//! - A package's document is cached in the form the client asks for (full,
//!   `application/json`, or abbreviated, `application/vnd.npm.install-v1+json`,
//!   by `Accept`; a held full one answers both), one entry whatever the
//!   spelling of a scoped name. It is revalidated after `index_ttl`, and a
//!   document older than the one held (the registry's CDN lags) never
//!   replaces it.
//! - Its tarball links are pointed at pkgproxy as it streams to the client
//!   (pnpm and the yarns fetch them as written), except for npm's own
//!   requests (its `npm-command` header), whose links on the npm registry
//!   stay as they are: npm re-homes them itself and keeps them in its
//!   lockfile, which then works with or without pkgproxy.
//! - A tarball is checked as it streams against its version's integrity,
//!   read from the held document or, when that does not list the version,
//!   from the version's own small document (the held document is then
//!   asked again at its next request: the version is new).
//! - The registry's API (`/-/...`, publishing) is passed on uncached.
//! - What a client's own token brings is kept apart, for clients the
//!   registry accepts.

mod document;
mod links;
mod name;
pub mod needs;
mod packed;
pub mod setup;
mod tarball;

use arc_swap::Guard;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, VARY};
use http::{HeaderMap, Method};
use pkgproxy_cache::{BodyHashes, BodyReader, Cache, Class, PassedAnswer, Verifier};
use sha2::{Digest, Sha256};

use crate::config::{ConfigError as SectionError, Configures, Reloadable, SideConfig, SidesFile};
use crate::decision::{
    forwarded_headers, Access, Asking, CachedRequest, ClientAuthorization, DatedResume, Decision, ForwardRequest,
    LocalAnswer, Origin, Refusal, Reply, Rewrite, UpstreamAuth, Wanted,
};
use crate::failure::Failure;
use crate::id::SideId;
use crate::instances::Instances;
use crate::needs::{HeldBodies, Needs, NeedsError};
use crate::remembered::RememberedAnswers;
use crate::route::Request;
use crate::side::{ClientSetup, Piece, Pieced, Side, StoredBody, StreamRewriter};
use links::Links;
use name::{Asked, PackageName, Tarball};
use tarball::{Integrity, TarballVerifier};

/// The npm registry, when no mirror is configured.
pub const DEFAULT_REGISTRY: &str = "https://registry.npmjs.org";
/// How long a package's document is served without asking.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(300);
/// How long a version's document is served without asking: a version is
/// never published twice, only withdrawn.
const VERSION_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long the registry's "no such package" is remembered.
const NEGATIVE_TTL: Duration = Duration::from_secs(60);
/// How often a document may be asked again for a version it did not list.
const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// How long a token the registry accepted for a package stands.
const ACCESS_RECHECK: Duration = Duration::from_secs(300);
/// The largest document read (the largest packages' run to tens of MB).
const DOCUMENT_LIMIT: u64 = 256 * 1024 * 1024;
/// The largest request body passed on (a publish carries its tarball).
const BODY_LIMIT: u64 = 256 * 1024 * 1024;
/// The npm registry's name in keys and pools.
const NPM: &str = "npm";
/// Where compressed forms of documents are kept, beside the registries.
const PACKED: &str = "packed";

/// Where the documents pkgproxy serves point tarballs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TarballUrls {
    /// At pkgproxy, except the npm registry's own for npm, which re-homes
    /// them itself and keeps them in its lockfile.
    #[default]
    Auto,
    /// At pkgproxy, for every client: lockfiles then name pkgproxy.
    Always,
}

/// The npm side's configuration, as written (`[npm]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// The npm registry, or its mirrors (`https://host/`); empty: the npm
    /// registry itself.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// How long a package's document is served without asking.
    #[serde(default, with = "humantime_serde")]
    pub index_ttl: Option<Duration>,
    /// Where served documents point tarballs.
    #[serde(default)]
    pub tarball_urls: TarballUrls,
    /// Other registries, each at `/npm/NAME/`.
    #[serde(default)]
    pub registry: Vec<RegistryOptions>,
}

/// A registry beside the npm registry, as written (`[[npm.registry]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryOptions {
    /// Its name: `/npm/NAME/`.
    pub name: String,
    /// Its URLs, the mirrors of one pool.
    pub mirrors: Vec<String>,
}

/// An npm configuration that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("npm.{key}: {reason}")]
pub struct ConfigError {
    /// The key at fault.
    pub key: String,
    /// What is wrong with its value, for people.
    pub reason: String,
}

/// A registry pkgproxy serves.
#[derive(Debug, Clone)]
struct Registry {
    /// Its name in keys and pools (`npm`, or the configured one).
    name: String,
    /// Where it is mounted below `/npm`: `""` for the npm registry, `/NAME`.
    mount: String,
    /// Its instances.
    mirrors: Instances,
}

impl Registry {
    fn is_npm(&self) -> bool {
        self.name == NPM
    }

    /// The key of `below` in `space`.
    fn key(&self, space: Space, below: &str) -> String {
        match space {
            Space::Shared => format!("npm/{}/{below}", self.name),
            Space::Private => format!("npm/{}/private/{below}", self.name),
        }
    }

    fn origin(&self, path: String) -> Origin {
        Origin { pool: format!("npm {}", self.name), instances: self.mirrors.urls().to_vec(), path }
    }

    /// The path below the registry of `url`, one of its own links: on one
    /// of its instances, or, for the npm registry, on its canonical host
    /// (what mirrors of it still name).
    fn own_path<'u>(&self, url: &'u str) -> Option<&'u str> {
        let on = |base: &str| url.strip_prefix(base).filter(|path| path.starts_with('/'));
        let canonical = self.is_npm().then_some(DEFAULT_REGISTRY);
        self.mirrors.urls().iter().map(String::as_str).chain(canonical).find_map(on)
    }
}

/// Whose keys a request is served under: what anyone may read, or what a
/// client's own token brought, which is served only to clients the
/// registry accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Shared,
    Private,
}

/// The two forms of a package's document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Everything (`application/json`): what npm itself asks for.
    Full,
    /// What an install needs (`application/vnd.npm.install-v1+json`):
    /// what pnpm and yarn 1 ask for.
    Abbreviated,
}

impl Form {
    const ABBREVIATED: &'static str = "application/vnd.npm.install-v1+json";

    /// The form a client's `Accept` asks for: the full one unless it names
    /// the abbreviated one.
    fn asked(accept: Option<&HeaderValue>) -> Form {
        let accept = accept.and_then(|accept| accept.to_str().ok()).unwrap_or_default();
        let abbreviated = accept.split(',').any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let q = parts.clone().skip(1).find_map(|p| p.strip_prefix("q=")).and_then(|q| q.parse::<f32>().ok());
            parts.next().is_some_and(|media| media.eq_ignore_ascii_case(Self::ABBREVIATED)) && q.unwrap_or(1.0) > 0.0
        });
        if abbreviated {
            Form::Abbreviated
        } else {
            Form::Full
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Form::Full => "full",
            Form::Abbreviated => "abbreviated",
        }
    }

    fn accept(self) -> &'static str {
        match self {
            Form::Full => "application/json",
            Form::Abbreviated => "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*",
        }
    }
}

/// The npm side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    registries: Vec<Registry>,
    index_ttl: Duration,
    tarball_urls: TarballUrls,
}

impl Config {
    /// Validates `options`.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let instances = |mirrors: &[String], built_in, key: String| {
            Instances::new(mirrors, built_in).map_err(|reason| ConfigError { key, reason })
        };
        let mut registries = vec![Registry {
            name: NPM.to_owned(),
            mount: String::new(),
            mirrors: instances(&options.mirrors, Some(DEFAULT_REGISTRY), "mirrors".into())?,
        }];
        for registry in &options.registry {
            let name = &registry.name;
            let fine = !name.is_empty()
                && name.len() <= 64
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
                && !name.starts_with('-')
                && ![NPM, PACKED].contains(&name.as_str());
            if !fine {
                let reason = format!(
                    "{name:?}: a registry's name is lower-case letters, digits, - and _ (not npm, packed, -...)"
                );
                return Err(ConfigError { key: "registry.name".into(), reason });
            }
            if registries.iter().any(|known| &known.name == name) {
                return Err(ConfigError { key: "registry.name".into(), reason: format!("{name:?} is named twice") });
            }
            if registry.mirrors.is_empty() {
                let reason = "give the registry's URLs".to_owned();
                return Err(ConfigError { key: format!("registry.{name}.mirrors"), reason });
            }
            let mirrors = instances(&registry.mirrors, None, format!("registry.{name}.mirrors"))?;
            registries.push(Registry { name: name.clone(), mount: format!("/{name}"), mirrors });
        }
        Ok(Config {
            registries,
            index_ttl: options.index_ttl.unwrap_or(DEFAULT_INDEX_TTL),
            tarball_urls: options.tarball_urls,
        })
    }

    /// The registries configured: these may be on local addresses.
    pub fn trusted_urls(&self) -> Vec<String> {
        self.registries.iter().flat_map(|registry| registry.mirrors.trusted_urls()).collect()
    }

    /// Every registry fetched from the parent pkgproxy at `parent`.
    pub fn chain_to(&mut self, parent: &str) {
        for registry in &mut self.registries {
            let mount = format!("/npm{}", registry.mount);
            registry.mirrors.chain_to(parent, &mount);
        }
    }

    /// The registry of `path` (below `/npm`, decoded) and the path below it.
    fn registry_of_path<'p>(&self, path: &'p str) -> (&Registry, &'p str) {
        let first = path.trim_start_matches('/').split('/').next().unwrap_or_default();
        let named = self.registries.iter().skip(1).find(|registry| registry.name == first);
        match named {
            Some(registry) => {
                let below = &path[1 + first.len()..];
                (registry, if below.is_empty() { "/" } else { below })
            }
            None => (&self.registries[0], path),
        }
    }

    fn registry_of_key(&self, key: &str) -> Option<&Registry> {
        let name = key.strip_prefix("npm/")?.split('/').next()?;
        self.registries.iter().find(|registry| registry.name == name)
    }

    /// The registry mounted at `mount` (`""` or `/NAME`).
    fn registry(&self, mount: &str) -> Option<&Registry> {
        self.registries.iter().find(|registry| registry.mount == mount)
    }
}

/// What a cache key of this side names.
#[derive(Debug)]
struct Keyed<'c> {
    registry: &'c Registry,
    space: Space,
    kind: KeyKind,
}

#[derive(Debug)]
enum KeyKind {
    Document(PackageName, Form),
    Version(PackageName, String),
    Tarball(Tarball),
}

impl<'c> Keyed<'c> {
    fn parse(config: &'c Config, key: &str) -> Option<Keyed<'c>> {
        let registry = config.registry_of_key(key)?;
        let below = key.strip_prefix(&registry.key(Space::Shared, ""))?;
        let (space, below) = match below.strip_prefix("private/") {
            Some(below) => (Space::Private, below),
            None => (Space::Shared, below),
        };
        let (kind, rest) = below.split_once('/')?;
        let kind = match kind {
            "doc" => {
                let (name, form) = rest.rsplit_once('/')?;
                let form = [Form::Full, Form::Abbreviated].into_iter().find(|f| f.as_str() == form)?;
                KeyKind::Document(PackageName::parse(name)?, form)
            }
            "version" => {
                let (name, version) = rest.rsplit_once('/')?;
                KeyKind::Version(PackageName::parse(name)?, version.to_owned())
            }
            "tarball" => {
                let (name, file) = rest.rsplit_once('/')?;
                KeyKind::Tarball(Tarball::new(PackageName::parse(name)?, file)?)
            }
            _ => return None,
        };
        Some(Keyed { registry, space, kind })
    }
}

/// The npm side at run time: its configuration, the "no such package"
/// answers it remembers, the documents to ask again for a version they did
/// not list, and the `dist` of tarballs being fetched, read from held
/// documents.
#[derive(Debug)]
pub struct Npm {
    config: Reloadable<Config>,
    cache: Cache,
    not_found: RememberedAnswers,
    /// When each document was last marked to be asked again.
    refreshed: Mutex<HashMap<String, Instant>>,
    /// Documents to ask again at their next request.
    to_refresh: Mutex<HashSet<String>>,
    /// The `dist` a held document gave a tarball being fetched, by key.
    dists: Mutex<HashMap<String, document::Dist>>,
    /// The compressed forms of documents being made, by key.
    packing: Arc<Mutex<HashSet<String>>>,
}

/// How many compressed forms of documents are made at once.
const PACKING_AT_ONCE: usize = 2;
/// The smallest document kept compressed: below it, gzip saves little.
const PACKED_FROM: u64 = 4 * 1024;

/// How many tarballs' `dist` are kept between their prerequisites and
/// their checks.
const DISTS_KEPT: usize = 4096;

impl Npm {
    /// The side, remembering nothing yet.
    pub fn new(config: Config, cache: Cache) -> Npm {
        Npm {
            config: Reloadable::new(config),
            cache,
            not_found: RememberedAnswers::default(),
            refreshed: Mutex::default(),
            to_refresh: Mutex::default(),
            dists: Mutex::default(),
            packing: Arc::default(),
        }
    }

    /// The side's validated configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }

    fn classify_path(&self, request: &Request<'_>) -> Result<Decision, Refusal> {
        let path = crate::path::checked_path(request.path)?;
        let config = self.config();
        let (registry, below) = config.registry_of_path(&path);
        let asked = name::parse(below)?;
        let readable = matches!(*request.method, Method::GET | Method::HEAD);
        let for_writing = request.query.is_some_and(|query| query.split('&').any(|pair| pair == "write=true"));
        let cached = match asked {
            _ if !readable || for_writing => return Ok(self.forward(registry, request)),
            Asked::Api => return Ok(self.forward(registry, request)),
            Asked::Document(name) => self.document(registry, &name, Form::asked(request.headers.get(ACCEPT)), request),
            Asked::Version(name, version) => self.version(registry, &name, &version, request),
            Asked::Tarball(tarball) => self.tarball(registry, &tarball, request),
        };
        Ok(Decision::cache(self.with_access(registry, cached, request)))
    }

    /// The space a request is served in.
    fn space(request: &Request<'_>) -> Space {
        match request.headers.contains_key(AUTHORIZATION) {
            true => Space::Private,
            false => Space::Shared,
        }
    }

    /// A package's document in `form`; a held full one answers a request
    /// for the abbreviated one that is not held.
    fn document(&self, registry: &Registry, name: &PackageName, form: Form, request: &Request<'_>) -> CachedRequest {
        let space = Self::space(request);
        let key = |form: Form| registry.key(space, &format!("doc/{name}/{}", form.as_str()));
        let form = match form {
            Form::Abbreviated
                if self.cache.lookup(&key(form)).is_none() && self.cache.lookup(&key(Form::Full)).is_some() =>
            {
                Form::Full
            }
            form => form,
        };
        let key = key(form);
        let fresh_for = match self.take_refresh(&key) {
            true => Duration::ZERO,
            false => self.config().index_ttl,
        };
        let mut asking = HeaderMap::new();
        asking.insert(ACCEPT, HeaderValue::from_static(form.accept()));
        let mut reply = HeaderMap::new();
        reply.insert(VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
        CachedRequest {
            wanted: Wanted { fresh_for, ..Wanted::default() },
            asking: Asking { headers: asking, ..Asking::default() },
            reply: Reply { headers: reply, rewrite: Some(self.rewrite_for(registry, request)), ..Reply::default() },
            ..CachedRequest::new(SideId::Npm, key, registry.origin(format!("/{}", name.in_path())), Class::Revalidated)
        }
    }

    /// One version's document (or a dist-tag's).
    fn version(&self, registry: &Registry, name: &PackageName, version: &str, request: &Request<'_>) -> CachedRequest {
        let fresh_for = match name::is_exact_version(version) {
            true => VERSION_TTL,
            false => self.config().index_ttl,
        };
        let key = registry.key(Self::space(request), &format!("version/{name}/{version}"));
        CachedRequest {
            wanted: Wanted { fresh_for, ..Wanted::default() },
            reply: Reply { rewrite: Some(self.rewrite_for(registry, request)), ..Reply::default() },
            ..CachedRequest::new(
                SideId::Npm,
                key,
                registry.origin(format!("/{}/{version}", name.in_path())),
                Class::Revalidated,
            )
        }
    }

    /// A tarball: immutable, fetched from where its version's document
    /// says.
    fn tarball(&self, registry: &Registry, tarball: &Tarball, request: &Request<'_>) -> CachedRequest {
        let key = registry.key(Self::space(request), &format!("tarball/{}/{}", tarball.name, tarball.file));
        CachedRequest {
            reply: Reply { dated_resume: DatedResume::Honoured, ..Reply::default() },
            ..CachedRequest::new(SideId::Npm, key, registry.origin(tarball.path()), Class::Immutable)
        }
    }

    /// How the documents served to this client point tarballs.
    fn rewrite_for(&self, registry: &Registry, request: &Request<'_>) -> Rewrite {
        let npm_itself = request.headers.contains_key("npm-command");
        let client_rehomes = npm_itself && self.config().tarball_urls == TarballUrls::Auto;
        Rewrite { served_at: request.served_at(&registry.mount), client_rehomes }
    }

    /// Passed on uncached, with the client's headers (its token too).
    fn forward(&self, registry: &Registry, request: &Request<'_>) -> Decision {
        let path = match request.query {
            Some(query) => format!("{}?{query}", request.path.strip_prefix(&registry.mount).unwrap_or(request.path)),
            None => request.path.strip_prefix(&registry.mount).unwrap_or(request.path).to_owned(),
        };
        Decision::Forward(ForwardRequest {
            side: SideId::Npm,
            origin: registry.origin(path),
            method: request.method.clone(),
            headers: forwarded_headers(request.headers),
            body_limit: BODY_LIMIT,
            record: None,
            rewrite: None,
        })
    }

    /// A request with the client's token: fetched with it, and what is held
    /// in its space served once the registry accepted the token.
    fn with_access(&self, registry: &Registry, mut cached: CachedRequest, request: &Request<'_>) -> CachedRequest {
        let Some(authorization) = request.headers.get(AUTHORIZATION) else { return cached };
        let credential = hex::encode(&Sha256::digest(authorization.as_bytes())[..16]);
        cached.asking.auth = UpstreamAuth::Client(ClientAuthorization(authorization.clone()));
        let grant = format!("npm {} {credential}", registry.name);
        cached.access = Some(Box::new(Access { grant, lasting: ACCESS_RECHECK, offline: true, unknown_code: "" }));
        cached
    }

    /// Whether the document `key` was marked to be asked again (once).
    fn take_refresh(&self, key: &str) -> bool {
        self.to_refresh.lock().unwrap_or_else(|p| p.into_inner()).remove(key)
    }

    /// Marks `key` to be asked again at its next request, unless it was a
    /// moment ago.
    fn mark_for_refresh(&self, key: String) {
        let now = Instant::now();
        let mut refreshed = self.refreshed.lock().unwrap_or_else(|p| p.into_inner());
        refreshed.retain(|_, at| now.duration_since(*at) < REFRESH_EVERY);
        if refreshed.insert(key.clone(), now).is_none() {
            self.to_refresh.lock().unwrap_or_else(|p| p.into_inner()).insert(key);
        }
    }

    /// The `dist` a held document of `keyed`'s registry and space gives
    /// `tarball`; when none lists its version, the documents are marked to
    /// be asked again.
    fn held_dist(&self, registry: &Registry, space: Space, tarball: &Tarball) -> Option<document::Dist> {
        let mut unlisting = Vec::new();
        for form in [Form::Full, Form::Abbreviated] {
            let key = registry.key(space, &format!("doc/{}/{}", tarball.name, form.as_str()));
            let Some(body) = self.cache.read_small(&key, DOCUMENT_LIMIT) else { continue };
            match document::read(&body, Some(&tarball.version)).and_then(|read| read.dist) {
                Some(dist) => return Some(dist),
                None => unlisting.push(key),
            }
        }
        for key in unlisting {
            self.mark_for_refresh(key);
        }
        None
    }

    /// The `dist` of the tarball `request` fetches: kept from its held
    /// document, or read from its version's document.
    fn dist_of(&self, request: &CachedRequest, tarball: &Tarball, prerequisites: &[Bytes]) -> Option<document::Dist> {
        if let Some(dist) = self.dists.lock().unwrap_or_else(|p| p.into_inner()).get(&request.key) {
            return Some(dist.clone());
        }
        document::read(prerequisites.first()?, Some(&tarball.version))?.dist
    }

    /// Makes the compressed form `key` of the document `stored` for
    /// clients whose links are `links`, in the background, unless it is
    /// being made, too many are being made, or the document has as many
    /// forms as it may.
    fn pack_later(&self, key: String, stored: &StoredBody, links: Links) {
        let mut packing = self.packing.lock().unwrap_or_else(|p| p.into_inner());
        if packing.len() >= PACKING_AT_ONCE || packing.contains(&key) {
            return;
        }
        let mut forms = 0;
        let counted = self.cache.visit(&packed::prefix(&stored.sha256), |_, _, _| forms += 1);
        if counted.is_err() || forms >= packed::FORMS_KEPT {
            return;
        }
        packing.insert(key.clone());
        let (cache, stored, all_packing) = (self.cache.clone(), stored.clone(), Arc::clone(&self.packing));
        let packed_key = key.clone();
        let made = std::thread::Builder::new().name("npm-pack".into()).spawn(move || {
            if let Err(error) = pack(&cache, &packed_key, &stored, links) {
                tracing::warn!(key = packed_key, %error, "a document's compressed form was not made");
            }
            all_packing.lock().unwrap_or_else(|p| p.into_inner()).remove(&packed_key);
        });
        if made.is_err() {
            packing.remove(&key);
        }
    }

    fn keep_dist(&self, key: &str, dist: document::Dist) {
        let mut dists = self.dists.lock().unwrap_or_else(|p| p.into_inner());
        if dists.len() >= DISTS_KEPT {
            dists.clear();
        }
        dists.insert(key.to_owned(), dist);
    }
}

/// Makes and keeps the compressed form `key` of the document `stored`.
fn pack(cache: &Cache, key: &str, stored: &StoredBody, links: Links) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let size = usize::try_from(stored.size).map_err(|_| "too large a document")?;
    let mut document = vec![0; size];
    stored.file.read_exact_at(&mut document, 0).map_err(|error| error.to_string())?;
    let packed = packed::pack(&document, links).map_err(|error| error.to_string())?;
    cache.put(key, &packed, Vec::new(), Class::Immutable).map_err(|error| error.to_string())?;
    Ok(())
}

/// Reads and validates the npm side's section of `file`.
pub fn configure(file: &SidesFile) -> Result<Box<dyn SideConfig>, SectionError> {
    let options: Options = file.section(SideId::Npm)?;
    let config = Config::new(&options).map_err(|error| SectionError::invalid(SideId::Npm, error))?;
    Ok(Box::new(config))
}

impl Configures for Config {
    type Side = Npm;
    const ID: SideId = SideId::Npm;

    fn open_side(&self, cache: &Cache) -> Result<Npm, String> {
        Ok(Npm::new(self.clone(), cache.clone()))
    }

    fn swap_into(&self, side: &Npm) {
        side.config.swap(self.clone());
    }

    fn trusted(&self) -> Vec<String> {
        self.trusted_urls()
    }

    fn chain(&mut self, parent: &str) {
        self.chain_to(parent);
    }
}

/// Where the documents served for `rewrite` point tarballs.
fn links_for(rewrite: &Rewrite) -> Links {
    Links { base: rewrite.served_at.base.clone(), keep_npm_registry: rewrite.client_rehomes }
}

/// The checks of a document: one it is, and not older than the one held.
#[derive(Debug)]
struct DocumentVerifier {
    held_modified: Option<String>,
}

impl Verifier for DocumentVerifier {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        use std::io::Read;
        let mut content = Vec::new();
        body.take(DOCUMENT_LIMIT + 1).read_to_end(&mut content).map_err(|error| error.to_string())?;
        if content.len() as u64 > DOCUMENT_LIMIT {
            return Err(format!("a document over {DOCUMENT_LIMIT} bytes"));
        }
        let read = document::read(&content, None).filter(|read| read.is_document).ok_or("not a package's document")?;
        match (&self.held_modified, &read.modified) {
            (Some(held), Some(fetched)) if document::is_older(fetched, held) => {
                Err(format!("a document last changed {fetched}, older than the one held ({held}): a lagging mirror"))
            }
            _ => Ok(()),
        }
    }
}

impl Side for Npm {
    fn id(&self) -> SideId {
        SideId::Npm
    }

    fn classify(&self, request: &Request<'_>) -> Decision {
        self.classify_path(request).unwrap_or_else(Decision::Refuse)
    }

    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        self.not_found.get(&request.key, now, frozen)
    }

    /// Remembers the registry's "no such package" (or version) a minute:
    /// one published then is found.
    fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: Instant) {
        if matches!(answer.status.as_u16(), 404 | 410) {
            self.not_found.remember(&request.key, Arc::clone(answer), NEGATIVE_TTL, now);
        }
    }

    /// A tarball's integrity: from the held document that lists its
    /// version, else from its version's document.
    fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        let config = self.config();
        let Some(Keyed { registry, space, kind: KeyKind::Tarball(tarball) }) = Keyed::parse(&config, &request.key)
        else {
            return Vec::new();
        };
        if let Some(dist) = self.held_dist(registry, space, &tarball) {
            self.keep_dist(&request.key, dist);
            return Vec::new();
        }
        let version = registry.key(space, &format!("version/{}/{}", tarball.name, tarball.version));
        let origin = registry.origin(format!("/{}/{}", tarball.name.in_path(), tarball.version));
        let mut version = CachedRequest::new(SideId::Npm, version, origin, Class::Revalidated);
        version.wanted.fresh_for = VERSION_TTL;
        version.asking = request.asking.clone();
        vec![version]
    }

    /// Where the tarball's document says it is.
    fn located(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Origin> {
        let config = self.config();
        let Keyed { registry, kind: KeyKind::Tarball(tarball), .. } = Keyed::parse(&config, &request.key)? else {
            return None;
        };
        let url = self.dist_of(request, &tarball, prerequisites)?.tarball?;
        if let Some(path) = registry.own_path(&url) {
            return Some(registry.origin(path.to_owned()));
        }
        let (scheme, rest) = url.split_once("://")?;
        let slash = rest.find('/')?;
        Some(Origin {
            pool: format!("npm {} tarballs", registry.name),
            instances: vec![format!("{scheme}://{}", &rest[..slash])],
            path: rest[slash..].to_owned(),
        })
    }

    /// A document must be one and not older than the one held; a tarball
    /// must hash to what its version's document says.
    fn verifier(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let config = self.config();
        match Keyed::parse(&config, &request.key)?.kind {
            KeyKind::Document(..) => {
                let held = self.cache.read_small(&request.key, DOCUMENT_LIMIT);
                Some(Arc::new(DocumentVerifier { held_modified: held.and_then(|held| document::modified(&held)) }))
            }
            KeyKind::Version(..) => Some(Arc::new(DocumentVerifier { held_modified: None })),
            KeyKind::Tarball(tarball) => {
                let integrity = self.dist_of(request, &tarball, prerequisites).and_then(|dist| Integrity::of(&dist));
                Some(Arc::new(TarballVerifier { integrity, name: format!("{}@{}", tarball.name, tarball.version) }))
            }
        }
    }

    /// A document as the client gets it, whole (an answer pkgproxy holds in
    /// memory).
    fn rewrite(&self, rewrite: &Rewrite, body: &[u8]) -> Option<Bytes> {
        let mut rewriter = self.streaming_rewrite(rewrite)?;
        let mut output = Vec::with_capacity(body.len());
        rewriter.feed(body, &mut output);
        rewriter.finish(&mut output);
        Some(Bytes::from(output))
    }

    /// A document as it streams to the client: its tarball links at
    /// pkgproxy.
    fn streaming_rewrite(&self, rewrite: &Rewrite) -> Option<Box<dyn StreamRewriter>> {
        Some(Box::new(links_for(rewrite).rewriter()))
    }

    /// A held document, from the compressed form kept for clients like
    /// this one; made for the next one when there is none.
    fn compressed(&self, rewrite: &Rewrite, stored: &StoredBody) -> Option<Pieced> {
        if stored.size < PACKED_FROM {
            return None;
        }
        let links = links_for(rewrite);
        let key = packed::key(&stored.sha256, &links);
        let Some(entry) = self.cache.lookup(&key) else {
            self.pack_later(key, stored, links);
            return None;
        };
        let file = self.cache.open_body(&entry).ok()?;
        let pieces = Box::new(std::iter::once(Piece::File { offset: 0, len: entry.size }));
        Some(Pieced { file, len: entry.size, encoding: "gzip", pieces })
    }

    /// A registry's `5xx` is told as pkgproxy's `424`, as an unreachable
    /// registry is: npm retries a `5xx` for a minute per package.
    fn upstream_errors_fail(&self) -> bool {
        true
    }

    /// In npm's shape: `{"error": "..."}`, the reason phrase naming
    /// pkgproxy.
    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        let mut answer = failure.not_held("pkgproxyctl warm npm fetches what a lockfile needs");
        let text = String::from_utf8_lossy(&answer.body).trim().to_owned();
        answer.body = Bytes::from(serde_json::json!({ "error": text }).to_string());
        answer.headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        answer
    }

    /// What a client's token brought is for clients the registry accepts;
    /// a compressed form of a document is for the clients of the document.
    fn readable_by_anyone(&self, key: &str) -> bool {
        let config = self.config();
        !key.starts_with(&packed::prefix(""))
            && Keyed::parse(&config, key).is_none_or(|keyed| keyed.space == Space::Shared)
    }

    /// A tarball is proved by the documents that give its integrity.
    fn proving_keys(&self, key: &str) -> Vec<String> {
        let config = self.config();
        let Some(Keyed { registry, space, kind: KeyKind::Tarball(tarball) }) = Keyed::parse(&config, key) else {
            return Vec::new();
        };
        vec![
            registry.key(space, &format!("version/{}/{}", tarball.name, tarball.version)),
            registry.key(space, &format!("doc/{}/{}", tarball.name, Form::Full.as_str())),
        ]
    }

    /// The request a client makes for what is cached under `key`:
    /// documents rank before the tarballs they prove. What a token brought
    /// is not carried, nor abbreviated documents (a request names no
    /// form).
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        let config = self.config();
        let keyed = Keyed::parse(&config, key).filter(|keyed| keyed.space == Space::Shared)?;
        let base = format!("{}{}", crate::route::prefix_of(SideId::Npm)?, keyed.registry.mount);
        match keyed.kind {
            KeyKind::Document(name, Form::Full) => Some((0, format!("{base}/{}", name.in_path()))),
            KeyKind::Document(_, Form::Abbreviated) => None,
            KeyKind::Version(name, version) => Some((0, format!("{base}/{}/{version}", name.in_path()))),
            KeyKind::Tarball(tarball) => Some((1, format!("{base}{}", tarball.path()))),
        }
    }

    fn needs(&self, asked: serde_json::Value, _held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        self.lock_needs(asked)
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let lines = vec![
            format!("npm config set registry http://{host}/npm/"),
            format!("pkgproxyctl setup npm -addr {host} | sh"),
            format!("pkgproxyctl setup yarn -addr {host} | sh"),
        ];
        Some(ClientSetup { clients: "npm, pnpm, yarn".to_owned(), lines })
    }
}

#[cfg(test)]
mod tests;
