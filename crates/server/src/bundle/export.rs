//! Writing a bundle: the manifest made from what the cache holds for a
//! list of requests (and the fleet's malicious-package index, when asked),
//! then the tar written on a blocking thread into a
//! channel that the answer's body reads, so a bundle of any size streams
//! out with a few chunks in memory.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::sync::Arc;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use pkgproxy_cache::{BodyReader, Entry, UpstreamBody};
use pkgproxy_control::ExportRequest;
use pkgproxy_sides::route;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::{Carried, Item, Manifest, FORMAT, MALICIOUS, MANIFEST, MANIFEST_SUM};
use crate::proxy::readiness;
use crate::state::State;

/// A bundle about to be written: its manifest, the stored entry each blob
/// is read from, and the malicious-package index it carries.
pub struct Planned {
    manifest: Manifest,
    entries: HashMap<String, Arc<Entry>>,
    malicious: Option<Bytes>,
}

impl Planned {
    /// How many items it holds.
    pub fn items(&self) -> usize {
        self.manifest.items.len()
    }
}

/// The bundle of what `asked` needs, in its order, the entries that prove
/// each item first. `Err`: each request not held, and why (nothing is
/// written then: a bundle that cannot serve the build is no use). Blocking:
/// it reads the cache's index.
pub fn plan(state: &State, asked: &ExportRequest) -> Result<Planned, Vec<String>> {
    let mut planned =
        Planned { manifest: manifest(state.clock.as_ref(), Vec::new()), entries: HashMap::new(), malicious: None };
    let policy = state.gate.policy().filter(|_| asked.policy || asked.all);
    if let Some(policy) = policy {
        let index = Bytes::from(policy.malicious.index_text());
        let sha256 = hex::encode(Sha256::digest(&index));
        planned.manifest.malicious = Some(Carried { sha256, size: index.len() as u64 });
        planned.malicious = Some(index);
    }
    // Each request once, each proof once: two requests for one key (a
    // layer two repositories share) are two items.
    let mut seen = HashSet::new();
    let mut not_held = Vec::new();
    let (urls, records) = match asked.all {
        true => everything(state),
        false => (asked.urls.clone(), asked.records.clone()),
    };
    for key in records.iter().filter(|key| seen.insert(key.to_string())) {
        if !state
            .sides
            .playing(|roles| roles.recording)
            .any(|(_, recording)| key.starts_with(recording.record_prefix()))
        {
            not_held.push(format!("{key} is not a recorded answer of any side"));
            continue;
        }
        match state.cache.lookup(key) {
            Some(entry) => {
                let item = Item { record: true, ..item(None, key.clone(), &entry) };
                planned.entries.entry(item.sha256.clone()).or_insert(entry);
                planned.manifest.items.push(item);
            }
            None => not_held.push(format!("the record {key} is not held")),
        }
    }
    for url in &urls {
        match readiness::carried(state, url) {
            Ok(carried) => {
                let new =
                    |carried: &readiness::Carried| seen.insert(carried.url.clone().unwrap_or(carried.key.clone()));
                for carried in carried.into_iter().filter(new) {
                    let item = item(carried.url, carried.key, &carried.entry);
                    planned.entries.entry(item.sha256.clone()).or_insert(carried.entry);
                    planned.manifest.items.push(item);
                }
            }
            Err(why) => not_held.push(format!("{}: {why}", url.trim())),
        }
    }
    match not_held.is_empty() {
        true => Ok(planned),
        false => Err(not_held),
    }
}

/// Every request that reads something the cache holds and would be
/// served offline, side by side, what proves others first (each side
/// ranks its files); and the recorded answers replayed offline, with what
/// they name (a snap's download and assertions).
fn everything(state: &State) -> (Vec<String>, Vec<String>) {
    let records = all_records(&state.cache, &state.sides);
    let mut urls = every_request(state);
    for (side, recording) in state.sides.playing(|roles| roles.recording) {
        let mount = route::prefix_of(side.id()).unwrap_or_default();
        let named = recording.named_by_records(&records).into_iter().map(|path| format!("{mount}{path}"));
        urls.extend(named.filter(|url| readiness::check(state, url).ready));
    }
    (urls, records)
}

/// Every request a side names for what the cache holds, that would be
/// served offline, in each side's order.
fn every_request(state: &State) -> Vec<String> {
    let mut found = Vec::new();
    let visited = state.cache.visit("", |key, _, _| {
        let owner = state.sides.iter().enumerate().find_map(|(order, side)| Some((order, side.client_url(key)?)));
        if let Some((order, (rank, url))) = owner {
            found.push((order, rank, url));
        }
    });
    if let Err(error) = visited {
        tracing::warn!(%error, "the cache's index could not be read whole for a bundle");
    }
    found.sort();
    found.dedup();
    let urls = found.into_iter().map(|(_, _, url)| url);
    urls.filter(|url| readiness::check(state, url).ready).collect()
}

