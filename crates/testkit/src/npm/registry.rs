//! The fake registry's answers: which path asks for what ([`route`], pure),
//! and the documents and tarballs built from the versions held, with the
//! faults switched on.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{NpmPackage, PathClass, TarballHost, ABBREVIATED};
use crate::fake::{file_reply, reply, Answer};
use crate::origin::RecordedRequest;

/// The npm registry's own address, as `dist.tarball` names it.
pub(super) const NPMJS: &str = "https://registry.npmjs.org";

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// `GET /-/ping`.
    Ping,
    /// `POST /-/npm/v1/security/advisories/bulk`: `npm audit`'s.
    Audit,
    /// `GET /NAME`: a package's document.
    Document(String),
    /// `GET /NAME/VERSION` (or a dist-tag): one version's object.
    Version(String, String),
    /// `GET /NAME/-/FILE`: a tarball.
    Tarball(String, String),
    /// Anything else.
    Unknown,
}

impl Route {
    /// The class of path it is, for the faults.
    pub(super) fn class(&self) -> PathClass {
        match self {
            Route::Document(_) => PathClass::Document,
            Route::Version(..) => PathClass::Version,
            Route::Tarball(..) => PathClass::Tarball,
            Route::Ping | Route::Audit | Route::Unknown => PathClass::Service,
        }
    }
}

/// What `method` `path` (as sent, query and all) asks for. The scope and
/// the name may be separated by `/`, `%2f` or `%2F`.
pub(super) fn route(method: &str, path: &str) -> Route {
    let path = path.split('?').next().unwrap_or_default();
    match (method, path) {
        ("GET" | "HEAD", "/-/ping") => return Route::Ping,
        ("POST", "/-/npm/v1/security/advisories/bulk") => return Route::Audit,
        _ if path.starts_with("/-/") || !matches!(method, "GET" | "HEAD") => return Route::Unknown,
        _ => {}
    }
    let decoded = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
    let segments: Vec<&str> = decoded.trim_start_matches('/').split('/').collect();
    let (name, rest) = match segments.as_slice() {
        [scope, name, rest @ ..] if scope.starts_with('@') && scope.len() > 1 && !name.is_empty() => {
            (format!("{scope}/{name}"), rest)
        }
        [name, rest @ ..] if !name.is_empty() && !name.starts_with('@') => (name.to_string(), rest),
        _ => return Route::Unknown,
    };
    match rest {
        [] => Route::Document(name),
        [version] if !version.is_empty() => Route::Version(name, version.to_string()),
        ["-", file] if file.ends_with(".tgz") => Route::Tarball(name, file.to_string()),
        _ => Route::Unknown,
    }
}

/// A version held, and when it was published.
#[derive(Clone)]
pub(super) struct Held {
    pub(super) package: NpmPackage,
    /// Minutes after 2026-01-01 00:00 UTC.
    pub(super) minute: u64,
}

/// The registry's state, shared by its two ports and its handle.
pub(super) struct Shared {
    /// The registry port's URL, `http://127.0.0.1:PORT`.
    pub(super) url: String,
    /// The CDN port's URL.
    pub(super) cdn_url: String,
    /// Versions by name, in the order published.
    pub(super) packages: Mutex<BTreeMap<String, Vec<Held>>>,
    /// The minute the next version is published at.
    pub(super) clock: AtomicU64,
    pub(super) requests: Mutex<Vec<RecordedRequest>>,
    /// Statuses forced on a class of path.
    pub(super) forced: Mutex<HashMap<PathClass, u16>>,
    /// Classes of path whose requests are taken and never answered.
    pub(super) stalled: Mutex<Vec<PathClass>>,
    /// Tarballs with their last byte changed.
    pub(super) corrupt: AtomicBool,
    /// Tarballs announced whole, half sent.
    pub(super) cut: AtomicBool,
    /// Documents as a lagging CDN serves them: without their newest
    /// version, and older.
    pub(super) modified_back: AtomicBool,
    /// Full documents without `time`.
    pub(super) without_times: AtomicBool,
    pub(super) tarball_host: Mutex<TarballHost>,
    /// The `Authorization` every request needs, if one does.
    pub(super) authorization: Mutex<Option<String>>,
    /// Packages only some bearer tokens may read, on the registry's port:
    /// anyone else gets `404`, as the npm registry answers.
    pub(super) restricted: Mutex<HashMap<String, Vec<String>>>,
}

