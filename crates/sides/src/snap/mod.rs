//! The snap side: a relay of the Snap Store API for snapd and the `snap`
//! command (`SNAPPY_FORCE_API_URL=http://HOST:3142/snap/`), in front of a
//! pool of store instances (`[snap] stores`).
//!
//! What passes through, and how:
//! - **Refresh** (`POST /v2/snaps/refresh`): always forwarded while the
//!   store can be asked, never shared; each per-action result is recorded
//!   and replayed, action by action, when it cannot ([`actions`]).
//! - **Blobs**: stored by the `sha3-384` the store's answer gave, checked
//!   before they enter the cache; pkgproxy follows the store's redirect to
//!   its CDN itself and never caches the redirect ([`blob`]).
//! - **Assertions**: kept byte for byte; how long each is served without
//!   asking depends on its type ([`assertion`]).
//! - **info, find, catalogues**: served through the cache under the
//!   device's key and the normalised query, asked for again every time
//!   (catalogues after hours), served from the cache when the store cannot
//!   be asked: offline, exactly the queries seen online.
//! - **Personal traffic** (authentication, cohorts, purchases, anything a
//!   user's `Authorization` came with): forwarded, never stored or shared.
//!
//! Every URL in a JSON answer is rewritten at serve time to point at
//! pkgproxy as the client reached it ([`rewrite`]).
//!
//! **How snapd is told no.** snapd retries every `5xx` for half a minute
//! (and downloads for 80 s), so pkgproxy never makes one up: what it
//! cannot serve is a `424` with the store's own JSON error list, code
//! `pkgproxy-offline` (or `pkgproxy-store-overloaded`, with the breaker's
//! `Retry-After`), `Content-Type: application/json` exactly (snapd reads
//! the body of an assertion or find refusal only then) and an
//! `X-Oops-Id`, which snapd appends to the messages where it ignores the
//! body. The offline seed asks for the 424 everywhere; but snapd ignores
//! the body of a 424 on a refresh `POST`, so a refresh is answered `200`
//! with a per-action error instead, which snapd prints as
//! `cannot download snap "X": pkgproxy is offline: ...`. The codes snapd
//! interprets (`not-found`, `*-not-found`, `*-authorization-needs-refresh`)
//! are never used for a refusal: snapd would take the snap or assertion
//! for absent.

pub mod actions;
pub mod assertion;
pub mod blob;
mod device;
mod media;
pub mod needs;
pub mod rewrite;
pub mod setup;

use arc_swap::Guard;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, RETRY_AFTER};
use http::{Method, StatusCode};
use pkgproxy_cache::{Cache, Class, Expected, Verifier};
use serde_json::{json, Value};

pub use device::Device;

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{
    Acceptance, CachedRequest, DatedResume, Decision, ForwardRequest, LocalAnswer, Origin, Record, Redirects, Refusal,
    Rewrite, ServedAt,
};
use crate::decision::{Asking, Reply, Wanted};
use crate::failure::{retry_after_secs, Failure};
use crate::id::SideId;
use crate::instances::Instances;
use crate::needs::{FirstAsk, HeldBodies, Needs, NeedsError};
use crate::role::{Recording, Resolving, Rewriting, Roles};
use crate::route::Request;
use crate::{ClientSetup, Side};
use actions::{Holdings, Recorded, RefreshRequest, Unavailable};
use assertion::AssertionPath;
use blob::{BlobPath, BlobVerifier, DOWNLOAD_PREFIX};
use rewrite::{Rewriter, MEDIA_PREFIX};

/// The store when none is configured.
pub const DEFAULT_STORE: &str = "https://api.snapcraft.io";
/// How long sections and categories are served without asking the store.
pub const SECTIONS_TTL: Duration = Duration::from_secs(6 * 3600);
/// How long the commands catalogue is served without asking the store.
pub const CATALOGUE_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a snap's icon or screenshot is served without asking.
pub const MEDIA_TTL: Duration = Duration::from_secs(24 * 3600);
/// The largest request body forwarded to the store.
pub const BODY_LIMIT: u64 = 4 * 1024 * 1024;
/// The largest record or assertion read back from the cache.
const SMALL_BODY_LIMIT: u64 = 4 * 1024 * 1024;

/// The snap side's configuration, as written (`[snap]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// The store instances' base URLs, the instances of one pool; empty:
    /// the default.
    #[serde(default)]
    pub stores: Vec<String>,
}