/// The keys of every answer a side recorded for offline replay.
fn all_records(cache: &pkgproxy_cache::Cache, sides: &pkgproxy_sides::Sides) -> Vec<String> {
    let mut keys = Vec::new();
    for prefix in sides.playing(|roles| roles.recording).map(|(_, recording)| recording.record_prefix()) {
        if let Err(error) = cache.visit(prefix, |key, _, _| keys.push(key.to_owned())) {
            tracing::warn!(%error, "the cache's records could not be listed for a bundle");
        }
    }
    keys
}

fn manifest(clock: &dyn pkgproxy_cache::Clock, items: Vec<Item>) -> Manifest {
    let created = pkgproxy_cache::unix_secs(clock.now());
    Manifest { format: FORMAT, pkgproxy: env!("CARGO_PKG_VERSION").to_owned(), created, items, malicious: None }
}

fn item(url: Option<String>, key: String, entry: &Entry) -> Item {
    Item {
        url,
        key,
        sha256: entry.sha256.clone(),
        size: entry.size,
        headers: entry.headers.clone(),
        etag: entry.validators.etag.clone(),
        last_modified: entry.validators.last_modified.clone(),
        fetched_at: entry.fetched_at,
        record: false,
    }
}

/// The most bytes a chunk of the stream holds.
const CHUNK: usize = 256 * 1024;

/// The tar of `planned`, written on a blocking thread as the body is read.
/// An entry that can no longer be read (evicted meanwhile) breaks the
/// stream off: the client sees a body that ends in an error, never a
/// bundle that looks whole.
pub fn stream(state: Arc<State>, planned: Planned) -> UpstreamBody {
    let (tx, rx) = mpsc::channel::<Result<Bytes, io::Error>>(4);
    tokio::task::spawn_blocking(move || {
        let mut out = Channel { tx: tx.clone(), buffer: Vec::with_capacity(CHUNK) };
        if let Err(error) = write(&state.cache, &planned, &mut out) {
            tracing::warn!(%error, "a bundle's export broke off");
            let _ = tx.blocking_send(Err(error));
        }
    });
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((chunk.map(Frame::data).map_err(|e| Box::new(e) as pkgproxy_cache::fetch::BoxError), rx))
    });
    StreamBody::new(chunks).boxed()
}

fn write(cache: &pkgproxy_cache::Cache, planned: &Planned, out: &mut Channel) -> io::Result<()> {
    let manifest = serde_json::to_vec_pretty(&planned.manifest).map_err(io::Error::other)?;
    let mut tar = tar::Builder::new(out);
    let created = planned.manifest.created;
    append(&mut tar, MANIFEST, created, manifest.len() as u64, manifest.as_slice())?;
    let sum = hex::encode(Sha256::digest(&manifest));
    append(&mut tar, MANIFEST_SUM, created, sum.len() as u64, sum.as_bytes())?;
    if let Some(index) = &planned.malicious {
        append(&mut tar, MALICIOUS, created, index.len() as u64, index.as_ref())?;
    }
    let mut written = HashSet::new();
    for item in &planned.manifest.items {
        if !written.insert(item.sha256.as_str()) {
            continue;
        }
        let entry = &planned.entries[&item.sha256];
        let file = cache.open_body(entry).map_err(|error| {
            io::Error::new(error.kind(), format!("{} can no longer be read: {error}", item.label()))
        })?;
        let body = Exact { inner: BodyReader::new(&file).take(item.size), left: item.size };
        append(&mut tar, &item.blob_name(), created, item.size, body)?;
    }
    tar.into_inner()?.flush()
}

fn append<W: Write>(tar: &mut tar::Builder<W>, name: &str, mtime: u64, size: u64, body: impl Read) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(mtime);
    tar.append_data(&mut header, name, body)
}

/// A body of exactly `left` bytes: one that ends sooner is an error (tar
/// would pad it silently into a bundle that lies).
struct Exact<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.left > 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a stored body is shorter than its entry says"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Bytes written in chunks into the channel the answer's body reads.
struct Channel {
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
    buffer: Vec<u8>,
}

impl Channel {
    fn send(&mut self) -> io::Result<()> {
        let chunk = Bytes::from(std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client stopped reading the bundle"))
    }
}

impl Write for Channel {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.buffer.is_empty() {
            true => Ok(()),
            false => self.send(),
        }
    }
}