impl Shared {
    pub(super) fn new(url: String, cdn_url: String) -> Shared {
        Shared {
            url,
            cdn_url,
            packages: Mutex::default(),
            clock: AtomicU64::new(60),
            requests: Mutex::default(),
            forced: Mutex::default(),
            stalled: Mutex::default(),
            corrupt: AtomicBool::new(false),
            cut: AtomicBool::new(false),
            modified_back: AtomicBool::new(false),
            without_times: AtomicBool::new(false),
            tarball_host: Mutex::new(TarballHost::Registry),
            authorization: Mutex::default(),
            restricted: Mutex::default(),
        }
    }

    /// Where `dist.tarball` says `package`'s tarball is, now.
    pub(super) fn tarball_url(&self, package: &NpmPackage) -> String {
        let host = match *self.tarball_host.lock() {
            TarballHost::Registry => self.url.as_str(),
            TarballHost::Cdn => self.cdn_url.as_str(),
            TarballHost::Npmjs => NPMJS,
        };
        format!("{host}{}", package.tarball_path())
    }
}

/// 2026-01-01 00:00 UTC, in seconds since the epoch: the minutes of
/// publishing count from it.
pub(super) const EPOCH: u64 = 1_767_225_600;

/// `minute` as the registry's `time` writes one.
fn iso(minute: u64) -> String {
    let at = chrono::DateTime::<chrono::Utc>::from(SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH + 60 * minute));
    at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `minute` as an HTTP date.
fn http_date(minute: u64) -> String {
    httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH + 60 * minute))
}

fn json_error(status: StatusCode, error: &str) -> Answer {
    reply(status, &[("content-type", "application/json".into())], json!({ "error": error }).to_string())
}

fn not_found() -> Answer {
    json_error(StatusCode::NOT_FOUND, "Not found")
}

/// Answers a request to the registry port, or to the CDN port (`cdn`),
/// which serves tarballs only.
pub(super) async fn answer(owned: Arc<Shared>, request: Request<Incoming>, cdn: bool) -> Answer {
    let shared: &Shared = &owned;
    // The request in hand, not the log's last: requests arrive at once.
    let recorded = RecordedRequest::of_parts(&request.into_parts().0);
    shared.requests.lock().push(recorded.clone());
    let route = route(&recorded.method, &recorded.path);
    let class = route.class();
    if shared.stalled.lock().contains(&class) {
        std::future::pending::<()>().await;
    }
    let forced = shared.forced.lock().get(&class).copied();
    if let Some(status) = forced {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut answer = json_error(status, status.canonical_reason().unwrap_or("forced"));
        if matches!(status.as_u16(), 429 | 503) {
            answer.headers_mut().insert(http::header::RETRY_AFTER, 1.into());
        }
        return answer;
    }
    if let Some(authorization) = shared.authorization.lock().clone() {
        if recorded.header("authorization") != Some(authorization.as_str()) {
            return json_error(StatusCode::UNAUTHORIZED, "authentication required");
        }
    }
    if !cdn && !may_read(shared, &route, recorded.header("authorization")) {
        return not_found();
    }
    match route {
        Route::Tarball(name, file) => tarball(shared, &name, &file),
        _ if cdn => not_found(),
        Route::Ping | Route::Audit => reply(StatusCode::OK, &[("content-type", "application/json".into())], "{}"),
        Route::Document(name) => document(shared, &name, recorded.header("accept").unwrap_or_default()),
        Route::Version(name, version) => version_document(shared, &name, &version),
        Route::Unknown => not_found(),
    }
}