/// The snap side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    stores: Instances,
}

impl Config {
    /// Validates `options`.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let stores = Instances::new(&options.stores, Some(DEFAULT_STORE))
            .map_err(|reason| ConfigError::new(SideId::Snap, "stores", reason))?;
        Ok(Config { stores })
    }

    /// The store instances' base URLs.
    pub fn stores(&self) -> &[String] {
        self.stores.urls()
    }
}

/// The snap side at run time: its configuration, the cache its records
/// and assertions are read back from, and the media hosts the store named.
#[derive(Debug)]
pub struct Snap {
    config: Reloadable<Config>,
    cache: Cache,
    /// The media URLs store answers named: what the media relay fetches.
    media: media::NamedMedia,
}

impl Snap {
    /// The side, reading back what it recorded from `cache`.
    pub fn new(config: Config, cache: Cache) -> Snap {
        Snap { config: Reloadable::new(config), cache, media: media::NamedMedia::default() }
    }

    /// Its configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }

    /// A request with a user's authorization: forwarded as it is, except
    /// that one of pkgproxy's blob URLs goes to the store path it stands for.
    fn personal(&self, request: &Request<'_>) -> Decision {
        let blob = request.path.strip_prefix(DOWNLOAD_PREFIX).and_then(|rest| BlobPath::parse(rest).ok());
        self.forward_to(request, blob.map_or(request.path, |blob| blob.store_path), None)
    }

    /// Forwarded to the store uncached, recorded when `record` says so.
    fn forward(&self, request: &Request<'_>, record: Option<Record>) -> Decision {
        self.forward_to(request, request.path, record)
    }

    /// Forwarded to `store_path` on the store.
    fn forward_to(&self, request: &Request<'_>, store_path: &str, record: Option<Record>) -> Decision {
        let rewrite = record.as_ref().map(|_| Rewrite::at(request.served_at("")));
        Decision::Forward(ForwardRequest {
            side: SideId::Snap,
            origin: self.store_origin(store_path, request.query),
            method: request.method.clone(),
            headers: crate::decision::forwarded_headers(request.headers),
            body_limit: BODY_LIMIT,
            record,
            rewrite,
        })
    }

    fn store_origin(&self, path: &str, query: Option<&str>) -> Origin {
        let path = match query {
            Some(query) => format!("{path}?{query}"),
            None => path.to_string(),
        };
        Origin { pool: "snap".to_string(), instances: self.config().stores().to_vec(), path }
    }

    /// A store answer served through the cache under the device and the
    /// normalised query, its URLs rewritten when `rewritten`.
    fn answer(&self, request: &Request<'_>, fresh_for: Duration, rewritten: bool) -> Decision {
        let device = Device::of(request.headers);
        let key = format!("snap/answer/{}{}?{}", device.key(), request.path, normalised_query(request.query));
        let origin = self.store_origin(request.path, request.query);
        Decision::cache(CachedRequest {
            wanted: Wanted { fresh_for, ..Wanted::default() },
            asking: Asking { headers: device::upstream_headers(request.headers), ..Asking::default() },
            reply: Reply { rewrite: rewritten.then(|| Rewrite::at(request.served_at(""))), ..Reply::default() },
            ..CachedRequest::new(SideId::Snap, key, origin, Class::Revalidated)
        })
    }

    fn blob(&self, request: &Request<'_>, rest: &str) -> Decision {
        let blob = match BlobPath::parse(rest) {
            Ok(blob) => blob,
            Err(refusal) => return Decision::Refuse(refusal),
        };
        let device = Device::of(request.headers);
        let origin = self.store_origin(blob.store_path, request.query);
        Decision::cache(CachedRequest {
            wanted: Wanted { expected: Expected { size: Some(blob.size), ..Expected::default() }, ..Wanted::default() },
            asking: Asking {
                headers: device::upstream_headers(request.headers),
                redirects: Redirects::Followed,
                ..Asking::default()
            },
            reply: Reply { dated_resume: DatedResume::Honoured, ..Reply::default() },
            ..CachedRequest::new(SideId::Snap, blob.key(&device.scope()), origin, Class::Immutable)
        })
    }

