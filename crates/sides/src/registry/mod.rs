//! The registry side: a pull-through mirror of OCI registries (Docker Hub
//! and the others) for dockerd, containerd, podman and skopeo, on the one
//! port under `/v2/`.
//!
//! What it decides:
//! - `/v2/` is answered here, `200 {}`, offline too: clients ping it.
//! - The registry a request is for comes from the path and `?ns=`
//!   ([`name`]); one pkgproxy does not know is a fast `404 NAME_UNKNOWN`,
//!   never a connection (the guard against being an open proxy).
//! - Blobs and manifests by digest never change: cached under the digest
//!   alone (one entry whatever repository or registry named it), checked
//!   against it before they are kept, and served without asking upstream
//!   under a repository known to hold them publicly ([`links`]).
//! - A private repository's content is cached too, but served only to a
//!   client whose own credentials the registry accepts for it, confirmed
//!   upstream every few minutes per credential and repository.
//! - Manifests by tag are revalidated after `[registry] tag_ttl`.
//! - Only pulls: a push is `405 UNSUPPORTED`.
//!
//! Every answer carries `Docker-Distribution-Api-Version: registry/2.0`
//! (old clients refuse an endpoint without it), and what pkgproxy cannot
//! serve is told in the spec's JSON error envelope.

pub mod links;
pub mod name;
pub mod needs;
mod reporting;
pub mod setup;

use arc_swap::Guard;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Method, StatusCode};
use pkgproxy_cache::{BodyHashes, BodyReader, Cache, Class, Expected, PassedAnswer, Verifier};
use serde_json::json;

use crate::config::{ConfigError as SectionError, Configures, Reloadable, SideConfig, SidesFile};
use crate::decision::{
    Access, CachedRequest, ClientAuthorization, Credentials, DatedResume, Decision, ForwardRequest, LocalAnswer,
    Origin, Pointer, PointerRequest, Redirects, Refusal, UpstreamAuth,
};
use crate::decision::{Asking, Reply, Wanted};
use crate::failure::{retry_after_secs, Failure};
use crate::id::SideId;
use crate::instances::Instances;
use crate::needs::{HeldBodies, Needs, NeedsError};
use crate::remembered::RememberedAnswers;
use crate::role::{Digests, Private, Remembering, Resolving, Roles};
use crate::route::Request;
use crate::{ClientSetup, Side};
use links::Visibility;
use name::{Digest, Endpoint, Located, Reference};
use sha2::{Digest as _, Sha256};

/// How long a tag's manifest is served without asking upstream.
pub const DEFAULT_TAG_TTL: Duration = Duration::from_secs(60);
/// The pulls left in a registry's quota at or below which a moved tag is
/// not followed while its last content is cached.
pub const DEFAULT_PULL_RESERVE: u64 = 10;
/// How long a refusal of pkgproxy's own token answers the next anonymous
/// requests for its repository without asking the registry again.
pub const REFUSAL_KEPT: Duration = Duration::from_secs(60);
/// How long the registry's word that a credential may pull from a private
/// repository is taken for that credential's next requests.
pub const PRIVATE_RECHECK: Duration = Duration::from_secs(5 * 60);

/// The registries known without configuration, and where each is.
pub const BUILT_IN: [(&str, &str); 7] = [
    (name::DOCKER_HUB, "https://registry-1.docker.io"),
    ("ghcr.io", "https://ghcr.io"),
    ("quay.io", "https://quay.io"),
    ("registry.k8s.io", "https://registry.k8s.io"),
    ("gcr.io", "https://gcr.io"),
    ("public.ecr.aws", "https://public.ecr.aws"),
    ("mcr.microsoft.com", "https://mcr.microsoft.com"),
];

/// What manifests are asked for upstream, on `HEAD` and `GET` alike (so
/// both name one digest): the OCI and Docker v2 manifests and indexes.
/// Never schema1, `application/json` or `*/*`, which may make a registry
/// convert the manifest.
pub const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// The header every answer of this side carries.
const API_VERSION: (&str, &str) = ("docker-distribution-api-version", "registry/2.0");

/// One upstream registry, as configured (`[[registry.upstream]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOptions {
    /// Its name, as clients write it in image references.
    pub name: String,
    /// Its instances' base URLs (the registry, or mirrors of it).
    pub mirrors: Vec<String>,
    /// An account pkgproxy pulls as: its user name. Everything it may read
    /// becomes readable to every client of pkgproxy.
    pub username: Option<String>,
    /// Its password, or a token standing for it.
    pub password: Option<String>,
}

