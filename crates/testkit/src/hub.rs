//! A fake Docker Hub on `127.0.0.1:0` for registry-side tests, with what
//! the real one does that a pull-through mirror must cope with:
//!
//! - the Bearer dance: every `/v2/` request without a token for its
//!   repository is a `401` whose challenge names the scope, and `/token`
//!   gives one (`{"token", "expires_in"}`);
//! - manifests by tag and by digest with `Docker-Content-Digest` and the
//!   quota's `ratelimit-*` headers;
//! - blobs answered with a `307` to a CDN on another port (another
//!   origin), which serves them with `Range` and records whether it was
//!   sent an `Authorization`;
//! - a pull limit as Docker Hub's: a manifest `GET` counts against it, a
//!   `HEAD` is free, and past it every manifest `GET` is a `429
//!   TOOMANYREQUESTS` with `Retry-After`;
//! - tags that move, a forced status (a `429` with `Retry-After`), a stall
//!   (requests taken, never answered), a CDN that corrupts what it serves,
//!   and a request log.
//!
//! Images are built by hand: a gzipped tar layer, a config, an OCI
//! manifest, and an index naming it for linux/amd64.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::json;
use sha2::{Digest as _, Sha256};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::origin::RecordedRequest;

/// The OCI manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The OCI index media type.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// A blob or manifest: its bytes and digest.
#[derive(Debug, Clone)]
pub struct Content {
    /// The bytes.
    pub bytes: Bytes,
    /// `sha256:<hex>`.
    pub digest: String,
    /// A manifest's media type.
    pub media_type: Option<&'static str>,
}

impl Content {
    fn new(bytes: impl Into<Bytes>, media_type: Option<&'static str>) -> Content {
        let bytes = bytes.into();
        Content { digest: format!("sha256:{}", hex::encode(Sha256::digest(&bytes))), bytes, media_type }
    }
}

/// A hand-built image: one layer holding `etc/hello.txt`.
#[derive(Debug, Clone)]
pub struct Image {
    /// The layer (a gzipped tar).
    pub layer: Content,
    /// The config.
    pub config: Content,
    /// The manifest.
    pub manifest: Content,
    /// An index naming the manifest for linux/amd64.
    pub index: Content,
}

impl Image {
    /// An image whose file says `text`, its layer padded to `size` bytes
    /// of incompressible data when `size` is given.
    pub fn build(text: &str, size: Option<usize>) -> Image {
        let mut archive = tar::Builder::new(Vec::new());
        let mut add = |name: &str, data: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_cksum();
            archive.append_data(&mut header, name, data).expect("tar entry");
        };
        add("etc/hello.txt", format!("{text}\n").as_bytes());
        if let Some(size) = size {
            let mut state = 0x9e37_79b9_7f4a_7c15_u64;
            let noise: Vec<u8> = (0..size)
                .map(|_| {
                    // xorshift64: bytes gzip cannot shrink, cheaply.
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 24) as u8
                })
                .collect();
            add("var/noise", &noise);
        }
        let tar = archive.into_inner().expect("tar");
        let diff_id = format!("sha256:{}", hex::encode(Sha256::digest(&tar)));
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
        std::io::Write::write_all(&mut gzip, &tar).expect("gzip");
        let layer = Content::new(gzip.finish().expect("gzip"), None);
        let config = json!({"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": [diff_id]}});
        let config = Content::new(config.to_string(), None);
        let descriptor = |media: &str, content: &Content| json!({"mediaType": media, "digest": content.digest, "size": content.bytes.len()});
        let manifest = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": descriptor("application/vnd.oci.image.config.v1+json", &config),
            "layers": [descriptor("application/vnd.oci.image.layer.v1.tar+gzip", &layer)]});
        let manifest = Content::new(manifest.to_string(), Some(OCI_MANIFEST));
        let mut entry = descriptor(OCI_MANIFEST, &manifest);
        entry["platform"] = json!({"architecture": "amd64", "os": "linux"});
        let index = Content::new(
            json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [entry]}).to_string(),
            Some(OCI_INDEX),
        );
        Image { layer, config, manifest, index }
    }
}