    fn assertion(&self, request: &Request<'_>, rest: &str) -> Decision {
        let assertion = match AssertionPath::parse(rest, request.query) {
            Ok(assertion) => assertion,
            Err(refusal) => return Decision::Refuse(refusal),
        };
        let device = Device::of(request.headers);
        let origin = self.store_origin(request.path, request.query);
        Decision::cache(CachedRequest {
            wanted: Wanted {
                fresh_for: assertion.fresh_for(),
                accepts: Acceptance::AssertionFormatAtMost(assertion.max_format),
                ..Wanted::default()
            },
            asking: Asking { headers: device::upstream_headers(request.headers), ..Asking::default() },
            ..CachedRequest::new(SideId::Snap, assertion.key(&device), origin, assertion.class())
        })
    }

    /// A snap's icon or screenshot, exactly as a store answer named it.
    fn media(&self, request: &Request<'_>, rest: &str) -> Decision {
        let unknown = || Decision::Refuse(Refusal::not_found("not a media URL of a store answer"));
        let Some((scheme, rest)) = rest.split_once('/') else { return unknown() };
        let Some(slash) = rest.find('/') else { return unknown() };
        let (authority, path) = rest.split_at(slash);
        let path = match request.query {
            Some(query) => format!("{path}?{query}"),
            None => path.to_string(),
        };
        let named = format!("{scheme}/{authority}{path}");
        let key = format!("snap/media/{named}");
        // Named by an answer since start, or before (what it served then
        // is cached).
        if !matches!(scheme, "http" | "https") || !(self.media.named(&named) || self.cache.lookup(&key).is_some()) {
            return unknown();
        }
        let origin =
            Origin { pool: "snap-media".to_string(), instances: vec![format!("{scheme}://{authority}")], path };
        Decision::cache(CachedRequest {
            wanted: Wanted { fresh_for: MEDIA_TTL, ..Wanted::default() },
            asking: Asking { redirects: Redirects::Followed, ..Asking::default() },
            ..CachedRequest::new(SideId::Snap, key, origin, Class::Revalidated)
        })
    }

    /// The checks of a blob download: its SHA3-384.
    fn blob_checks(&self, request: &CachedRequest) -> Option<Arc<dyn Verifier>> {
        let digest = request.key.strip_prefix("snap/blob/")?.rsplit('/').next()?;
        Some(Arc::new(BlobVerifier { sha3_384: digest.to_string() }))
    }

    /// `body` with its URLs pointing at pkgproxy as served at `at`; `None`
    /// when it is not JSON.
    fn urls_rewritten(&self, at: &ServedAt, body: &[u8]) -> Option<Bytes> {
        let config = self.config();
        let mut rewriter = Rewriter { stores: config.stores(), served_at: at, media: Vec::new() };
        let rewritten = rewriter.rewrite(body)?;
        self.media.learn(rewriter.media);
        Some(Bytes::from(rewritten))
    }

    /// Records the results of a refresh `sent` by the device `headers` name
    /// that the store answered with `answer`. Blocking.
    fn record_results(&self, headers: &http::HeaderMap, sent: &[u8], answer: &[u8]) {
        let device = &Device::of(headers);
        let (Ok(request), Ok(answer)) =
            (serde_json::from_slice::<RefreshRequest>(sent), serde_json::from_slice::<Value>(answer))
        else {
            return;
        };
        for recorded in actions::recordings(device, &request, &answer) {
            let Ok(body) = serde_json::to_vec(&recorded) else { continue };
            let key = actions::record_key(&recorded.key);
            // A fleet of like devices brings the same results again and
            // again: only a change is written.
            if self.cache.read_small(&key, SMALL_BODY_LIMIT).as_deref() == Some(body.as_slice()) {
                continue;
            }
            let json = vec![("content-type".to_string(), "application/json".to_string())];
            if let Err(error) = self.cache.put(&key, &body, json, Class::Immutable) {
                tracing::warn!(%error, key = recorded.key, "cannot record a snap store result");
            }
        }
    }

    /// The answer to a refresh `sent` by the device `headers` name, from
    /// what was recorded, the store being unavailable as `failure` says.
    /// Blocking.
    fn replayed_results(&self, headers: &http::HeaderMap, sent: &[u8], failure: &Failure<'_>) -> Option<LocalAnswer> {
        let device = &Device::of(headers);
        let why = unavailable(failure)?;
        let request = serde_json::from_slice::<RefreshRequest>(sent).ok()?;
        let answer = actions::replay(device, &request, &why, self, self.config().stores());
        Some(LocalAnswer::json(StatusCode::OK, answer.to_string()))
    }
}