impl UpstreamOptions {
    /// The account pkgproxy pulls as, if one is configured.
    fn credentials(&self) -> Option<Credentials> {
        let user = self.username.as_ref()?;
        Some(Credentials(format!("{user}:{}", self.password.as_deref().unwrap_or(""))))
    }
}

/// The registry side's configuration, as written (`[registry]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// Upstreams beside the built-in ones, or mirrors for a built-in one
    /// (`[[registry.upstream]]`).
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<UpstreamOptions>,
    /// How long a tag is served without asking upstream.
    #[serde(default, with = "humantime_serde")]
    pub tag_ttl: Option<Duration>,
    /// The pulls kept in reserve in a registry's quota.
    pub pull_reserve: Option<u64>,
    /// Whether private content is served while offline to a credential
    /// the registry accepted for it before.
    #[serde(default)]
    pub private_offline: bool,
}

/// A registry configuration that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("registry.upstream {name:?}: {reason}")]
pub struct ConfigError {
    /// The upstream at fault.
    pub name: String,
    /// What is wrong, for people.
    pub reason: String,
}

/// An upstream registry: its name and its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// The name clients use.
    pub name: String,
    /// Its instances.
    pub mirrors: Instances,
    /// The account pkgproxy pulls as, if any.
    pub credentials: Option<Credentials>,
    /// The one mirror is a parent pkgproxy's path for this registry
    /// (`http://parent:3142/v2/ghcr.io`): upstream paths go below it
    /// without their own `/v2`.
    pub below_parent: bool,
}

/// The registry side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    upstreams: Vec<Upstream>,
    tag_ttl: Duration,
    pull_reserve: u64,
    private_offline: bool,
}

impl Config {
    /// Validates `options`: configured mirrors replace a built-in
    /// registry's, a new name adds a registry.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let mut upstreams: Vec<Upstream> = BUILT_IN
            .iter()
            .map(|(name, url)| Upstream {
                name: name.to_string(),
                mirrors: Instances::built_in(url),
                credentials: None,
                below_parent: false,
            })
            .collect();
        for configured in &options.upstreams {
            let bad = |reason: String| ConfigError { name: configured.name.clone(), reason };
            let name = name::canonical(&configured.name).to_string();
            if name.is_empty()
                || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".-:".contains(&b))
            {
                return Err(bad("a registry name is a lower-case host name, with a port if need be".into()));
            }
            if configured.mirrors.is_empty() {
                return Err(bad("has no mirrors".into()));
            }
            let credentials = configured.credentials();
            if credentials.as_ref().is_some_and(|c| c.0.split_once(':').is_none_or(|(user, _)| user.is_empty())) {
                return Err(bad("credentials are user:password".into()));
            }
            let mirrors = Instances::new(&configured.mirrors, None).map_err(bad)?;
            upstreams.retain(|upstream| upstream.name != name);
            upstreams.push(Upstream { name, mirrors, credentials, below_parent: false });
        }
        Ok(Config {
            upstreams,
            tag_ttl: options.tag_ttl.unwrap_or(DEFAULT_TAG_TTL),
            pull_reserve: options.pull_reserve.unwrap_or(DEFAULT_PULL_RESERVE),
            private_offline: options.private_offline,
        })
    }

    /// Every registry fetched through the parent pkgproxy at `parent`
    /// (`http://host:port`), which keeps its own mirrors of each.
    pub fn chain_to(&mut self, parent: &str) {
        for upstream in &mut self.upstreams {
            upstream.mirrors.chain_to(parent, &format!("/v2/{}", upstream.name));
            upstream.below_parent = true;
        }
    }

    /// The upstream named `name`.
    pub fn upstream(&self, name: &str) -> Option<&Upstream> {
        self.upstreams.iter().find(|upstream| upstream.name == name)
    }

    /// The configured instances: these may be on local addresses (each
    /// on its own port only).
    pub fn trusted_urls(&self) -> Vec<String> {
        self.upstreams.iter().flat_map(|upstream| upstream.mirrors.trusted_urls()).collect()
    }
}

/// The registry side at run time: its configuration, and the cache a
/// manifest fetched by tag is also kept in under its digest.
#[derive(Debug)]
pub struct Registry {
    config: Reloadable<Config>,
    cache: Cache,
    /// The repositories (`registry/repository`) an anonymous token cannot
    /// pull from: a client's own credentials go to them. Learnt again after
    /// a restart (the links of their content are kept).
    private: Mutex<HashSet<String>>,
    /// The refusals of pkgproxy's own token, by repository: the next
    /// anonymous request for it is answered from here for a while (Docker
    /// Hub counts what it refuses against the site's pull limit).
    refused: RememberedAnswers,
}

