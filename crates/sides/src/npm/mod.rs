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

mod config;
mod document;
mod gate;
mod keys;
mod links;
mod name;
pub mod needs;
mod packed;
mod reporting;
pub mod setup;
mod tarball;

use arc_swap::Guard;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, VARY};
use http::{HeaderMap, Method};
use pkgproxy_cache::{Cache, Class, PassedAnswer, Verifier};
use sha2::{Digest, Sha256};

use crate::config::Reloadable;
use crate::decision::{
    forwarded_headers, Access, Asking, CachedRequest, ClientAuthorization, DatedResume, Decision, ForwardRequest,
    LocalAnswer, Located, Refusal, Reply, Rewrite, UpstreamAuth, Wanted,
};
use crate::failure::Failure;
use crate::id::SideId;
use crate::named::{NEGATIVE_TTL, REFRESH_EVERY};
use crate::needs::{HeldBodies, Needs, NeedsError};
use crate::remembered::RememberedAnswers;
use crate::role::{
    Explaining, Exporting, Fetching, Private, Remembering, Resolving, Rewriting, Roles, UpstreamFailures,
};
use crate::route::Request;
use crate::{ClientSetup, Piece, Pieced, Side, StoredBody, StreamRewriter, UpstreamPath};
use config::Registry;
pub use config::{Config, Options, RegistryOptions, TarballUrls, DEFAULT_INDEX_TTL, DEFAULT_REGISTRY};
use document::DocumentVerifier;
use keys::{Form, KeyKind, Keyed, Space};
use links::Links;
use name::{Asked, PackageName, Tarball};
use tarball::{Integrity, TarballVerifier};

/// How long a version's document is served without asking: a version is
/// never published twice, only withdrawn.
const VERSION_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a token the registry accepted for a package stands.
const ACCESS_RECHECK: Duration = Duration::from_secs(300);
/// The largest request body passed on (a publish carries its tarball).
const BODY_LIMIT: u64 = 256 * 1024 * 1024;
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
            Asked::Document(name) => {
                let cached = self.document(registry, &name, Form::asked(request.headers.get(ACCEPT)), request);
                self.with_access(registry, &name, cached, request)
            }
            Asked::Version(name, version) => {
                let cached = self.version(registry, &name, &version, request);
                self.with_access(registry, &name, cached, request)
            }
            Asked::Tarball(tarball) => {
                let cached = self.tarball(registry, &tarball, request);
                self.with_access(registry, &tarball.name, cached, request)
            }
        };
        Ok(Decision::cache(cached))
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
        tarball_in(registry, Self::space(request), tarball)
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

    /// A request of `package` with the client's token: fetched with it,
    /// and what is held in its space served once the registry accepted the
    /// token for that package. The grant names the package: a token the
    /// registry takes for one package says nothing of another (npm answers
    /// `404` to a token that may not read a package). It is confirmed with
    /// the package's document, which the registry itself serves, wherever
    /// a tarball is; offline, a token confirmed for the package before.
    fn with_access(
        &self,
        registry: &Registry,
        package: &PackageName,
        mut cached: CachedRequest,
        request: &Request<'_>,
    ) -> CachedRequest {
        let Some(authorization) = request.headers.get(AUTHORIZATION) else { return cached };
        let credential = hex::encode(&Sha256::digest(authorization.as_bytes())[..16]);
        cached.asking.auth = UpstreamAuth::Client(ClientAuthorization(authorization.clone()));
        let grant = format!("npm {} {package} {credential}", registry.name);
        let confirmed_at = Some(registry.origin(format!("/{}", package.in_path())));
        cached.access = Some(Box::new(Access { offline: true, confirmed_at, ..Access::new(grant, ACCESS_RECHECK) }));
        cached
    }

    /// Whether the document `key` was marked to be asked again (once).
    fn take_refresh(&self, key: &str) -> bool {
        self.to_refresh.lock().remove(key)
    }

    /// Marks `key` to be asked again at its next request, unless it was a
    /// moment ago.
    fn mark_for_refresh(&self, key: String) {
        let now = Instant::now();
        let mut refreshed = self.refreshed.lock();
        refreshed.retain(|_, at| now.duration_since(*at) < REFRESH_EVERY);
        if refreshed.insert(key.clone(), now).is_none() {
            self.to_refresh.lock().insert(key);
        }
    }

    /// The `dist` a held document of `keyed`'s registry and space gives
    /// `tarball`; when none lists its version, the documents are marked to
    /// be asked again.
    fn held_dist(&self, registry: &Registry, space: Space, tarball: &Tarball) -> Option<document::Dist> {
        let mut unlisting = Vec::new();
        for form in [Form::Full, Form::Abbreviated] {
            let key = registry.key(space, &format!("doc/{}/{}", tarball.name, form.as_str()));
            let Some(body) = self.cache.read_small(&key, document::LIMIT) else { continue };
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
        if let Some(dist) = self.dists.lock().get(&request.key) {
            return Some(dist.clone());
        }
        document::read(prerequisites.first()?, Some(&tarball.version))?.dist
    }

    /// Makes the compressed form `key` of the document `stored` for
    /// clients whose links are `links`, in the background, unless it is
    /// being made, too many are being made, or the document has as many
    /// forms as it may.
    fn pack_later(&self, key: String, stored: &StoredBody, links: Links) {
        let mut packing = self.packing.lock();
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
            if let Err(error) = packed::make(&cache, &packed_key, &stored, links) {
                tracing::warn!(key = packed_key, %error, "a document's compressed form was not made");
            }
            all_packing.lock().remove(&packed_key);
        });
        if made.is_err() {
            packing.remove(&key);
        }
    }

    fn keep_dist(&self, key: &str, dist: document::Dist) {
        let mut dists = self.dists.lock();
        if dists.len() >= DISTS_KEPT {
            dists.clear();
        }
        dists.insert(key.to_owned(), dist);
    }
}