impl Configures for Config {
    type Side = Snap;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Snap;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Snap, String> {
        Ok(Snap::new(self.clone(), cache.clone()))
    }

    fn held_by(side: &Snap) -> &Reloadable<Config> {
        &side.config
    }

    /// The configured stores: these may be on local addresses (each on its
    /// own port only).
    fn trusted(&self) -> Vec<String> {
        self.stores.trusted_urls()
    }

    /// The store reached through the parent pkgproxy at `parent`
    /// (`http://host:port`): its answers name the parent's blob URLs, which
    /// are below that store like any store path.
    fn chain(&mut self, parent: &str) {
        self.stores.chain_to(parent, "/snap");
    }
}

impl Side for Snap {
    fn id(&self) -> SideId {
        SideId::Snap
    }

    /// Decides what to do with `request`.
    fn classify(&self, request: &Request<'_>) -> Decision {
        if let Err(refusal) = crate::path::checked_path(request.path) {
            return Decision::Refuse(refusal);
        }
        if device::is_personal(request.headers) {
            return self.personal(request);
        }
        let path = request.path;
        let readable = matches!(*request.method, Method::GET | Method::HEAD);
        if path == "/v2/snaps/refresh" {
            return match *request.method {
                Method::POST => self
                    .forward(request, Some(Record::SnapActions(crate::decision::forwarded_headers(request.headers)))),
                _ => Decision::Refuse(Refusal::method_not_allowed("POST")),
            };
        }
        if !readable {
            return self.forward(request, None);
        }
        if let Some(rest) = path.strip_prefix(DOWNLOAD_PREFIX) {
            return self.blob(request, rest);
        }
        if let Some(rest) = path.strip_prefix("/v2/assertions/").or(path.strip_prefix("/api/v1/snaps/assertions/")) {
            return self.assertion(request, rest);
        }
        if let Some(rest) = path.strip_prefix(MEDIA_PREFIX) {
            return self.media(request, rest);
        }
        match path {
            "/v2/snaps/find" if query_has(request.query, "private", "true") => self.forward(request, None),
            "/v2/snaps/find" | "/api/v1/snaps/search" => self.answer(request, Duration::ZERO, true),
            _ if path.starts_with("/v2/snaps/info/") => self.answer(request, Duration::ZERO, true),
            "/api/v1/snaps/sections" | "/v2/snaps/categories" => self.answer(request, SECTIONS_TTL, false),
            "/api/v1/snaps/names" => self.answer(request, CATALOGUE_TTL, false),
            _ => self.forward(request, None),
        }
    }

    /// The checks of a blob download: its SHA3-384.
    fn verifier(&self, request: &CachedRequest, _prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        self.blob_checks(request)
    }

    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        failure_answer(failure)
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let lines = vec![
            format!("SNAPPY_FORCE_API_URL=http://{host}/snap/"),
            format!("pkgproxyctl setup snap --addr {host} | sudo sh"),
        ];
        Some(ClientSetup { clients: "snapd and snap".to_owned(), lines })
    }

    fn roles(&self) -> Roles<'_> {
        Roles { rewriting: Some(self), recording: Some(self), resolving: Some(self), ..Roles::default() }
    }
}

impl Rewriting for Snap {
    fn rewrite(&self, rewrite: &Rewrite, body: &[u8]) -> Option<Bytes> {
        let at = &rewrite.served_at;
        self.urls_rewritten(at, body)
    }
}

impl Recording for Snap {
    /// Whether a cached body starting with `head` answers a request that
    /// `accepts` it.
    fn accepts(&self, accepts: Acceptance, head: &[u8]) -> bool {
        match accepts {
            Acceptance::Any => true,
            Acceptance::AssertionFormatAtMost(max) => assertion::format_of(head) <= max,
        }
    }

    fn record(&self, record: &Record, sent: &[u8], answer: &[u8]) {
        let Record::SnapActions(headers) = record;
        self.record_results(headers, sent, answer)
    }

    fn replay(&self, record: &Record, sent: &[u8], failure: &Failure<'_>) -> Option<LocalAnswer> {
        let Record::SnapActions(headers) = record;
        self.replayed_results(headers, sent, failure)
    }