impl Registry {
    /// The side with `config`, keeping manifests in `cache`.
    pub fn new(config: Config, cache: Cache) -> Registry {
        Registry {
            config: Reloadable::new(config),
            cache,
            private: Mutex::new(HashSet::new()),
            refused: RememberedAnswers::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }

    /// A blob or manifest by digest: one entry per digest, checked against
    /// it, never revalidated, and served under this repository as its link
    /// says ([`Registry::access`]).
    fn by_digest(
        &self,
        upstream: &Upstream,
        located: &Located,
        kind: &str,
        digest: &Digest,
        reply: HeaderMap,
        client_headers: &HeaderMap,
    ) -> CachedRequest {
        let what = if kind == "blob" { "blobs" } else { "manifests" };
        let origin = origin(upstream, format!("/v2/{}/{what}/{digest}", located.repository));
        let key = format!("registry/{kind}/{}/{}", digest.algorithm, digest.hex);
        let expected = match digest.algorithm {
            "sha512" => Expected { sha512: Some(digest.hex.clone()), ..Expected::default() },
            _ => Expected { sha256: Some(digest.hex.clone()), ..Expected::default() },
        };
        let unknown_code = if kind == "blob" { "BLOB_UNKNOWN" } else { "MANIFEST_UNKNOWN" };
        let (upstream_auth, access) = self.access(upstream, located, digest, client_headers, unknown_code);
        CachedRequest {
            access,
            wanted: Wanted { expected, ..Wanted::default() },
            asking: Asking { headers: upstream_headers(kind), redirects: Redirects::Followed, auth: upstream_auth },
            reply: Reply {
                dated_resume: DatedResume::Honoured,
                headers: reply,
                content_headers: digest_headers(digest),
                ..Reply::default()
            },
            ..CachedRequest::new(SideId::Registry, key, origin, Class::Immutable)
        }
    }

    /// How content `digest` is asked for under the located repository, and
    /// who is served it from the cache:
    /// - linked publicly: everyone, with nothing asked;
    /// - in a private repository, to a client with credentials: with its
    ///   credentials, once the registry accepts them for the repository
    ///   (taken for [`PRIVATE_RECHECK`]);
    /// - otherwise (not linked, or linked privately and asked without
    ///   credentials): with pkgproxy's own token, once the registry says it
    ///   serves the digest under that name (a private repository then
    ///   answers with its challenge, for the client to answer).
    fn access(
        &self,
        upstream: &Upstream,
        located: &Located,
        digest: &Digest,
        client_headers: &HeaderMap,
        unknown_code: &'static str,
    ) -> (UpstreamAuth, Option<Box<Access>>) {
        let links = links::Repository::new(&located.registry, &located.repository);
        let visibility = links.visibility(&self.cache, digest);
        if visibility == Some(Visibility::Public) {
            return (pull_scope(upstream, located), None);
        }
        let repository = format!("{}/{}", located.registry, located.repository);
        let private = visibility == Some(Visibility::Private) || self.is_private(located);
        let access = |grant: String, offline: bool| {
            Some(Box::new(Access { offline, unknown_code, ..Access::new(grant, PRIVATE_RECHECK) }))
        };
        match client_headers.get(http::header::AUTHORIZATION).filter(|_| private) {
            Some(authorization) => {
                let credential = hex::encode(&Sha256::digest(authorization.as_bytes())[..16]);
                let grant = format!("{repository} {credential}");
                let auth = UpstreamAuth::Client(ClientAuthorization(authorization.clone()));
                (auth, access(grant, self.config().private_offline))
            }
            None => (pull_scope(upstream, located), access(format!("{repository} as pkgproxy"), false)),
        }
    }

    /// A manifest by tag, revalidated after the tag's window.
    fn by_tag(&self, upstream: &Upstream, located: &Located, tag: &str, reply: HeaderMap) -> PointerRequest {
        let origin = origin(upstream, format!("/v2/{}/manifests/{tag}", located.repository));
        let key = format!("registry/tag/{}/{}/{tag}", located.registry, located.repository);
        let pointer = Pointer {
            name: format!("{}/{}:{tag}", located.registry, located.repository),
            digest_header: HeaderName::from_static("docker-content-digest"),
            quota: Some((HeaderName::from_static("ratelimit-remaining"), self.config().pull_reserve)),
        };
        let name = CachedRequest {
            wanted: Wanted { fresh_for: self.config().tag_ttl, ..Wanted::default() },
            asking: Asking {
                headers: upstream_headers("manifest"),
                auth: pull_scope(upstream, located),
                ..Asking::default()
            },
            reply: Reply { headers: reply, ..Reply::default() },
            ..CachedRequest::new(SideId::Registry, key, origin, Class::Revalidated)
        };
        PointerRequest { name, pointer }
    }

    /// Whether the manifest cached for the tag is of a type the client's
    /// `Accept` names.
    fn holds_accepted(&self, located: &Located, tag: &str, headers: &HeaderMap) -> bool {
        let key = format!("registry/tag/{}/{}/{tag}", located.registry, located.repository);
        let Some(entry) = self.cache.lookup(&key) else { return false };
        let held = entry.headers.iter().find(|(name, _)| name.eq_ignore_ascii_case("content-type"));
        held.is_some_and(|(_, media_type)| accepted_types(headers).contains(&media_type.as_str()))
    }

    fn is_private(&self, located: &Located) -> bool {
        let name = format!("{}/{}", located.registry, located.repository);
        self.private.lock().contains(&name)
    }

    /// A request passed through as the client asked it, with its own
    /// `Accept` and credentials (a private repository's, say), never cached
    /// or shared; a blob's redirect goes to the client, which follows it,
    /// and an upstream's challenge too, which the client answers itself.
    fn as_asked(&self, upstream: &Upstream, located: &Located, request: &Request<'_>) -> ForwardRequest {
        let what = match &located.endpoint {
            Endpoint::Blob(digest) => format!("blobs/{digest}"),
            Endpoint::Manifest(Reference::Digest(digest)) => format!("manifests/{digest}"),
            Endpoint::Manifest(Reference::Tag(tag)) => format!("manifests/{tag}"),
            Endpoint::Tags => "tags/list".to_string(),
        };
        let mut headers = HeaderMap::new();
        for name in [ACCEPT, http::header::AUTHORIZATION] {
            for value in request.headers.get_all(&name) {
                headers.append(name.clone(), value.clone());
            }
        }
        // The registry is named by the path upstream: containerd's `ns`
        // stays here.
        let query: Vec<&str> =
            request.query.unwrap_or("").split('&').filter(|p| !p.is_empty() && !p.starts_with("ns=")).collect();
        let path = match query.is_empty() {
            true => format!("/v2/{}/{what}", located.repository),
            false => format!("/v2/{}/{what}?{}", located.repository, query.join("&")),
        };
        ForwardRequest {
            side: SideId::Registry,
            origin: origin(upstream, path),
            method: request.method.clone(),
            headers,
            body_limit: 0,
            record: None,
            rewrite: None,
        }
    }
}

/// Reads and validates the Registry side's section of `file`.
pub fn configure(file: &SidesFile) -> Result<Box<dyn SideConfig>, SectionError> {
    let config = Config::new(&file.section(SideId::Registry)?)
        .map_err(|error| SectionError::invalid(SideId::Registry, error))?;
    Ok(Box::new(config))
}

impl Configures for Config {
    type Side = Registry;
    const ID: SideId = SideId::Registry;

