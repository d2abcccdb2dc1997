//! A fake simplestreams image server (cloud-images' layout) over plain
//! HTTP on 127.0.0.1, rooted at `/releases/`: an index naming one
//! products file (with a colon in its name, as the real one has) and an
//! `image-ids` catalogue LXD ignores; one product, `testos`, with a version
//! per published serial, each a metadata tarball, a squashfs and a VM disk
//! with the combined fingerprints LXD pairs them by. The image bytes are
//! opaque: LXD lists, checks and exports them without opening them.
//!
//! Knobs that misbehave on demand (corrupt, short, long or trickled image
//! files; a redirect; no validators; a forced status; an item whose path
//! climbs out of the root) and a log of every request.
//!
//! No `md5` on items: LXD parses it but never checks it, and the workspace
//! has no md5 crate. It must not listen on anything but loopback.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::origin::RecordedRequest;

/// The path below the server that is the simplestreams root.
pub const ROOT: &str = "/releases";
/// Where the index is, below the root (a fixed name: LXD starts there).
pub const INDEX_PATH: &str = "streams/v1/index.json";
/// Where the products file is, below the root.
pub const PRODUCTS_PATH: &str = "streams/v1/com.ubuntu.cloud:released:download.json";
/// The product every serial is a version of.
const PRODUCT: &str = "com.ubuntu.cloud:server:24.04:amd64";

/// An image's three files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LxdImage {
    /// `lxd.tar.xz`: the metadata.
    pub meta: Bytes,
    /// The container root file system.
    pub squashfs: Bytes,
    /// The VM disk.
    pub disk: Bytes,
}

impl LxdImage {
    /// Opaque bytes made from `text`; the squashfs padded to `size` bytes
    /// when given.
    pub fn build(text: &str, size: Option<usize>) -> LxdImage {
        let fill = |part: &str, length: usize| {
            let seed = format!("{part} of {text}\n");
            let mut bytes = seed.repeat(length.div_ceil(seed.len()).max(1)).into_bytes();
            bytes.truncate(length.max(seed.len()));
            Bytes::from(bytes)
        };
        LxdImage {
            meta: fill("meta", 1000),
            squashfs: fill("squashfs", size.unwrap_or(12_000)),
            disk: fill("disk", 6_000),
        }
    }
}

/// One published file: where it is and its bytes.
#[derive(Clone)]
struct Item {
    ftype: &'static str,
    path: String,
    bytes: Bytes,
}

struct Shared {
    /// serial → its items.
    versions: Mutex<BTreeMap<String, Vec<Item>>>,
    /// Files served although no version names them under the root: an
    /// escaping item's target, at its path below the server.
    extra: Mutex<Vec<Item>>,
    /// Bumped by every change to the products file, so its
    /// `Last-Modified` moves on.
    generation: AtomicU64,
    requests: Mutex<Vec<RecordedRequest>>,
    corrupt: AtomicBool,
    short: AtomicBool,
    long: AtomicBool,
    redirect: AtomicBool,
    validators: AtomicBool,
    status: AtomicU16,
    trickle_ms: AtomicU64,
}