    fn record_prefix(&self) -> &'static str {
        actions::RECORD_PREFIX
    }

    fn named_by_records(&self, keys: &[String]) -> Vec<String> {
        self.recorded_needs(keys).paths
    }

    fn take_record(&self, key: &str, body: &[u8]) -> Result<(), String> {
        self.taken_record(key, body)
    }
}

impl Resolving for Snap {
    fn needs(&self, asked: serde_json::Value, _held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        self.download_needs(asked)
    }

    fn needs_first(&self, asked: &serde_json::Value) -> Result<Option<FirstAsk>, NeedsError> {
        self.download_first(asked)
    }
}

impl Holdings for Snap {
    fn record(&self, key: &str) -> Option<Recorded> {
        serde_json::from_slice(&self.cache.read_small(key, SMALL_BODY_LIMIT)?).ok()
    }

    fn has_blob(&self, key: &str) -> bool {
        self.cache.lookup(key).is_some()
    }

    fn assertion(&self, key: &str) -> Option<Vec<u8>> {
        self.cache.read_small(key, SMALL_BODY_LIMIT)
    }
}

/// True when the query has `name=value`.
fn query_has(query: Option<&str>, name: &str, value: &str) -> bool {
    query.unwrap_or("").split('&').any(|pair| pair.split_once('=') == Some((name, value)))
}

/// The query with its pairs, and the parts of its `fields`, in one order.
fn normalised_query(query: Option<&str>) -> String {
    let mut pairs: Vec<String> = query
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some(("fields", list)) => {
                let mut fields: Vec<&str> = list.split([',']).collect();
                fields.sort_unstable();
                fields.dedup();
                format!("fields={}", fields.join(","))
            }
            _ => pair.to_string(),
        })
        .collect();
    pairs.sort();
    pairs.join("&")
}

/// Why the store cannot be asked, for per-action errors; `None` for a
/// policy refusal, which is not about the store.
fn unavailable(failure: &Failure<'_>) -> Option<Unavailable> {
    let (code, message) = match failure {
        Failure::Refused(_) => return None,
        Failure::Offline => (OFFLINE, "pkgproxy is offline".to_string()),
        Failure::Overloaded { retry_after } => (
            "pkgproxy-store-overloaded",
            format!("the store is overloaded; pkgproxy asks it again in {} s", retry_after_secs(*retry_after)),
        ),
        Failure::UpstreamFailed { reason } => {
            ("pkgproxy-store-failed", format!("pkgproxy: the store failed: {reason}"))
        }
        Failure::Internal { reason } => ("pkgproxy-internal-error", format!("pkgproxy failed: {reason}")),
    };
    Some(Unavailable { code, message })
}

/// The code of an offline refusal (never one snapd interprets).
pub const OFFLINE: &str = "pkgproxy-offline";

/// How snapd is told of `failure`: the store's JSON error list; `424` for
/// what the store could not be asked for or failed at (never a made-up
/// `5xx`, which snapd would retry for half a minute).
pub fn failure_answer(failure: &Failure<'_>) -> LocalAnswer {
    let Some(why) = unavailable(failure) else {
        return match failure {
            Failure::Refused(refusal) => policy_refusal(refusal),
            _ => error_list(StatusCode::FAILED_DEPENDENCY, "pkgproxy-internal-error", "pkgproxy failed"),
        };
    };
    let message = match failure {
        Failure::Offline => format!("{}: this is not cached, and the store cannot be asked", why.message),
        _ => why.message,
    };
    let mut answer = error_list(StatusCode::FAILED_DEPENDENCY, why.code, &message);
    answer.headers.insert("x-oops-id", HeaderValue::from_static(why.code));
    if let Failure::Overloaded { retry_after } = failure {
        answer.headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(*retry_after)));
    }
    answer
}

/// A request the side's policy refuses, with the policy's status.
fn policy_refusal(refusal: &Refusal) -> LocalAnswer {
    let mut answer = error_list(refusal.status, "pkgproxy-refused", &format!("pkgproxy: {}", refusal.reason));
    if let Some(allow) = refusal.allow {
        answer.headers.insert(ALLOW, HeaderValue::from_static(allow));
    }
    answer
}

/// `{"error-list": [{"code", "message"}]}` with `status`.
fn error_list(status: StatusCode, code: &str, message: &str) -> LocalAnswer {
    LocalAnswer::json(status, json!({"error-list": [{"code": code, "message": message}]}).to_string())
}

#[cfg(test)]
mod tests;