    fn open_side(&self, cache: &Cache) -> Result<Registry, String> {
        Ok(Registry::new(self.clone(), cache.clone()))
    }

    fn swap_into(&self, side: &Registry) {
        side.config.swap(self.clone());
    }

    fn trusted(&self) -> Vec<String> {
        self.trusted_urls()
    }

    fn chain(&mut self, parent: &str) {
        self.chain_to(parent);
    }
}

impl Side for Registry {
    fn id(&self) -> SideId {
        SideId::Registry
    }

    fn classify(&self, request: &Request<'_>) -> Decision {
        if !matches!(*request.method, Method::GET | Method::HEAD) {
            return Decision::Refuse(Refusal::method_not_allowed("GET, HEAD").with_code("UNSUPPORTED"));
        }
        if request.path == "/" {
            return Decision::Answer(ping());
        }
        let ns = query_value(request.query, "ns");
        let ns = ns.as_deref();
        let located = match name::locate(request.path, ns) {
            Ok(located) => located,
            Err(refusal) => return Decision::Refuse(refusal),
        };
        let config = self.config();
        let Some(upstream) = config.upstream(&located.registry) else {
            let reason = format!("no registry {} is configured; add it as a [[registry.upstream]]", located.registry);
            return Decision::Refuse(Refusal::not_found(reason).with_code("NAME_UNKNOWN"));
        };
        let client = request.headers.get(http::header::AUTHORIZATION).filter(|_| self.is_private(&located));
        let reply = reply_headers(ns);
        match &located.endpoint {
            Endpoint::Blob(digest) => {
                Decision::cache(self.by_digest(upstream, &located, "blob", digest, reply, request.headers))
            }
            Endpoint::Manifest(Reference::Digest(digest)) => {
                Decision::cache(self.by_digest(upstream, &located, "manifest", digest, reply, request.headers))
            }
            // A private repository's tags are the client's to ask, with its
            // own credentials: what they point at is then cached by digest.
            Endpoint::Manifest(Reference::Tag(_)) if client.is_some() => {
                Decision::Forward(self.as_asked(upstream, &located, request))
            }
            Endpoint::Manifest(Reference::Tag(tag))
                if takes_every_modern_type(request.headers) || self.holds_accepted(&located, tag, request.headers) =>
            {
                Decision::Pointer(Box::new(self.by_tag(upstream, &located, tag, reply)))
            }
            // A client that does not take every manifest type pkgproxy asks
            // for (an old docker that reads only schema 2 manifests), and
            // not the type of the manifest the tag holds, gets the tag as it
            // asked, so it is never given a type it cannot read, and the tag
            // pkgproxy holds is left as it is.
            Endpoint::Manifest(Reference::Tag(_)) => Decision::Forward(self.as_asked(upstream, &located, request)),
            Endpoint::Tags => Decision::Forward(self.as_asked(upstream, &located, request)),
        }
    }

