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
//!
//! The folder: `config` (the `[registry]` section), `routing` (what a
//! request becomes upstream and who is served it), `manifest` (the
//! manifest verifier), `errors` (the error envelope), [`links`], [`name`]
//! and [`needs`]; this file holds the side and its `impl Side`.

mod config;
mod errors;
pub mod links;
mod manifest;
pub mod name;
pub mod needs;
mod reporting;
mod routing;
pub mod setup;

use arc_swap::Guard;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use pkgproxy_cache::{Cache, Class, Expected, PassedAnswer, Verifier};

use crate::config::Reloadable;
use crate::decision::{CachedRequest, DatedResume, Decision, LocalAnswer, Refusal, UpstreamAuth};
use crate::failure::Failure;
use crate::id::SideId;
use crate::needs::{HeldBodies, Needs, NeedsError};
use crate::remembered::RememberedAnswers;
use crate::role::{Digests, Private, Remembering, Resolving, Roles};
use crate::route::Request;
use crate::side::{ClientSetup, Side};
pub use config::{Config, Options, Upstream, UpstreamOptions, BUILT_IN, DEFAULT_PULL_RESERVE, DEFAULT_TAG_TTL};
pub use errors::failure_answer;
use errors::{ping, refusal_of};
use manifest::Manifest;
use name::{Digest, Endpoint, Reference};
pub use routing::MANIFEST_TYPES;
use routing::{
    digest_headers, query_value, reply_headers, repository_links, repository_name, takes_every_modern_type,
    visibility_of,
};

/// How long a refusal of pkgproxy's own token answers the next anonymous
/// requests for its repository without asking the registry again.
pub const REFUSAL_KEPT: Duration = Duration::from_secs(60);
/// How long the registry's word that a credential may pull from a private
/// repository is taken for that credential's next requests.
pub const PRIVATE_RECHECK: Duration = Duration::from_secs(5 * 60);

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

#[cfg(test)]
mod tests;