/// Whether a client with `authorization` may read what `route` names.
fn may_read(shared: &Shared, route: &Route, authorization: Option<&str>) -> bool {
    let name = match route {
        Route::Tarball(name, _) | Route::Document(name) | Route::Version(name, _) => name,
        _ => return true,
    };
    let restricted = shared.restricted.lock();
    let Some(readers) = restricted.get(name) else { return true };
    let token = authorization.and_then(|authorization| authorization.strip_prefix("Bearer "));
    token.is_some_and(|token| readers.iter().any(|reader| reader == token))
}

/// The versions of `name` a document lists now, and its `created` and
/// `modified` minutes; `None` if there is no such package.
fn listed(shared: &Shared, name: &str) -> Option<(Vec<Held>, u64, u64)> {
    let mut held = shared.packages.lock().get(name)?.clone();
    let created = held.first()?.minute;
    let mut modified = held.iter().map(|held| held.minute).max()?;
    if shared.modified_back.load(Ordering::SeqCst) {
        // A lagging CDN: its newest version missing, and an older time
        // (a package of one version keeps it, an hour back).
        match held.len() {
            1 => modified = modified.saturating_sub(60),
            _ => {
                held.pop();
                modified = held.iter().map(|held| held.minute).max()?;
            }
        }
    }
    Some((held, created, modified))
}

/// A document's headers: its type, validators and freshness, as the real
/// registry's (which ignores `If-None-Match`: always `200`).
fn document_headers(content_type: &str, body: &str, modified: u64) -> Vec<(&'static str, String)> {
    let etag = format!("\"{}\"", &hex::encode(Sha256::digest(body.as_bytes()))[..32]);
    vec![
        ("content-type", content_type.to_owned()),
        ("vary", "Accept".to_owned()),
        ("etag", etag),
        ("last-modified", http_date(modified)),
        ("cache-control", "public, max-age=300".to_owned()),
    ]
}

/// A package's document: the abbreviated form when `accept` asks for it,
/// else the full one.
fn document(shared: &Shared, name: &str, accept: &str) -> Answer {
    let Some((held, created, modified)) = listed(shared, name) else { return not_found() };
    let latest = held.last().map(|held| held.package.version.clone()).unwrap_or_default();
    let (content_type, body) = if accept.contains(ABBREVIATED) {
        let versions: Map<String, Value> = held
            .iter()
            .map(|held| {
                let package = &held.package;
                (package.version.clone(), package.abbreviated_version(&shared.tarball_url(package)))
            })
            .collect();
        let body =
            json!({"name": name, "modified": iso(modified), "dist-tags": {"latest": latest}, "versions": versions});
        (ABBREVIATED, body.to_string())
    } else {
        let versions: Map<String, Value> = held
            .iter()
            .map(|held| (held.package.version.clone(), held.package.full_version(&shared.tarball_url(&held.package))))
            .collect();
        let mut time = Map::new();
        time.insert("created".into(), json!(iso(created)));
        time.insert("modified".into(), json!(iso(modified)));
        time.extend(held.iter().map(|held| (held.package.version.clone(), json!(iso(held.minute)))));
        let revision = &hex::encode(Sha256::digest(format!("{name} {modified} {}", held.len())))[..32];
        let maintainer = json!({"name": "testkit", "email": "testkit@example.invalid"});
        let mut body = json!({
            "_id": name,
            "_rev": format!("{}-{revision}", held.len()),
            "name": name,
            "description": format!("{name}, made by the test kit"),
            "dist-tags": {"latest": latest},
            "versions": versions,
            "time": time,
            "maintainers": [maintainer],
            "license": "MIT",
            "readme": format!("# {name}\n\nMade by the test kit.\n"),
            "readmeFilename": "README.md",
        });
        if shared.without_times.load(Ordering::SeqCst) {
            body.as_object_mut().map(|document| document.remove("time"));
        }
        ("application/json", body.to_string())
    };
    reply(StatusCode::OK, &document_headers(content_type, &body, modified), body)
}