    /// The checks and follow-up of a fetch. A manifest is read whole
    /// before any client gets it (manifests are small, and a tag may point
    /// at one only once it is kept), and a schema 1 manifest is refused
    /// (its digest does not cover its signatures). One fetched by tag is
    /// also kept under its digest, so a pull by that digest (the next step
    /// of every client that resolved the tag) asks nothing upstream.
    fn verifier(&self, request: &CachedRequest, _prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let by_tag = request.key.starts_with("registry/tag/");
        if !by_tag && !request.key.starts_with("registry/manifest/") {
            return None;
        }
        let manifest = Manifest {
            cache: self.cache.clone(),
            keep_by_digest: by_tag,
            links: repository_links(request).map(|links| (links, visibility_of(request))),
        };
        Some(Arc::new(manifest))
    }

    /// The request a client makes for what is cached under `key`: a tag
    /// (ranked first: it names a manifest), or content by digest under a
    /// repository it is linked to (manifests, then blobs). The content's
    /// own keys name no repository: each link stands for it.
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        if let Some(tagged) = key.strip_prefix("registry/tag/") {
            let (name, tag) = tagged.rsplit_once('/')?;
            return Some((0, format!("/v2/{name}/manifests/{tag}")));
        }
        let linked = key.strip_prefix("registry/link/")?;
        let (name, hex) = linked.rsplit_once('/')?;
        let (name, algorithm) = name.rsplit_once('/')?;
        let (rank, kind) = match self.cache.lookup(&format!("registry/manifest/{algorithm}/{hex}")) {
            Some(_) => (1, "manifests"),
            None => (2, "blobs"),
        };
        Some((rank, format!("/v2/{name}/{kind}/{algorithm}:{hex}")))
    }

    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        failure_answer(failure)
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        Some(ClientSetup {
            clients: "Docker, containerd, podman, skopeo, k3s, rke2".to_owned(),
            lines: vec![
                format!("{{\"registry-mirrors\": [\"http://{host}\"], \"insecure-registries\": [\"{host}\"]}}"),
                format!("pkgproxyctl setup docker --addr {host} | sudo sh"),
                format!("pkgproxyctl setup containerd --addr {host} | sudo sh"),
                format!("pkgproxyctl setup podman --addr {host} | sudo sh"),
                format!("pkgproxyctl setup k3s --addr {host} | sudo sh   # rke2: setup rke2"),
                format!("skopeo inspect --tls-verify=false docker://{host}/library/alpine:latest   # other registries: {host}/ghcr.io/OWNER/IMAGE"),
            ],
        })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            remembering: Some(self),
            private: Some(self),
            digests: Some(self),
            resolving: Some(self),
            reporting: Some(self),
            ..Roles::default()
        }
    }
}

