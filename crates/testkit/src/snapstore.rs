//! A fake Snap Store on `127.0.0.1:0` for snap-side tests, shaped after
//! what the real `snap` 2.57 asks and accepts:
//!
//! - `POST /v2/snaps/refresh` answers each action by its instance key with
//!   the snap's current revision, whose blob differs by the device's
//!   architecture and brand store (so a key mix-up shows as wrong bytes);
//! - `GET /api/v1/snaps/download/<id>_<rev>.snap` redirects to
//!   `/cdn/<sha3-384>?token=..` on its CDN (another port: another origin,
//!   as the real store's CDN is another host), which serves the blob
//!   (`206` for `Range`);
//! - `GET /v2/assertions/...` serves well-formed unsigned assertions: the
//!   snap's `snap-revision` and `snap-declaration`, its publisher's
//!   `account` and the store's `account-key`; anything else is the store's
//!   `404` not-found problem;
//! - `GET /v2/snaps/info/<name>` and `GET /v2/snaps/find?q=` answer from
//!   the same snaps.
//!
//! It records every request, can be made to lie (serve other bytes than
//! the digest it announced) and to answer everything with a status (a
//! `429` with `Retry-After`, say). Blobs are real squashfs images made with
//! `mksquashfs`, holding a `meta/snap.yaml`.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use sha3::{Digest, Sha3_384};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::origin::RecordedRequest;

/// The store's own signing key, as assertions name it (64 base64url characters).
pub const STORE_KEY: &str = "StoreKeyStoreKeyStoreKeyStoreKeyStoreKeyStoreKeyStoreKeyStoreKey";
/// The publisher of every snap.
pub const PUBLISHER: &str = "pkgproxydev";

/// A snap the store knows.
#[derive(Debug, Clone)]
pub struct FakeSnap {
    /// Its name.
    pub name: String,
    /// Its 32-character id.
    pub snap_id: String,
    /// Its current revision.
    pub revision: u64,
}

/// One blob: a squashfs for one snap, architecture and store.
#[derive(Debug, Clone)]
pub struct Blob {
    /// The bytes.
    pub bytes: Bytes,
    /// Their SHA3-384, hex.
    pub sha3_384: String,
}

impl Blob {
    /// The key of its snap-revision assertion, as snapd writes it: the
    /// digest in unpadded base64url.
    pub fn revision_name(&self) -> String {
        let digest = hex::decode(&self.sha3_384).expect("hex digest");
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    }
}

struct Shared {
    snaps: Vec<FakeSnap>,
    /// Blobs by (snap name, architecture, store).
    blobs: Mutex<HashMap<(String, String, String), Blob>>,
    /// Blobs by digest, as the CDN serves them.
    by_digest: Mutex<HashMap<String, Blob>>,
    requests: Mutex<Vec<RecordedRequest>>,
    lying: AtomicBool,
    forced: AtomicU16,
    addr: SocketAddr,
    cdn_addr: SocketAddr,
}

