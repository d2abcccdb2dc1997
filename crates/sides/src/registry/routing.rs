//! Where a registry request goes: the cached requests for content by
//! digest and for tags, the requests passed through as asked, who is
//! served what from the cache, and the headers asked upstream and
//! answered.

use http::header::{HeaderName, HeaderValue, ACCEPT};
use http::HeaderMap;
use pkgproxy_cache::{Class, Expected};
use sha2::{Digest as _, Sha256};

use super::config::Upstream;
use super::errors::API_VERSION;
use super::links::{self, Visibility};
use super::name::{Digest, Endpoint, Located, Reference};
use super::{Registry, PRIVATE_RECHECK};
use crate::decision::{
    Access, Asking, CachedRequest, ClientAuthorization, DatedResume, ForwardRequest, Origin, Pointer, PointerRequest,
    Redirects, Reply, UpstreamAuth, Wanted,
};
use crate::id::SideId;
use crate::route::Request;

/// What manifests are asked for upstream, on `HEAD` and `GET` alike (so
/// both name one digest): the OCI and Docker v2 manifests and indexes.
/// Never schema1, `application/json` or `*/*`, which may make a registry
/// convert the manifest.
pub const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

impl Registry {
    /// A blob or manifest by digest: one entry per digest, checked against
    /// it, never revalidated, and served under this repository as its link
    /// says ([`Registry::access`]).
    pub(super) fn by_digest(
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
    pub(super) fn access(
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
    pub(super) fn by_tag(&self, upstream: &Upstream, located: &Located, tag: &str, reply: HeaderMap) -> PointerRequest {
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
    pub(super) fn holds_accepted(&self, located: &Located, tag: &str, headers: &HeaderMap) -> bool {
        let key = format!("registry/tag/{}/{}/{tag}", located.registry, located.repository);
        let Some(entry) = self.cache.lookup(&key) else { return false };
        let held = entry.headers.iter().find(|(name, _)| name.eq_ignore_ascii_case("content-type"));
        held.is_some_and(|(_, media_type)| accepted_types(headers).contains(&media_type.as_str()))
    }

    pub(super) fn is_private(&self, located: &Located) -> bool {
        let name = format!("{}/{}", located.registry, located.repository);
        self.private.lock().contains(&name)
    }

    /// A request passed through as the client asked it, with its own
    /// `Accept` and credentials (a private repository's, say), never cached
    /// or shared; a blob's redirect goes to the client, which follows it,
    /// and an upstream's challenge too, which the client answers itself.
    pub(super) fn as_asked(&self, upstream: &Upstream, located: &Located, request: &Request<'_>) -> ForwardRequest {
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

/// `registry/repository` of the repository `request` asks under.
pub(super) fn repository_name(request: &CachedRequest) -> Option<String> {
    let registry = request.origin.pool.strip_prefix("registry ")?;
    Some(format!("{registry}/{}", repository_of(&request.origin.path)?))
}

/// The links of the repository `request` asks under.
pub(super) fn repository_links(request: &CachedRequest) -> Option<links::Repository> {
    let registry = request.origin.pool.strip_prefix("registry ")?;
    Some(links::Repository::new(registry, repository_of(&request.origin.path)?))
}

/// Who may read what `request` brings: what a client's own credentials
/// bring is private.
pub(super) fn visibility_of(request: &CachedRequest) -> Visibility {
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

/// The headers on every answer: the API version, and the namespace
/// containerd named, echoed.
pub(super) fn reply_headers(ns: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static(API_VERSION.0), HeaderValue::from_static(API_VERSION.1));
    if let Some(value) = ns.and_then(|ns| HeaderValue::from_str(ns).ok()) {
        headers.insert(HeaderName::from_static("oci-namespace"), value);
    }
    headers
}

/// The headers on an answer that carries content asked for by `digest`.
pub(super) fn digest_headers(digest: &Digest) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&digest.to_string()) {
        headers.insert(HeaderName::from_static("docker-content-digest"), value);
    }
    headers
}

/// Whether the client's `Accept` (every header, every comma-separated
/// item) takes each manifest type pkgproxy asks upstream for: no `Accept`
/// at all, `*/*`, or all four.
pub(super) fn takes_every_modern_type(headers: &HeaderMap) -> bool {
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
pub(super) fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    let raw = query?.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))?;
    Some(percent_encoding::percent_decode_str(&raw.replace('+', " ")).decode_utf8_lossy().into_owned())
}