impl Remembering for Registry {
    /// The refusal remembered at `now` for `request`, asked with pkgproxy's
    /// own token. None while offline (`frozen`): the client is told that
    /// pkgproxy is offline, which it cannot mend by asking the registry
    /// for a token.
    fn remembered(&self, request: &CachedRequest, now: std::time::Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        if frozen || !matches!(request.asking.auth, UpstreamAuth::Bearer { .. }) {
            return None;
        }
        self.refused.get(&repository_name(request)?, now, false)
    }

    /// The upstream answered `request` with `answer` at `now`, passed on: a
    /// `401` or `403` to pkgproxy's anonymous token means the repository is
    /// private, and from now on a client's own credentials are used for it;
    /// the refusal itself answers the anonymous requests of the next
    /// [`REFUSAL_KEPT`].
    fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: std::time::Instant) {
        if !matches!(answer.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return;
        }
        let Some(private) = repository_name(request) else { return };
        if matches!(request.asking.auth, UpstreamAuth::Bearer { .. }) {
            self.refused.remember(&private, Arc::new(refusal_of(answer)), REFUSAL_KEPT, now);
        }
        let newly = self.private.lock().insert(private.clone());
        if newly {
            tracing::info!(repository = private, "private: clients' own credentials go to it, uncached");
        }
    }
}

impl Private for Registry {
    /// The registry confirmed that `request`'s client may read its content
    /// under its repository (or served it): the repository is linked to
    /// the content, so the next request of the same visibility asks
    /// nothing. Blocking.
    fn granted(&self, request: &CachedRequest) {
        let Some(links) = repository_links(request) else { return };
        let Some(digest) = request.origin.path.rsplit_once('/').and_then(|(_, last)| Digest::parse(last).ok()) else {
            return;
        };
        links.link(&self.cache, &[digest], visibility_of(request));
    }

    /// Whether what is cached under `key` may be read by anyone: content
    /// by digest only when some repository links it publicly (what only
    /// private repositories hold is for their readers alone), the links
    /// themselves never. Blocking.
    /// A repository pkgproxy pulls with its own account, or one whose
    /// registry refused pkgproxy's anonymous token, is private to whoever
    /// may read it.
    fn serves_privately(&self, path: &str, query: Option<&str>) -> bool {
        let Ok(located) = name::locate(path, query_value(query, "ns").as_deref()) else { return false };
        let pulled_as_account = self.config().upstream(&located.registry).is_some_and(|up| up.credentials.is_some());
        pulled_as_account || self.is_private(&located)
    }

    fn readable_by_anyone(&self, key: &str) -> bool {
        if key.starts_with("registry/link/") || key.starts_with("registry/public/") {
            return false;
        }
        let by_digest = key.strip_prefix("registry/blob/").or_else(|| key.strip_prefix("registry/manifest/"));
        let Some((algorithm, hex)) = by_digest.and_then(|rest| rest.split_once('/')) else { return true };
        match Digest::parse(&format!("{algorithm}:{hex}")) {
            Ok(digest) => links::public_anywhere(&self.cache, &digest),
            Err(_) => false,
        }
    }
}

impl Digests for Registry {
    /// The manifest `digest` that the tag request `request` now points at:
    /// fetched by digest, never by tag, from the tag's repository.
    fn by_digest(&self, request: &CachedRequest, digest: &str) -> Option<CachedRequest> {
        let digest = Digest::parse(digest).ok()?;
        let (repository_path, _) = request.origin.path.rsplit_once("/manifests/")?;
        let mut by_digest = request.clone();
        by_digest.origin.path = format!("{repository_path}/manifests/{digest}");
        by_digest.key = format!("registry/manifest/{}/{}", digest.algorithm, digest.hex);
        by_digest.class = Class::Immutable;
        by_digest.wanted.expected = match digest.algorithm {
            "sha512" => Expected { sha512: Some(digest.hex.clone()), ..Expected::default() },
            _ => Expected { sha256: Some(digest.hex.clone()), ..Expected::default() },
        };
        by_digest.access = None;
        by_digest.reply.dated_resume = DatedResume::Honoured;
        by_digest.reply.content_headers = digest_headers(&digest);
        Some(by_digest)
    }
}

impl Resolving for Registry {
    fn needs(&self, asked: serde_json::Value, held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        self.pull_needs(asked, held)
    }
}

/// `registry/repository` of the repository `request` asks under.
fn repository_name(request: &CachedRequest) -> Option<String> {
    let registry = request.origin.pool.strip_prefix("registry ")?;
    Some(format!("{registry}/{}", repository_of(&request.origin.path)?))
}