/// A running fake store. Dropping it stops it.
pub struct FakeStore {
    shared: Arc<Shared>,
    accept: Vec<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl FakeStore {
    /// Starts a store knowing `hello-pkgproxy` and `other-pkgproxy`.
    pub async fn start() -> FakeStore {
        let snaps = vec![
            FakeSnap { name: "hello-pkgproxy".into(), snap_id: "hellopkgproxyid00000000000000001".into(), revision: 3 },
            FakeSnap { name: "other-pkgproxy".into(), snap_id: "otherpkgproxyid00000000000000002".into(), revision: 7 },
        ];
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let cdn = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let shared = Arc::new(Shared {
            snaps,
            blobs: Mutex::default(),
            by_digest: Mutex::default(),
            requests: Mutex::default(),
            lying: AtomicBool::new(false),
            forced: AtomicU16::new(0),
            addr: listener.local_addr().expect("local address"),
            cdn_addr: cdn.local_addr().expect("local address"),
        });
        let dir = tempfile::tempdir().expect("temporary folder");
        let blob_dir = Arc::new(dir.path().to_path_buf());
        let accept =
            [listener, cdn].map(|listener| tokio::spawn(serve(listener, Arc::clone(&shared), Arc::clone(&blob_dir))));
        FakeStore { shared, accept: accept.into(), _dir: dir }
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Its CDN's origin (another port of 127.0.0.1): a pkgproxy trusts it
    /// with `[upstream] trust`.
    pub fn cdn_url(&self) -> String {
        format!("http://{}", self.shared.cdn_addr)
    }

    /// A configuration that knows this store, its CDN trusted.
    pub fn config(&self) -> String {
        format!("[upstream]\ntrust = [\"{}\"]\n[snap]\nstores = [\"{}\"]\n", self.cdn_url(), self.url())
    }

    /// The snaps it knows.
    pub fn snaps(&self) -> &[FakeSnap] {
        &self.shared.snaps
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().clone()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().clear();
    }

    /// From now on the CDN serves other bytes than the digest it announced.
    pub fn set_lying(&self, lying: bool) {
        self.shared.lying.store(lying, Ordering::SeqCst);
    }

    /// From now on every request is answered with `status` (`0`: normally);
    /// a `429` carries `Retry-After: 60`.
    pub fn force_status(&self, status: u16) {
        self.shared.forced.store(status, Ordering::SeqCst);
    }

    /// The blob of `name` for `architecture` in `store` (`""`: the global
    /// store), made when first asked for.
    pub fn blob(&self, name: &str, architecture: &str, store: &str) -> Blob {
        blob(&self.shared, self._dir.path(), name, architecture, store)
    }

    /// The text of an assertion as this store serves it (`kind` and the
    /// primary key as in its URL).
    pub fn assertion(&self, kind: &str, key: &[&str]) -> Option<Vec<u8>> {
        let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
        assertion(&self.shared, kind, &key)
    }
}

impl Drop for FakeStore {
    fn drop(&mut self) {
        self.accept.iter().for_each(JoinHandle::abort);
    }
}

/// Answers the connections `listener` accepts.
async fn serve(listener: TcpListener, shared: Arc<Shared>, blob_dir: Arc<std::path::PathBuf>) {
    while let Ok((stream, _)) = listener.accept().await {
        let (shared, blob_dir) = (Arc::clone(&shared), Arc::clone(&blob_dir));
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (shared, blob_dir) = (Arc::clone(&shared), Arc::clone(&blob_dir));
                async move { Ok::<_, Infallible>(answer(&shared, &blob_dir, request).await) }
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

fn blob(shared: &Shared, dir: &Path, name: &str, architecture: &str, store: &str) -> Blob {
    let key = (name.to_string(), architecture.to_string(), store.to_string());
    if let Some(blob) = shared.blobs.lock().get(&key) {
        return blob.clone();
    }
    let root = dir.join(format!("{name}-{architecture}-{store}"));
    std::fs::create_dir_all(root.join("meta")).expect("snap folder");
    let yaml =
        format!("name: {name}\nversion: '1.0'\nsummary: test\ndescription: test\narchitectures: [{architecture}]\n");
    std::fs::write(root.join("meta/snap.yaml"), yaml).expect("snap.yaml");
    std::fs::write(root.join("store"), format!("built for {architecture} in store {store:?}\n")).expect("marker");
    let image = dir.join(format!("{name}-{architecture}-{store}.snap"));
    let made = Command::new("mksquashfs")
        .arg(&root)
        .arg(&image)
        .args(["-all-root", "-no-xattrs", "-noappend", "-quiet", "-mkfs-time", "0", "-all-time", "0"])
        .output()
        .expect("mksquashfs (Debian's squashfs-tools) runs");
    assert!(made.status.success(), "mksquashfs: {}", String::from_utf8_lossy(&made.stderr));
    let bytes = Bytes::from(std::fs::read(&image).expect("snap image"));
    let blob = Blob { sha3_384: hex::encode(Sha3_384::digest(&bytes)), bytes };
    shared.blobs.lock().insert(key, blob.clone());
    shared.by_digest.lock().insert(blob.sha3_384.clone(), blob.clone());
    blob
}

type Answer = Response<Full<Bytes>>;

async fn answer(shared: &Shared, dir: &Path, request: Request<Incoming>) -> Answer {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    shared.requests.lock().push(RecordedRequest::of_parts(&parts));
    let forced = shared.forced.load(Ordering::SeqCst);
    if forced != 0 {
        let mut answer =
            reply(StatusCode::from_u16(forced).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), "text/plain", "forced\n");
        if forced == 429 {
            answer.headers_mut().insert("retry-after", "60".parse().unwrap());
        }
        return answer;
    }
    let path = parts.uri.path();
    let query = parts.uri.query().unwrap_or("");
    let device = Device::of(&parts.headers);
    match (&parts.method, path) {
        (&Method::POST, "/v2/snaps/refresh") => refresh(shared, dir, &device, &body),
        (&Method::GET | &Method::HEAD, _) if path.starts_with("/api/v1/snaps/download/") => {
            download_redirect(shared, dir, &device, &path["/api/v1/snaps/download/".len()..])
        }
        (&Method::GET | &Method::HEAD, _) if path.starts_with("/cdn/") => {
            cdn(shared, &path["/cdn/".len()..], &parts.headers)
        }
        (&Method::GET, _) if path.starts_with("/v2/assertions/") => {
            let key: Vec<String> = path["/v2/assertions/".len()..].split('/').map(str::to_string).collect();
            match assertion(shared, &key[0], &key[1..]) {
                Some(text) => reply(StatusCode::OK, "application/x.ubuntu.assertion", text),
                None => not_found(),
            }
        }
        (&Method::GET, _) if path.starts_with("/v2/snaps/info/") => {
            info(shared, dir, &device, &path["/v2/snaps/info/".len()..])
        }
        (&Method::GET, "/v2/snaps/find") => find(shared, dir, &device, query),
        _ => not_found(),
    }
}

/// The device headers the store's answers depend on.
struct Device {
    architecture: String,
    store: String,
}

impl Device {
    fn of(headers: &HeaderMap) -> Device {
        let first = |names: [&str; 2]| {
            names.iter().find_map(|name| headers.get(*name)?.to_str().ok()).unwrap_or("").to_string()
        };
        Device {
            architecture: first(["snap-device-architecture", "x-ubuntu-architecture"]),
            store: first(["snap-device-store", "x-ubuntu-store"]),
        }
    }
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Answer {
    let mut answer = Response::new(Full::new(body.into()));
    *answer.status_mut() = status;
    answer.headers_mut().insert("content-type", content_type.parse().unwrap());
    answer
}

fn not_found() -> Answer {
    let body = r#"{"error-list":[{"code":"not-found","message":"not found"}]}"#;
    reply(StatusCode::NOT_FOUND, "application/problem+json", body)
}

/// The snap object of an answer, for `device`.
fn snap_object(shared: &Shared, dir: &Path, device: &Device, snap: &FakeSnap) -> Value {
    let blob = blob(shared, dir, &snap.name, &device.architecture, &device.store);
    json!({
        "name": snap.name, "snap-id": snap.snap_id, "revision": snap.revision, "version": "1.0",
        "type": "app", "confinement": "strict", "base": "core22", "epoch": {"read": [0], "write": [0]},
        "publisher": {"id": PUBLISHER, "username": PUBLISHER, "display-name": "pkgproxy dev", "validation": "unproven"},
        "summary": "test", "description": "test", "private": false,
        "download": {
            "url": format!("http://{}/api/v1/snaps/download/{}_{}.snap", shared.addr, snap.snap_id, snap.revision),
            "size": blob.bytes.len(), "sha3-384": blob.sha3_384, "deltas": []
        },
        "media": [],
    })
}

fn refresh(shared: &Shared, dir: &Path, device: &Device, body: &[u8]) -> Answer {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return reply(
            StatusCode::BAD_REQUEST,
            "application/json",
            r#"{"error-list":[{"code":"bad-request","message":"not JSON"}]}"#,
        );
    };
    let actions = request["actions"].as_array().cloned().unwrap_or_default();
    let results: Vec<Value> = actions
        .iter()
        .map(|action| {
            let kind = action["action"].as_str().unwrap_or("");
            let instance = action["instance-key"].clone();
            let found = shared.snaps.iter().find(|snap| {
                action["name"].as_str() == Some(snap.name.as_str())
                    || action["snap-id"].as_str() == Some(snap.snap_id.as_str())
            });
            match found {
                Some(snap) => {
                    json!({"result": kind, "instance-key": instance, "snap-id": snap.snap_id, "name": snap.name,
                                     "effective-channel": "stable", "snap": snap_object(shared, dir, device, snap)})
                }
                None => json!({"result": "error", "instance-key": instance, "name": action["name"],
                               "error": {"code": "name-not-found", "message": "snap not found"}}),
            }
        })
        .collect();
    reply(StatusCode::OK, "application/json", json!({"results": results, "error-list": []}).to_string())
}

fn download_redirect(shared: &Shared, dir: &Path, device: &Device, file: &str) -> Answer {
    let Some(snap) = shared.snaps.iter().find(|snap| file == format!("{}_{}.snap", snap.snap_id, snap.revision)) else {
        return not_found();
    };
    let blob = blob(shared, dir, &snap.name, &device.architecture, &device.store);
    let mut answer = reply(StatusCode::FOUND, "text/plain", "");
    let location = format!("http://{}/cdn/{}?token=expiring", shared.cdn_addr, blob.sha3_384);
    answer.headers_mut().insert("location", location.parse().unwrap());
    answer
}

fn cdn(shared: &Shared, digest: &str, headers: &HeaderMap) -> Answer {
    let Some(blob) = shared.by_digest.lock().get(digest).cloned() else { return not_found() };
    let mut bytes = blob.bytes.to_vec();
    if shared.lying.load(Ordering::SeqCst) {
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
    }
    let range = headers.get("range").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("bytes="));
    let start = range.and_then(|r| r.strip_suffix('-')).and_then(|s| s.parse::<usize>().ok());
    match start {
        Some(start) if start < bytes.len() => {
            let total = bytes.len();
            let mut answer = reply(StatusCode::PARTIAL_CONTENT, "application/octet-stream", bytes[start..].to_vec());
            answer
                .headers_mut()
                .insert("content-range", format!("bytes {start}-{}/{total}", total - 1).parse().unwrap());
            answer
        }
        _ => reply(StatusCode::OK, "application/octet-stream", bytes),
    }
}

fn info(shared: &Shared, dir: &Path, device: &Device, name: &str) -> Answer {
    let Some(snap) = shared.snaps.iter().find(|snap| snap.name == name) else { return not_found() };
    let object = snap_object(shared, dir, device, snap);
    let body = json!({"name": snap.name, "snap-id": snap.snap_id, "snap": {"name": snap.name, "publisher": object["publisher"]},
                      "channel-map": [{"channel": {"architecture": device.architecture, "name": "stable", "risk": "stable", "track": "latest"},
                                       "download": object["download"], "revision": snap.revision, "version": "1.0"}]});
    reply(StatusCode::OK, "application/json", body.to_string())
}

fn find(shared: &Shared, dir: &Path, device: &Device, query: &str) -> Answer {
    let q = query.split('&').find_map(|pair| pair.strip_prefix("q=")).unwrap_or("");
    let results: Vec<Value> = shared
        .snaps
        .iter()
        .filter(|snap| !q.is_empty() && snap.name.contains(q))
        .map(|snap| {
            let object = snap_object(shared, dir, device, snap);
            json!({"name": snap.name, "snap-id": snap.snap_id, "snap": {"name": snap.name}, "revision": {"revision": snap.revision, "download": object["download"]}})
        })
        .collect();
    reply(StatusCode::OK, "application/json", json!({"results": results}).to_string())
}

/// An assertion's text: headers, the body if any, and a signature that
/// is well-formed but signed by nobody.
fn assemble(headers: &[(&str, String)], body: &str) -> Vec<u8> {
    let mut text: Vec<String> = headers.iter().map(|(name, value)| format!("{name}: {value}")).collect();
    if !body.is_empty() {
        text.push(format!("body-length: {}", body.len()));
    }
    text.push(format!("sign-key-sha3-384: {STORE_KEY}"));
    let mut assertion = text.join("\n");
    assertion.push_str("\n\n");
    if !body.is_empty() {
        assertion.push_str(body);
        assertion.push_str("\n\n");
    }
    assertion.push_str("AcLBUgQAAQoABgUCZmFrZQAKCRDfYWtlc2lnbmF0dXJl");
    assertion.into_bytes()
}

const TIMESTAMP: &str = "2024-01-01T00:00:00Z";

fn assertion(shared: &Shared, kind: &str, key: &[String]) -> Option<Vec<u8>> {
    let base = |kind: &str| vec![("type", kind.to_string()), ("authority-id", "canonical".to_string())];
    match (kind, key) {
        ("snap-revision", [digest]) => {
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(digest).ok()?;
            let blob = shared.by_digest.lock().get(&hex::encode(bytes)).cloned()?;
            let snap = shared.snaps.iter().find(|snap| {
                shared.blobs.lock().iter().any(|((name, ..), b)| *name == snap.name && b.sha3_384 == blob.sha3_384)
            })?;
            let mut headers = base(kind);
            headers.extend([
                ("snap-sha3-384", digest.clone()),
                ("snap-id", snap.snap_id.clone()),
                ("snap-size", blob.bytes.len().to_string()),
                ("snap-revision", snap.revision.to_string()),
                ("developer-id", PUBLISHER.to_string()),
                ("timestamp", TIMESTAMP.to_string()),
            ]);
            Some(assemble(&headers, ""))
        }
        ("snap-declaration", [series, snap_id]) => {
            let snap = shared.snaps.iter().find(|snap| snap.snap_id == *snap_id)?;
            let mut headers = base(kind);
            headers.extend([
                ("revision", "2".to_string()),
                ("series", series.clone()),
                ("snap-id", snap.snap_id.clone()),
                ("snap-name", snap.name.clone()),
                ("publisher-id", PUBLISHER.to_string()),
                ("timestamp", TIMESTAMP.to_string()),
            ]);
            Some(assemble(&headers, ""))
        }
        ("account", [id]) if id == PUBLISHER || id == "canonical" => {
            let mut headers = base(kind);
            headers.extend([
                ("account-id", id.clone()),
                ("display-name", "pkgproxy dev".to_string()),
                ("validation", "unproven".to_string()),
                ("timestamp", TIMESTAMP.to_string()),
            ]);
            Some(assemble(&headers, ""))
        }
        ("account-key", [id]) if id == STORE_KEY => {
            let mut headers = base(kind);
            headers.extend([
                ("account-id", "canonical".to_string()),
                ("name", "store".to_string()),
                ("since", TIMESTAMP.to_string()),
                ("public-key-sha3-384", STORE_KEY.to_string()),
            ]);
            Some(assemble(&headers, "AcbBTQRWhcGAARAAtJGIguK7FhSyRxL"))
        }
        _ => None,
    }
}