/// A running simplestreams server. Dropping it stops it.
pub struct FakeSimplestreams {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl FakeSimplestreams {
    /// Starts a server with nothing published.
    pub async fn start() -> FakeSimplestreams {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            versions: Mutex::default(),
            extra: Mutex::default(),
            generation: AtomicU64::new(0),
            requests: Mutex::default(),
            corrupt: AtomicBool::new(false),
            short: AtomicBool::new(false),
            long: AtomicBool::new(false),
            redirect: AtomicBool::new(false),
            validators: AtomicBool::new(true),
            status: AtomicU16::new(0),
            trickle_ms: AtomicU64::new(0),
        });
        let accept = tokio::spawn(crate::fake::serve(listener, Arc::clone(&shared), answer));
        FakeSimplestreams { shared, addr, accept }
    }

    /// `http://127.0.0.1:PORT`; the simplestreams root is [`Self::root`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/releases`: the URL a remote names.
    pub fn root(&self) -> String {
        format!("{}{ROOT}", self.url())
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Publishes `image` as version `serial` (`yyyymmdd`).
    pub fn publish(&self, serial: &str, image: &LxdImage) {
        let dir = format!("server/releases/noble/release-{serial}/ubuntu-24.04-server-cloudimg-amd64");
        let items = vec![
            Item { ftype: "lxd.tar.xz", path: format!("{dir}-lxd.tar.xz"), bytes: image.meta.clone() },
            Item { ftype: "squashfs", path: format!("{dir}.squashfs"), bytes: image.squashfs.clone() },
            Item { ftype: "disk-kvm.img", path: format!("{dir}.img"), bytes: image.disk.clone() },
        ];
        self.shared.versions.lock().insert(serial.to_string(), items);
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Removes version `serial` from the products file and makes its files
    /// 404, as upstream does with old daily serials.
    pub fn delete(&self, serial: &str) {
        self.shared.versions.lock().remove(serial);
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The items of `serial`: path, sha256 and size.
    pub fn items(&self, serial: &str) -> Vec<(String, String, u64)> {
        let versions = self.shared.versions.lock();
        let items = versions.get(serial).cloned().unwrap_or_default();
        items.iter().map(|item| (item.path.clone(), sha256(&item.bytes), item.bytes.len() as u64)).collect()
    }

    /// The fingerprint `lxc image list` shows for `serial`'s container
    /// image: sha256(meta ‖ squashfs).
    pub fn container_fingerprint(&self, serial: &str) -> Option<String> {
        self.combined(serial, "squashfs")
    }

    /// The fingerprint of `serial`'s VM image: sha256(meta ‖ disk).
    pub fn vm_fingerprint(&self, serial: &str) -> Option<String> {
        self.combined(serial, "disk-kvm.img")
    }

    fn combined(&self, serial: &str, root: &str) -> Option<String> {
        let versions = self.shared.versions.lock();
        combined_sha256(versions.get(serial)?, root)
    }

    /// Adds to the newest version an item whose path climbs out of the
    /// root (`../../escaped/evil.squashfs`), and serves that file at
    /// `/escaped/evil.squashfs`, so a test sees whether it was fetched.
    ///
    /// The item is a `root.tar.xz` with no combined fingerprint, so LXD
    /// 5.0.2 skips it ("No LXD image fingerprint found") and `testos` stays
    /// the squashfs image: with a fingerprint, two container images of one
    /// serial would share the alias and lxc would pick either. What it
    /// catches is a relay that fetches every item a products file names.
    pub fn add_escaping_item(&self) {
        let evil = Bytes::from_static(b"outside the remote");
        let mut versions = self.shared.versions.lock();
        if let Some((_, items)) = versions.iter_mut().next_back() {
            items.push(Item { ftype: "root.tar.xz", path: "../../escaped/evil.squashfs".into(), bytes: evil.clone() });
        }
        self.shared.extra.lock().push(Item { ftype: "root.tar.xz", path: "escaped/evil.squashfs".into(), bytes: evil });
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Image files with their last byte flipped.
    pub fn set_corrupt(&self, on: bool) {
        self.shared.corrupt.store(on, Ordering::SeqCst);
    }

    /// Image files without their last 10 bytes (`Content-Length` says so).
    pub fn set_short(&self, on: bool) {
        self.shared.short.store(on, Ordering::SeqCst);
    }

    /// Image files with bytes appended (`Content-Length` says so).
    pub fn set_long(&self, on: bool) {
        self.shared.long.store(on, Ordering::SeqCst);
    }

    /// Image files sent in 64 KiB chunks, `delay` apart (the first one
    /// too), their headers at once; `None`: all at once.
    pub fn set_trickle(&self, delay: Option<Duration>) {
        self.shared.trickle_ms.store(delay.map_or(0, |d| d.as_millis() as u64), Ordering::SeqCst);
    }

    /// Image files answered `302` to `/releases/redirected/PATH` (same
    /// host), which serves them.
    pub fn set_redirect(&self, on: bool) {
        self.shared.redirect.store(on, Ordering::SeqCst);
    }

    /// `ETag` and `Last-Modified` on the JSON, honoured with `304`s (on by
    /// default).
    pub fn set_validators(&self, on: bool) {
        self.shared.validators.store(on, Ordering::SeqCst);
    }

    /// Every request answered `status` (`0`: normally).
    pub fn set_status(&self, status: u16) {
        self.shared.status.store(status, Ordering::SeqCst);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().clone()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().clear();
    }

    /// The `GET`s of anything but the JSON so far: image files, the
    /// escaping file, unknown paths; a redirected file counts twice.
    pub fn file_requests(&self) -> usize {
        let is_json = |r: &RecordedRequest| r.path.contains("/streams/");
        self.requests().iter().filter(|r| r.method == "GET" && !is_json(r)).count()
    }
}

impl Drop for FakeSimplestreams {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn reply(status: StatusCode, headers: &[(&str, String)], body: impl Into<Bytes>) -> Response<Body> {
    let mut answer = Response::new(Full::new(body.into()).boxed());
    *answer.status_mut() = status;
    for (name, value) in headers {
        answer.headers_mut().insert(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    answer
}

async fn answer(owned: Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let shared: &Shared = &owned;
    let (parts, body) = request.into_parts();
    let _ = body.collect().await;
    shared.requests.lock().push(RecordedRequest::of_parts(&parts));
    let forced = shared.status.load(Ordering::SeqCst);
    if forced != 0 {
        return reply(StatusCode::from_u16(forced).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &[], "forced");
    }
    let path = percent_encoding::percent_decode_str(parts.uri.path()).decode_utf8_lossy().into_owned();
    if let Some(item) = shared.extra.lock().iter().find(|item| path == format!("/{}", item.path)) {
        return reply(StatusCode::OK, &[], item.bytes.clone());
    }
    let Some(below) = path.strip_prefix(ROOT).and_then(|path| path.strip_prefix('/')) else {
        return reply(StatusCode::NOT_FOUND, &[], "");
    };
    match below {
        INDEX_PATH => json_file(shared, &parts.headers, index(), published(0)),
        PRODUCTS_PATH => {
            let generation = shared.generation.load(Ordering::SeqCst);
            json_file(shared, &parts.headers, products(shared), published(generation))
        }
        _ => image_file(shared, below).await,
    }
}

/// When the products file of `generation` was published: a minute after
/// the one before, from 2024-01-01 on (a date, not the clock, so two
/// changes within a second still move `Last-Modified`).
fn published(generation: u64) -> SystemTime {
    const FIRST: u64 = 1_704_067_200;
    SystemTime::UNIX_EPOCH + Duration::from_secs(FIRST + 60 * generation)
}

fn index() -> Value {
    json!({"format": "index:1.0", "updated": "Mon, 01 Jan 2024 00:00:00 +0000", "index": {
        "com.ubuntu.cloud:released:download": {"datatype": "image-downloads", "path": PRODUCTS_PATH,
            "products": [PRODUCT], "format": "products:1.0", "updated": "Mon, 01 Jan 2024 00:00:00 +0000"},
        "com.ubuntu.cloud:released:aws": {"datatype": "image-ids", "path": "streams/v1/com.ubuntu.cloud:released:aws.json",
            "products": [PRODUCT], "format": "products:1.0"}}})
}

fn products(shared: &Shared) -> Value {
    let versions: serde_json::Map<String, Value> = shared
        .versions
        .lock()
        .iter()
        .map(|(serial, items)| (serial.clone(), json!({"items": version_items(items)})))
        .collect();
    json!({"content_id": "com.ubuntu.cloud:released:download", "datatype": "image-downloads", "format": "products:1.0",
        "products": {PRODUCT: {"aliases": "testos,testos/24.04", "arch": "amd64", "os": "ubuntu", "release": "noble",
            "release_title": "24.04 LTS", "versions": versions}}})
}

/// sha256(meta ‖ root), the fingerprint LXD gives the image made of the
/// metadata and the item of ftype `root`.
fn combined_sha256(items: &[Item], root: &str) -> Option<String> {
    let bytes = |ftype: &str| items.iter().find(|item| item.ftype == ftype).map(|item| &item.bytes);
    let (meta, root) = (bytes("lxd.tar.xz")?, bytes(root)?);
    Some(sha256(&[meta.as_ref(), root.as_ref()].concat()))
}

fn version_items(items: &[Item]) -> Value {
    let combined = |root: &str| combined_sha256(items, root);
    let mut listed = serde_json::Map::new();
    for (i, item) in items.iter().enumerate() {
        let mut entry =
            json!({"ftype": item.ftype, "path": item.path, "sha256": sha256(&item.bytes), "size": item.bytes.len()});
        if item.ftype == "lxd.tar.xz" {
            entry["combined_squashfs_sha256"] = json!(combined("squashfs"));
            entry["combined_disk-kvm-img_sha256"] = json!(combined("disk-kvm.img"));
        }
        let key = if item.ftype == "root.tar.xz" { format!("extra{i}") } else { item.ftype.to_string() };
        listed.insert(key, entry);
    }
    Value::Object(listed)
}

/// A JSON file, with validators unless they are switched off.
fn json_file(shared: &Shared, headers: &http::HeaderMap, value: Value, modified: SystemTime) -> Response<Body> {
    let body = value.to_string();
    let json = ("content-type", "application/json".to_string());
    if !shared.validators.load(Ordering::SeqCst) {
        return reply(StatusCode::OK, &[json], body);
    }
    let etag = format!("\"{}\"", &sha256(body.as_bytes())[..16]);
    let validators = [("etag", etag), ("last-modified", httpdate::fmt_http_date(modified))];
    if unchanged(headers, &validators[0].1, modified) {
        return reply(StatusCode::NOT_MODIFIED, &validators, "");
    }
    reply(StatusCode::OK, &[&[json][..], &validators].concat(), body)
}

/// Whether the client's copy is current. `If-None-Match` decides when it
/// is sent (RFC 9110 §13.2.2), `If-Modified-Since` otherwise.
fn unchanged(headers: &http::HeaderMap, etag: &str, modified: SystemTime) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(tags) = header("if-none-match") {
        return tags.split(',').map(str::trim).any(|tag| tag == etag || tag == "*");
    }
    let since = header("if-modified-since").and_then(|date| httpdate::parse_http_date(date).ok());
    since.is_some_and(|since| modified <= since)
}

async fn image_file(shared: &Shared, below: &str) -> Response<Body> {
    let (path, redirected) = match below.strip_prefix("redirected/") {
        Some(path) => (path, true),
        None => (below, false),
    };
    let item = {
        let versions = shared.versions.lock();
        versions.values().flatten().find(|item| item.path == path).cloned()
    };
    let Some(item) = item else { return reply(StatusCode::NOT_FOUND, &[], "") };
    if shared.redirect.load(Ordering::SeqCst) && !redirected {
        return reply(StatusCode::FOUND, &[("location", format!("{ROOT}/redirected/{path}"))], "");
    }
    let bytes = misbehaved(shared, item.bytes);
    let delay = shared.trickle_ms.load(Ordering::SeqCst);
    if delay == 0 {
        return reply(StatusCode::OK, &[("content-type", "application/octet-stream".into())], bytes);
    }
    trickled(bytes, Duration::from_millis(delay))
}

/// `bytes` as the knobs say they are sent.
fn misbehaved(shared: &Shared, bytes: Bytes) -> Bytes {
    let mut sent = bytes.to_vec();
    if shared.corrupt.load(Ordering::SeqCst) {
        if let Some(last) = sent.last_mut() {
            *last ^= 0xff;
        }
    }
    if shared.short.load(Ordering::SeqCst) {
        sent.truncate(sent.len().saturating_sub(10));
    }
    if shared.long.load(Ordering::SeqCst) {
        sent.extend_from_slice(b"and some more bytes");
    }
    Bytes::from(sent)
}

/// `bytes` in 64 KiB chunks, `delay` apart, with its length up front.
fn trickled(bytes: Bytes, delay: Duration) -> Response<Body> {
    let length = bytes.len();
    let chunks: Vec<Bytes> =
        (0..length).step_by(64 * 1024).map(|at| bytes.slice(at..(at + 64 * 1024).min(length))).collect();
    let stream = futures_util::stream::unfold(chunks.into_iter(), move |mut chunks| async move {
        let chunk = chunks.next()?;
        tokio::time::sleep(delay).await;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), chunks))
    });
    let mut answer = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    answer.headers_mut().insert("content-length", length.into());
    answer
}

#[cfg(test)]
mod tests;