/// What an anonymous client is told while a refusal of pkgproxy's own
/// token is remembered: the same status and challenge, in the spec's
/// error envelope (a refusal of a `HEAD` had no body to keep).
fn refusal_of(answer: &PassedAnswer) -> PassedAnswer {
    let (code, message) = match answer.status {
        StatusCode::FORBIDDEN => ("DENIED", "the registry does not let this client read it"),
        _ => ("UNAUTHORIZED", "the registry wants this client's own credentials for it"),
    };
    let challenges = answer.headers.iter().filter(|(name, _)| name.eq_ignore_ascii_case("www-authenticate"));
    let mut headers: Vec<(String, String)> = challenges.cloned().collect();
    headers.push(("content-type".into(), "application/json".into()));
    let body = json!({"errors": [{"code": code, "message": message}]}).to_string();
    PassedAnswer { status: answer.status, headers, body: Bytes::from(body) }
}

/// The links of the repository `request` asks under.
fn repository_links(request: &CachedRequest) -> Option<links::Repository> {
    let registry = request.origin.pool.strip_prefix("registry ")?;
    Some(links::Repository::new(registry, repository_of(&request.origin.path)?))
}

/// Who may read what `request` brings: what a client's own credentials
/// bring is private.
fn visibility_of(request: &CachedRequest) -> Visibility {
    match request.asking.auth {
        UpstreamAuth::Client(_) => Visibility::Private,
        _ => Visibility::Public,
    }
}

/// The repository of an upstream path `/v2/REPOSITORY/(manifests|blobs)/..`.
fn repository_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v2/")?;
    ["/manifests/", "/blobs/"].iter().find_map(|kind| rest.rsplit_once(kind).map(|(repository, _)| repository))
}

/// Pull access to the located repository, as the upstream's configured
/// account or anonymously.
fn pull_scope(upstream: &Upstream, located: &Located) -> UpstreamAuth {
    let scope = format!("repository:{}:pull", located.repository);
    UpstreamAuth::Bearer { scope, credentials: upstream.credentials.clone() }
}

fn origin(upstream: &Upstream, path: String) -> Origin {
    let path = match upstream.below_parent {
        true => path.strip_prefix("/v2").map(str::to_string).unwrap_or(path),
        false => path,
    };
    Origin { pool: format!("registry {}", upstream.name), instances: upstream.mirrors.urls().to_vec(), path }
}

/// What is asked upstream: manifests in the fixed modern set; blobs as
/// they are, unencoded.
fn upstream_headers(kind: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if kind != "blob" {
        headers.insert(ACCEPT, HeaderValue::from_static(MANIFEST_TYPES));
    }
    headers.insert(http::header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    headers
}

/// The checks of a manifest, and what is recorded once it is kept: the
/// manifest under its digest too (when fetched by tag), and the repository's
/// links to it and to what it names.
#[derive(Debug)]
struct Manifest {
    cache: Cache,
    keep_by_digest: bool,
    links: Option<(links::Repository, Visibility)>,
}

impl Verifier for Manifest {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, hashes: &BodyHashes) -> Result<(), String> {
        if hashes.size > MANIFEST_LIMIT {
            return Err(format!("a manifest of {} bytes is larger than the {MANIFEST_LIMIT} taken", hashes.size));
        }
        let mut manifest = Vec::new();
        body.read_to_end(&mut manifest).map_err(|error| format!("cannot read the manifest: {error}"))?;
        let manifest: serde_json::Value =
            serde_json::from_slice(&manifest).map_err(|_| "the manifest is not JSON".to_string())?;
        match manifest.get("schemaVersion").and_then(serde_json::Value::as_u64) {
            Some(2) => Ok(()),
            Some(1) => Err("schema 1 manifests are refused: their digest does not cover their signatures".into()),
            _ => Err("the manifest has no schemaVersion 2".into()),
        }
    }

    fn learns(&self) -> bool {
        true
    }

    fn committed(&self, body: &mut BodyReader<'_>, hashes: &BodyHashes) {
        let mut bytes = Vec::new();
        if body.take(MANIFEST_LIMIT).read_to_end(&mut bytes).is_err() || bytes.len() as u64 != hashes.size {
            return;
        }
        let parsed = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_default();
        if self.keep_by_digest {
            let media_type = parsed.get("mediaType").and_then(|media| media.as_str());
            let headers = media_type.into_iter().map(|media| ("content-type".to_string(), media.to_string())).collect();
            let key = format!("registry/manifest/sha256/{}", hashes.sha256);
            if let Err(error) = self.cache.put(&key, &bytes, headers, Class::Immutable) {
                tracing::warn!(%error, key, "cannot keep a manifest under its digest");
            }
        }
        if let Some((links, visibility)) = &self.links {
            let itself = Digest { algorithm: "sha256", hex: hashes.sha256.clone() };
            let mut named = links::named_in(&parsed);
            named.push(itself);
            links.link(&self.cache, &named, *visibility);
        }
    }
}