/// A pull limit in force.
#[derive(Debug, Clone, Copy)]
struct PullLimit {
    left: u64,
    retry_after: u64,
}

struct Shared {
    /// Content by digest.
    content: Mutex<HashMap<String, Content>>,
    /// `(repository, tag)` → digest.
    tags: Mutex<HashMap<(String, String), String>>,
    /// What each repository holds: a digest is served under those only.
    holds: Mutex<HashMap<String, Vec<String>>>,
    /// Private repositories and the `user:password`s that may pull them.
    private: Mutex<HashMap<String, Vec<String>>>,
    requests: Mutex<Vec<RecordedRequest>>,
    forced: AtomicU16,
    corrupt: AtomicBool,
    stalled: AtomicBool,
    /// How long each manifest answer is held back, in milliseconds.
    manifest_delay_ms: AtomicU64,
    remaining: AtomicU64,
    /// The manifest `GET`s left before the limit, and the `Retry-After`
    /// (seconds) of a `429` past it; `None`: no limit.
    pull_limit: Mutex<Option<PullLimit>>,
    addr: SocketAddr,
    cdn_addr: SocketAddr,
    /// Where blobs are redirected instead of the CDN, when set.
    blob_location: Mutex<Option<String>>,
    /// The token realm challenges name instead of the hub's own, when set.
    realm: Mutex<Option<String>>,
}

/// A running fake hub. Dropping it stops it.
pub struct FakeHub {
    shared: Arc<Shared>,
    accept: Vec<JoinHandle<()>>,
}

impl FakeHub {
    /// Starts an empty hub.
    pub async fn start() -> FakeHub {
        let hub = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let cdn = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let shared = Arc::new(Shared {
            content: Mutex::default(),
            tags: Mutex::default(),
            holds: Mutex::default(),
            private: Mutex::default(),
            requests: Mutex::default(),
            forced: AtomicU16::new(0),
            corrupt: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            manifest_delay_ms: AtomicU64::new(0),
            remaining: AtomicU64::new(99),
            pull_limit: Mutex::default(),
            addr: hub.local_addr().expect("local address"),
            cdn_addr: cdn.local_addr().expect("local address"),
            blob_location: Mutex::default(),
            realm: Mutex::default(),
        });
        let accept = [hub, cdn].map(|listener| tokio::spawn(crate::fake::serve(listener, Arc::clone(&shared), answer)));
        FakeHub { shared, accept: accept.into() }
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Its CDN's origin (another port of 127.0.0.1, as a real hub's CDN is
    /// another site): a pkgproxy trusts it with `[upstream] trust`, as it
    /// would a registry's blob storage on the local network.
    pub fn cdn_url(&self) -> String {
        format!("http://{}", self.shared.cdn_addr)
    }

    /// A configuration that knows this hub as the registry `name`, its CDN
    /// trusted.
    pub fn config(&self, name: &str) -> String {
        format!(
            "[upstream]\ntrust = [\"{}\"]\n[[registry.upstream]]\nname = \"{name}\"\nmirrors = [\"{}\"]\n",
            self.cdn_url(),
            self.url()
        )
    }

    /// Publishes `image` in `repository` under `tag` (its manifest) and
    /// `tag-multi` (its index). Moving a tag is publishing another image.
    pub fn publish(&self, repository: &str, tag: &str, image: &Image) {
        let mut content = self.shared.content.lock();
        let mut holds = self.shared.holds.lock();
        for part in [&image.layer, &image.config, &image.manifest, &image.index] {
            content.insert(part.digest.clone(), part.clone());
            holds.entry(repository.to_string()).or_default().push(part.digest.clone());
        }
        let mut tags = self.shared.tags.lock();
        tags.insert((repository.into(), tag.into()), image.manifest.digest.clone());
        tags.insert((repository.into(), format!("{tag}-multi")), image.index.digest.clone());
    }

    /// Makes `repository` private: only `user:password` (and others made
    /// so before) gets a token that pulls from it, one of its own.
    pub fn make_private(&self, repository: &str, credentials: &str) {
        self.shared.private.lock().entry(repository.into()).or_default().push(credentials.into());
    }

    /// Every request so far, the CDN's included.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().clone()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().clear();
    }