/// One version's object, by version or by dist-tag (`latest`).
fn version_document(shared: &Shared, name: &str, version: &str) -> Answer {
    let Some((held, _, modified)) = listed(shared, name) else { return not_found() };
    let wanted = match version {
        "latest" => held.last(),
        _ => held.iter().find(|held| held.package.version == version),
    };
    let Some(held) = wanted else { return not_found() };
    let body = held.package.full_version(&shared.tarball_url(&held.package)).to_string();
    reply(StatusCode::OK, &document_headers("application/json", &body, modified), body)
}

/// A tarball, whatever the documents list now (a lagging CDN's documents
/// lag, the tarballs are there).
fn tarball(shared: &Shared, name: &str, file: &str) -> Answer {
    let found = {
        let packages = shared.packages.lock();
        let versions = packages.get(name).into_iter().flatten();
        versions.into_iter().find(|held| held.package.filename() == file).map(|held| held.package.bytes.clone())
    };
    let Some(bytes) = found else { return not_found() };
    let (corrupt, cut) = (shared.corrupt.load(Ordering::SeqCst), shared.cut.load(Ordering::SeqCst));
    let headers = [
        ("content-type", "application/octet-stream".to_owned()),
        ("cache-control", "public, immutable, max-age=31557600".to_owned()),
        ("etag", format!("\"{}\"", &hex::encode(Sha256::digest(&bytes))[..32])),
    ];
    file_reply(&bytes, &headers, corrupt, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_as_the_registry_names_things_scopes_in_every_spelling() {
        let document = |name: &str| Route::Document(name.to_owned());
        assert_eq!(route("GET", "/left-pad"), document("left-pad"));
        assert_eq!(route("GET", "/left-pad?write=true"), document("left-pad"));
        for scoped in ["/@corp/c", "/@corp%2fc", "/@corp%2Fc", "/%40corp%2fc"] {
            assert_eq!(route("GET", scoped), document("@corp/c"), "{scoped}");
        }
        assert_eq!(route("GET", "/@corp%2fc/2.0.0"), Route::Version("@corp/c".into(), "2.0.0".into()));
        assert_eq!(route("GET", "/a/latest"), Route::Version("a".into(), "latest".into()));
        assert_eq!(route("GET", "/@corp/c/-/c-2.0.0.tgz"), Route::Tarball("@corp/c".into(), "c-2.0.0.tgz".into()));
        assert_eq!(route("GET", "/@corp%2fc/-/c-2.0.0.tgz"), Route::Tarball("@corp/c".into(), "c-2.0.0.tgz".into()));
        assert_eq!(route("GET", "/a/-/a-1.0.0.tgz"), Route::Tarball("a".into(), "a-1.0.0.tgz".into()));
        assert_eq!(route("GET", "/-/ping?write=true"), Route::Ping);
        assert_eq!(route("POST", "/-/npm/v1/security/advisories/bulk"), Route::Audit);
        for unknown in ["/", "/@corp", "/-/v1/search", "/a/-/", "/a/b/c"] {
            assert_eq!(route("GET", unknown), Route::Unknown, "{unknown}");
        }
        assert_eq!(route("PUT", "/a"), Route::Unknown);
    }

    #[test]
    fn times_are_the_registry_s_iso_form_and_http_dates_agree() {
        assert_eq!(iso(60), "2026-01-01T01:00:00.000Z");
        assert_eq!(iso(1440 + 61), "2026-01-02T01:01:00.000Z");
        assert_eq!(http_date(60), "Thu, 01 Jan 2026 01:00:00 GMT");
    }
}