/// The largest manifest kept (as registries and clients limit them).
const MANIFEST_LIMIT: u64 = 4 * 1024 * 1024;

/// The headers on every answer: the API version, and the namespace
/// containerd named, echoed.
fn reply_headers(ns: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static(API_VERSION.0), HeaderValue::from_static(API_VERSION.1));
    if let Some(value) = ns.and_then(|ns| HeaderValue::from_str(ns).ok()) {
        headers.insert(HeaderName::from_static("oci-namespace"), value);
    }
    headers
}

/// The headers on an answer that carries content asked for by `digest`.
fn digest_headers(digest: &Digest) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&digest.to_string()) {
        headers.insert(HeaderName::from_static("docker-content-digest"), value);
    }
    headers
}

/// Whether the client's `Accept` (every header, every comma-separated
/// item) takes each manifest type pkgproxy asks upstream for: no `Accept`
/// at all, `*/*`, or all four.
fn takes_every_modern_type(headers: &HeaderMap) -> bool {
    let accepted = accepted_types(headers);
    accepted.is_empty()
        || accepted.contains(&"*/*")
        || MANIFEST_TYPES.split(", ").all(|wanted| accepted.contains(&wanted))
}

/// The media types the client's `Accept` names, across repeated headers and
/// comma lists, without their parameters.
fn accepted_types(headers: &HeaderMap) -> Vec<&str> {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| item.split(';').next().unwrap_or("").trim())
        .filter(|item| !item.is_empty())
        .collect()
}

/// The value of `name` in a query, percent-decoded (containerd writes
/// `ns=reg.lan%3A5000`).
fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    let raw = query?.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))?;
    Some(percent_encoding::percent_decode_str(&raw.replace('+', " ")).decode_utf8_lossy().into_owned())
}

/// The answer to `GET /v2/`.
fn ping() -> LocalAnswer {
    json_answer(StatusCode::OK, Bytes::from_static(b"{}"))
}

/// How a registry client is told of `failure`: the spec's error envelope.
/// A store shedding load is `429 TOOMANYREQUESTS` with its `Retry-After`
/// (clients retry it by themselves); an upstream that failed is `503`,
/// never a `500`.
pub fn failure_answer(failure: &Failure<'_>) -> LocalAnswer {
    let (status, code, message) = match failure {
        Failure::Refused(refusal) => {
            let mut answer =
                error(refusal.status, refusal.code.unwrap_or("DENIED"), &format!("pkgproxy: {}", refusal.reason));
            if let Some(allow) = refusal.allow {
                answer.headers.insert(ALLOW, HeaderValue::from_static(allow));
            }
            return answer;
        }
        Failure::Offline => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", "pkgproxy is offline".to_string()),
        Failure::Overloaded { retry_after } => {
            let secs = retry_after_secs(*retry_after);
            let message = format!("pkgproxy: the registry is rate-limited or overloaded; try again in {secs} s");
            let mut answer = error(StatusCode::TOO_MANY_REQUESTS, "TOOMANYREQUESTS", &message);
            answer.headers.insert(RETRY_AFTER, HeaderValue::from(secs));
            return answer;
        }
        Failure::UpstreamFailed { reason } => {
            (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", format!("pkgproxy: the registry failed: {reason}"))
        }
        Failure::Internal { reason } => (StatusCode::INTERNAL_SERVER_ERROR, "UNKNOWN", format!("pkgproxy: {reason}")),
    };
    error(status, code, &message)
}

/// `{"errors": [{"code", "message"}]}` with `status`.
fn error(status: StatusCode, code: &str, message: &str) -> LocalAnswer {
    let body = json!({"errors": [{"code": code, "message": message, "detail": null}]});
    json_answer(status, Bytes::from(body.to_string()))
}

fn json_answer(status: StatusCode, body: Bytes) -> LocalAnswer {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(HeaderName::from_static(API_VERSION.0), HeaderValue::from_static(API_VERSION.1));
    LocalAnswer::new(status, headers, body)
}

#[cfg(test)]
mod tests;