    /// From now on manifest answers say `remaining` pulls are left.
    pub fn set_remaining(&self, remaining: u64) {
        self.shared.remaining.store(remaining, Ordering::SeqCst);
    }

    /// From now on `pulls` more manifest `GET`s are answered, and each
    /// after them is a `429 TOOMANYREQUESTS` with `Retry-After:
    /// retry_after` (seconds), as Docker Hub's pull limit does; a `HEAD`
    /// costs nothing and always answers.
    pub fn limit_pulls(&self, pulls: u64, retry_after: u64) {
        *self.shared.pull_limit.lock() = Some(PullLimit { left: pulls, retry_after });
    }

    /// From now on manifest `GET`s are not limited.
    pub fn lift_pull_limit(&self) {
        *self.shared.pull_limit.lock() = None;
    }

    /// From now on every manifest answer is held back `delay` (a slow
    /// registry, so concurrent clients overlap).
    pub fn set_manifest_delay(&self, delay: std::time::Duration) {
        self.shared.manifest_delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// From now on every request is taken and never answered.
    pub fn set_stalled(&self, stalled: bool) {
        self.shared.stalled.store(stalled, Ordering::SeqCst);
    }

    /// From now on the CDN serves every blob with its last byte changed.
    pub fn set_corrupt(&self, corrupt: bool) {
        self.shared.corrupt.store(corrupt, Ordering::SeqCst);
    }

    /// From now on blobs are redirected to `location` as it is (a hostile
    /// or broken registry), or to the CDN again with `None`.
    pub fn set_blob_location(&self, location: Option<&str>) {
        *self.shared.blob_location.lock() = location.map(str::to_string);
    }

    /// From now on challenges name `realm` as where tokens are given (a
    /// hostile or broken registry), or the hub's own again with `None`.
    pub fn set_realm(&self, realm: Option<&str>) {
        *self.shared.realm.lock() = realm.map(str::to_string);
    }

    /// From now on every request is answered `status` (`0`: normally); a
    /// `429` carries `Retry-After: 30`.
    pub fn force_status(&self, status: u16) {
        self.shared.forced.store(status, Ordering::SeqCst);
    }
}

impl Drop for FakeHub {
    fn drop(&mut self) {
        self.accept.iter().for_each(JoinHandle::abort);
    }
}

type Answer = Response<Full<Bytes>>;

fn reply(status: StatusCode, headers: &[(&str, String)], body: impl Into<Bytes>) -> Answer {
    let mut answer = Response::new(Full::new(body.into()));
    *answer.status_mut() = status;
    for (name, value) in headers {
        answer.headers_mut().insert(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    answer
}

fn error(status: StatusCode, code: &str) -> Answer {
    let body = json!({"errors": [{"code": code, "message": code.to_lowercase()}]}).to_string();
    reply(status, &[("content-type", "application/json".into())], body)
}

async fn answer(owned: Arc<Shared>, request: Request<Incoming>) -> Answer {
    let shared: &Shared = &owned;
    let (parts, body) = request.into_parts();
    let _ = body.collect().await;
    shared.requests.lock().push(RecordedRequest::of_parts(&parts));
    if shared.stalled.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    let forced = shared.forced.load(Ordering::SeqCst);
    if forced != 0 {
        let status = StatusCode::from_u16(forced).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut answer = error(status, "TOOMANYREQUESTS");
        answer.headers_mut().insert("retry-after", "30".parse().unwrap());
        return answer;
    }
    let path = parts.uri.path();
    if let Some(hex) = path.strip_prefix("/cdn/") {
        return cdn(shared, hex, &parts.headers);
    }
    if path == "/_counts" {
        return counts(shared);
    }
    if path == "/token" {
        return token(shared, parts.uri.query().unwrap_or(""), &parts.headers);
    }
    let Some(rest) = path.strip_prefix("/v2/") else { return error(StatusCode::NOT_FOUND, "NOT_FOUND") };
    let (repository, kind, reference) = match ["manifests", "blobs"].iter().find_map(|kind| {
        let (repository, reference) = rest.rsplit_once(&format!("/{kind}/"))?;
        Some((repository, *kind, reference))
    }) {
        Some(found) => found,
        None => return challenge(shared, &parts.headers, None),
    };
    if !authorised(shared, repository, &parts.headers) {
        return challenge(shared, &parts.headers, Some(repository));
    }
    let digest = match reference.starts_with("sha256:") {
        true => Some(reference.to_string()),
        false => shared.tags.lock().get(&(repository.to_string(), reference.to_string())).cloned(),
    };
    let held = |digest: &String| shared.holds.lock().get(repository).is_some_and(|held| held.contains(digest));
    let Some(content) = digest.filter(held).and_then(|digest| shared.content.lock().get(&digest).cloned()) else {
        return error(StatusCode::NOT_FOUND, if kind == "blobs" { "BLOB_UNKNOWN" } else { "MANIFEST_UNKNOWN" });
    };
    match kind {
        "blobs" => {
            let cdn =
                format!("http://{}/cdn/{}?signature=expiring", shared.cdn_addr, &content.digest["sha256:".len()..]);
            let location = shared.blob_location.lock().clone().unwrap_or(cdn);
            reply(StatusCode::TEMPORARY_REDIRECT, &[("location", location)], "")
        }
        _ => {
            if parts.method == http::Method::GET {
                if let Some(retry_after) = pull_refused(shared) {
                    let mut answer = error(StatusCode::TOO_MANY_REQUESTS, "TOOMANYREQUESTS");
                    answer.headers_mut().insert("retry-after", retry_after.into());
                    return answer;
                }
            }
            let delay = shared.manifest_delay_ms.load(Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            manifest(&content, shared.remaining.load(Ordering::SeqCst))
        }
    }
}

/// Counts a manifest `GET` against the pull limit: `Some(retry_after)`
/// when it is past it.
fn pull_refused(shared: &Shared) -> Option<u64> {
    let mut limit = shared.pull_limit.lock();
    let limit = limit.as_mut()?;
    match limit.left {
        0 => Some(limit.retry_after),
        _ => {
            limit.left -= 1;
            None
        }
    }
}

/// Whether the request's token pulls from `repository`: the public token,
/// or for a private repository one of a reader's.
fn authorised(shared: &Shared, repository: &str, headers: &HeaderMap) -> bool {
    let Some(token) = headers.get("authorization").and_then(|v| v.to_str().ok()) else { return false };
    let Some(token) = token.strip_prefix("Bearer ") else { return false };
    match shared.private.lock().get(repository) {
        None => token == format!("token-for-{repository}"),
        Some(readers) => readers.iter().any(|credentials| {
            let user = credentials.split(':').next().unwrap_or("");
            token == format!("token-for-{repository}-by-{user}")
        }),
    }
}

fn manifest(content: &Content, remaining: u64) -> Answer {
    let headers = [
        ("content-type", content.media_type.unwrap_or(OCI_MANIFEST).to_string()),
        ("docker-content-digest", content.digest.clone()),
        ("etag", format!("\"{}\"", content.digest)),
        ("ratelimit-limit", "100;w=21600".into()),
        ("ratelimit-remaining", format!("{remaining};w=21600")),
    ];
    reply(StatusCode::OK, &headers, content.bytes.clone())
}

/// What was asked so far, for a benchmark run outside a test: requests,
/// CDN fetches and the blob bytes the CDN sent.
fn counts(shared: &Shared) -> Answer {
    let requests = shared.requests.lock();
    let cdn: Vec<&RecordedRequest> = requests.iter().filter(|r| r.path.starts_with("/cdn/")).collect();
    let content = shared.content.lock();
    let bytes: usize = cdn
        .iter()
        .filter_map(|r| r.path.trim_start_matches("/cdn/").split('?').next())
        .filter_map(|hex| content.get(&format!("sha256:{hex}")))
        .map(|c| c.bytes.len())
        .sum();
    let body = json!({"requests": requests.len() - 1, "cdn_fetches": cdn.len(), "cdn_bytes": bytes});
    reply(StatusCode::OK, &[("content-type", "application/json".into())], body.to_string())
}

/// A `401` whose realm is on the host the client named (the hub's address,
/// or a name pinned to it), as a registry's realm is on its own domain;
/// to a token that does not read the repository, `insufficient_scope`.
fn challenge(shared: &Shared, headers: &HeaderMap, repository: Option<&str>) -> Answer {
    let host = headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string);
    let host = host.unwrap_or_else(|| shared.addr.to_string());
    let realm = shared.realm.lock().clone().unwrap_or_else(|| format!("http://{host}/token"));
    let mut value = format!("Bearer realm=\"{realm}\",service=\"fakehub\"");
    if let Some(repository) = repository {
        value.push_str(&format!(",scope=\"repository:{repository}:pull\""));
    }
    // As Docker Hub: a token that does not read the repository is told so.
    if headers.get("authorization").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("Bearer ")) {
        value.push_str(",error=\"insufficient_scope\"");
    }
    let mut answer = error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    answer.headers_mut().insert("www-authenticate", value.parse().unwrap());
    answer
}

fn token(shared: &Shared, query: &str, headers: &HeaderMap) -> Answer {
    let scope = query.split('&').find_map(|pair| pair.strip_prefix("scope=")).unwrap_or("");
    let scope = percent_encoding::percent_decode_str(scope).decode_utf8_lossy();
    let Some(repository) = scope.strip_prefix("repository:").and_then(|s| s.strip_suffix(":pull")) else {
        return error(StatusCode::BAD_REQUEST, "UNSUPPORTED");
    };
    let given = headers.get("authorization").and_then(|v| v.to_str().ok());
    let token = match shared.private.lock().get(repository) {
        None => Some(format!("token-for-{repository}")),
        Some(readers) => readers.iter().find_map(|credentials| {
            use base64::Engine;
            let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials));
            let user = credentials.split(':').next().unwrap_or("");
            (given == Some(basic.as_str())).then(|| format!("token-for-{repository}-by-{user}"))
        }),
    };
    // Like Docker Hub, an anonymous token is given either way; it just
    // does not pull from a private repository.
    let token = token.unwrap_or_else(|| "token-anonymous".to_string());
    let body = json!({"token": token, "expires_in": 300, "issued_at": "2026-01-01T00:00:00Z"});
    reply(StatusCode::OK, &[("content-type", "application/json".into())], body.to_string())
}

fn cdn(shared: &Shared, hex: &str, headers: &HeaderMap) -> Answer {
    let Some(content) = shared.content.lock().get(&format!("sha256:{hex}")).cloned() else {
        return error(StatusCode::NOT_FOUND, "BLOB_UNKNOWN");
    };
    let mut bytes = content.bytes;
    if shared.corrupt.load(Ordering::SeqCst) {
        let mut wrong = bytes.to_vec();
        if let Some(last) = wrong.last_mut() {
            *last ^= 0xff;
        }
        bytes = Bytes::from(wrong);
    }
    let start = headers
        .get("range")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|s| s.parse::<usize>().ok());
    match start {
        Some(start) if start < bytes.len() => {
            let range = format!("bytes {start}-{}/{}", bytes.len() - 1, bytes.len());
            reply(StatusCode::PARTIAL_CONTENT, &[("content-range", range)], bytes.slice(start..))
        }
        _ => reply(StatusCode::OK, &[("content-type", "application/octet-stream".into())], bytes),
    }
}