/// The request of `tarball` of `registry` in `space`.
fn tarball_in(registry: &Registry, space: Space, tarball: &Tarball) -> CachedRequest {
    let key = registry.key(space, &format!("tarball/{}/{}", tarball.name, tarball.file));
    CachedRequest {
        reply: Reply { dated_resume: DatedResume::Honoured, ..Reply::default() },
        ..CachedRequest::new(SideId::Npm, key, registry.origin(tarball.path()), Class::Immutable)
    }
}

/// Where the documents served for `rewrite` point tarballs.
fn links_for(rewrite: &Rewrite) -> Links {
    Links { base: rewrite.served_at.base.clone(), keep_npm_registry: rewrite.client_rehomes }
}

impl Side for Npm {
    fn id(&self) -> SideId {
        SideId::Npm
    }

    fn classify(&self, request: &Request<'_>) -> Decision {
        self.classify_path(request).unwrap_or_else(Decision::Refuse)
    }

    /// A document must be one and not older than the one held; a tarball
    /// must hash to what its version's document says.
    fn verifier(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let config = self.config();
        match Keyed::parse(&config, &request.key)?.kind {
            KeyKind::Document(..) => {
                let held = self.cache.read_small(&request.key, document::LIMIT);
                Some(Arc::new(DocumentVerifier { held_modified: held.and_then(|held| document::modified(&held)) }))
            }
            KeyKind::Version(..) => Some(Arc::new(DocumentVerifier { held_modified: None })),
            KeyKind::Tarball(tarball) => {
                let integrity = self.dist_of(request, &tarball, prerequisites).and_then(|dist| Integrity::of(&dist));
                Some(Arc::new(TarballVerifier { integrity, name: format!("{}@{}", tarball.name, tarball.version) }))
            }
        }
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

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let lines = vec![
            format!("npm config set registry http://{host}/npm/"),
            format!("pkgproxyctl setup npm --addr {host} | sh"),
            format!("pkgproxyctl setup yarn --addr {host} | sh"),
        ];
        Some(ClientSetup { clients: "npm, pnpm, yarn".to_owned(), lines })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            fetching: Some(self),
            remembering: Some(self),
            rewriting: Some(self),
            private: Some(self),
            exporting: Some(self),
            resolving: Some(self),
            reporting: Some(self),
            explaining: Some(self),
            gating: Some(self),
            ..Roles::default()
        }
    }
}

impl Fetching for Npm {
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

    /// Where the tarball's document says it is: below the registry, on
    /// its pool; on one of its instances' hosts, with that instance's
    /// credentials; elsewhere, without any (a client's token goes only to
    /// the registry it was given for).
    fn located(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Located> {
        let config = self.config();
        let Keyed { registry, kind: KeyKind::Tarball(tarball), .. } = Keyed::parse(&config, &request.key)? else {
            return None;
        };
        let url = self.dist_of(request, &tarball, prerequisites)?.tarball?;
        if let Some(path) = registry.own_path(&url) {
            return Some(Located::at_registry(registry.origin(path.to_owned())));
        }
        registry.mirrors.locate(format!("npm {} tarballs", registry.name), &url)
    }

    /// A registry's `5xx` is told as pkgproxy's `424`, as an unreachable
    /// registry is: npm retries a `5xx` for a minute per package.
    fn upstream_failures(&self) -> UpstreamFailures {
        UpstreamFailures { errors_fail: true, waits_fail: false }
    }
}

impl Remembering for Npm {
    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        self.not_found.get(&request.key, now, frozen)
    }

    /// Remembers the registry's "no such package" (or version) a minute:
    /// one published then is found. Never an answer to a client's token:
    /// npm says `404` to a token that may not read a package, which says
    /// nothing of what another client's token may read.
    fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: Instant) {
        if matches!(answer.status.as_u16(), 404 | 410) && request.access.is_none() {
            self.not_found.remember(&request.key, Arc::clone(answer), NEGATIVE_TTL, now);
        }
    }
}

impl Rewriting for Npm {
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
}

impl Private for Npm {
    /// What a client's token brought is for clients the registry accepts;
    /// a compressed form of a document is for the clients of the document.
    fn readable_by_anyone(&self, key: &str) -> bool {
        let config = self.config();
        !key.starts_with(&packed::prefix(""))
            && Keyed::parse(&config, key).is_none_or(|keyed| keyed.space == Space::Shared)
    }
}

impl Exporting for Npm {
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
}

impl Resolving for Npm {
    fn needs(&self, asked: serde_json::Value, _held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        self.lock_needs(asked)
    }
}

impl Explaining for Npm {
    fn upstream_path(&self, url: &str, _held: &dyn HeldBodies) -> Option<UpstreamPath> {
        self.config().upstream_path(url).map(UpstreamPath::At)
    }
}

#[cfg(test)]
mod tests;
