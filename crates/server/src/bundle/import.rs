//! Taking a bundle in: a blocking thread reads the tar as it arrives,
//! checks the manifest against its sum and each blob against its name, and
//! stages each blob in a file of the cache's `tmp/` (removed at start-up
//! after a crash); the items are then taken in one by one, in the
//! manifest's order, through the request path (see
//! [`crate::proxy::supplied`]), each checked as a fetch is. The first item
//! refused stops the import; what was taken before it stays, and taking
//! the same bundle in again takes in nothing twice.

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::TryStreamExt;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_RANGE, ETAG, LAST_MODIFIED};
use http::{Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use pkgproxy_cache::{AnsweredBy, Expected, FetchedAt, Source, StartFetch, UpstreamBody, Validators};
use pkgproxy_control::Imported;
use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio_util::io::{ReaderStream, StreamReader, SyncIoBridge};

use super::{is_sha256, Item, Manifest, BLOBS, FORMAT, MANIFEST, MANIFEST_LIMIT, MANIFEST_SUM};
use crate::context::Supply;
use crate::proxy::supplied::{self, Handed, Taken};
use crate::state::State;
use pkgproxy_sides::SideId;

/// Why a bundle was not taken in (whole).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ImportError {
    /// Not a bundle, or a damaged one, before any item could be named.
    #[error("not a bundle pkgproxy can read: {0}")]
    Unreadable(String),
    /// An item was refused; those before it were taken in.
    #[error("item {number} of {of} ({label}) refused: {why}")]
    Refused {
        /// Its place in the manifest, from 1.
        number: usize,
        /// How many items the bundle has.
        of: usize,
        /// Its URL (or key).
        label: String,
        /// Why.
        why: String,
    },
}

/// What the reading thread hands on.
enum Staged {
    Manifest(Manifest),
    Blob(Arc<Blob>),
    /// The bundle cannot be read on: why, naming the item when it can.
    Broken(ImportError),
}

/// One blob, staged in a file.
struct Blob {
    sha256: String,
    file: NamedTempFile,
}

/// Takes in the bundle `body` streams.
pub async fn import(state: &Arc<State>, body: Incoming) -> Result<Imported, ImportError> {
    let reader = StreamReader::new(body.into_data_stream().map_err(io::Error::other));
    let bridge = SyncIoBridge::new(reader);
    let (tx, mut rx) = mpsc::channel(2);
    let tmp = state.cache.dir().join("tmp");
    tokio::task::spawn_blocking(move || read(bridge, &tmp, &tx));
    let manifest = match rx.recv().await {
        Some(Staged::Manifest(manifest)) => manifest,
        Some(Staged::Broken(error)) => return Err(error),
        _ => return Err(ImportError::Unreadable("it ends before its manifest".to_owned())),
    };
    take_all(state, &manifest, &mut rx).await
}

/// Takes in each item of `manifest` as its blob arrives on `rx`.
async fn take_all(
    state: &Arc<State>,
    manifest: &Manifest,
    rx: &mut mpsc::Receiver<Staged>,
) -> Result<Imported, ImportError> {
    let items = &manifest.items;
    let last_use: HashMap<&str, usize> = items.iter().enumerate().map(|(i, item)| (item.sha256.as_str(), i)).collect();
    let mut staged: HashMap<String, Arc<Blob>> = HashMap::new();
    let mut proofs: Vec<(&Item, Arc<Blob>)> = Vec::new();
    let mut imported = Imported { items: items.len(), ..Imported::default() };
    for (index, item) in items.iter().enumerate() {
        let refused = |why: String| ImportError::Refused {
            number: index + 1,
            of: items.len(),
            label: item.label().to_owned(),
            why,
        };
        let blob = match staged.get(&item.sha256) {
            Some(blob) => Arc::clone(blob),
            None => {
                let blob = next_blob(rx).await.map_err(|why| why.unwrap_or_else(&refused))?;
                if blob.sha256 != item.sha256 {
                    return Err(refused(format!("the bundle has {BLOBS}{} where its bytes belong", blob.sha256)));
                }
                staged.insert(item.sha256.clone(), Arc::clone(&blob));
                blob
            }
        };
        if item.record {
            match take_record(state, item, &blob).await.map_err(refused)? {
                Taken::Stored => {
                    imported.imported += 1;
                    imported.bytes += item.size;
                }
                Taken::Held => imported.held += 1,
            }
            staged.retain(|sha256, _| last_use[sha256.as_str()] > index);
            continue;
        }
        let Some(url) = &item.url else {
            proofs.push((item, blob));
            continue;
        };
        let before: Vec<bool> = proofs.iter().map(|(proof, _)| holds(state, proof)).collect();
        let source = || Box::new(StagedSource::new(item, Arc::clone(&blob))) as Box<dyn Source>;
        let handed = Handed { url, sha256: &item.sha256, fetched_at: item.fetched_at, source: &source };
        match supplied::take(state, &handed, &Proofs(&proofs)).await.map_err(refused)? {
            Taken::Stored => {
                imported.imported += 1;
                imported.bytes += item.size;
            }
            Taken::Held => imported.held += 1,
        }
        for ((proof, _), held_before) in proofs.iter().zip(before) {
            match !held_before && holds(state, proof) {
                true => {
                    imported.imported += 1;
                    imported.bytes += proof.size;
                }
                false => imported.held += 1,
            }
        }
        proofs.clear();
        staged.retain(|sha256, _| last_use[sha256.as_str()] > index);
    }
    imported.held += proofs.len();
    match rx.recv().await {
        None => Ok(imported),
        Some(Staged::Broken(error)) => Err(error),
        Some(Staged::Blob(blob)) => {
            Err(ImportError::Unreadable(format!("{BLOBS}{} is not in its manifest", blob.sha256)))
        }
        Some(Staged::Manifest(_)) => Err(ImportError::Unreadable("it has a second manifest".to_owned())),
    }
}

/// The next blob the reading thread staged. `Err(Ok(error))`: the bundle
/// broke; `Err(Err(why))`: it ended or went wrong where the item waiting
/// for its bytes is to blame.
async fn next_blob(rx: &mut mpsc::Receiver<Staged>) -> Result<Arc<Blob>, Result<ImportError, String>> {
    match rx.recv().await {
        Some(Staged::Blob(blob)) => Ok(blob),
        Some(Staged::Broken(error)) => Err(Ok(error)),
        Some(Staged::Manifest(_)) => Err(Ok(ImportError::Unreadable("it has a second manifest".to_owned()))),
        None => Err(Err("the bundle ends before its bytes".to_owned())),
    }
}

/// The largest record of an answer taken in.
const RECORD_LIMIT: u64 = 4 * 1024 * 1024;

/// Takes in `item`, a side's record of an answer, once the side that keeps
/// such records (the key's first part) has read it as one.
async fn take_record(state: &Arc<State>, item: &Item, blob: &Blob) -> Result<Taken, String> {
    if holds(state, item) {
        return Ok(Taken::Held);
    }
    if item.size > RECORD_LIMIT {
        return Err(format!("a record of more than {RECORD_LIMIT} bytes"));
    }
    let side = item.key.split('/').next().and_then(SideId::from_name).ok_or("no side keeps such records")?;
    let (state, key, path) = (Arc::clone(state), item.key.clone(), blob.file.path().to_path_buf());
    let taken = tokio::task::spawn_blocking(move || {
        let body = std::fs::read(&path).map_err(|error| format!("cannot read it back: {error}"))?;
        state.sides.get(side).take_record(&key, &body)
    });
    taken.await.map_err(|_| "taking it in stopped".to_owned())??;
    Ok(Taken::Stored)
}

/// Whether the cache holds `item`'s bytes under its key.
fn holds(state: &State, item: &Item) -> bool {
    state.cache.lookup(&item.key).is_some_and(|entry| entry.sha256 == item.sha256)
}

/// The reading thread: the manifest, then each blob staged, handed on in
/// order; it stops when the importer stops listening.
fn read(reader: impl Read, tmp: &Path, tx: &mpsc::Sender<Staged>) {
    if let Err(error) = read_staging(&mut tar::Archive::new(reader), tmp, tx) {
        let _ = tx.blocking_send(Staged::Broken(error));
    }
}

fn read_staging<R: Read>(
    archive: &mut tar::Archive<R>,
    tmp: &Path,
    tx: &mpsc::Sender<Staged>,
) -> Result<(), ImportError> {
    let unreadable = |what: &str, error: &dyn std::fmt::Display| ImportError::Unreadable(format!("{what}: {error}"));
    let mut entries = archive.entries().map_err(|e| unreadable("its tar", &e))?;
    let manifest = named(&mut entries, MANIFEST, MANIFEST_LIMIT)?;
    let sum = named(&mut entries, MANIFEST_SUM, 128)?;
    if hex::encode(Sha256::digest(&manifest)) != String::from_utf8_lossy(&sum).trim() {
        return Err(ImportError::Unreadable(format!("{MANIFEST} does not match its SHA-256: the bundle is damaged")));
    }
    let manifest: Manifest = serde_json::from_slice(&manifest).map_err(|e| unreadable(MANIFEST, &e))?;
    checked(&manifest)?;
    let (firsts, of) = (first_items(&manifest), manifest.items.len());
    if tx.blocking_send(Staged::Manifest(manifest)).is_err() {
        return Ok(());
    }
    for entry in entries {
        let mut entry = entry.map_err(|e| unreadable("its tar", &e))?;
        let name = entry.path().map_err(|e| unreadable("its tar", &e))?.to_string_lossy().into_owned();
        let sha256 = name.strip_prefix(BLOBS).filter(|sha| is_sha256(sha)).map(str::to_owned);
        let Some(sha256) = sha256 else {
            return Err(ImportError::Unreadable(format!("{name} is not part of a bundle")));
        };
        let blob = stage(&mut entry, tmp, &sha256).map_err(|why| match firsts.get(&sha256) {
            Some((number, label)) => ImportError::Refused { number: *number, of, label: label.clone(), why },
            None => ImportError::Unreadable(format!("{name}: {why}")),
        })?;
        if tx.blocking_send(Staged::Blob(Arc::new(blob))).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// The bytes of the next entry, which must be `name`, up to `limit`.
fn named<R: Read>(entries: &mut tar::Entries<'_, R>, name: &str, limit: u64) -> Result<Vec<u8>, ImportError> {
    let unreadable = |why: String| ImportError::Unreadable(why);
    let mut entry = entries
        .next()
        .ok_or_else(|| unreadable(format!("it ends before {name}")))?
        .map_err(|e| unreadable(format!("its tar: {e}")))?;
    let path = entry.path().map_err(|e| unreadable(format!("its tar: {e}")))?.to_string_lossy().into_owned();
    if path != name {
        return Err(unreadable(format!("it starts with {path}, not {name}")));
    }
    if entry.size() > limit {
        return Err(unreadable(format!("{name} is larger than {limit} bytes")));
    }
    let mut bytes = Vec::with_capacity(entry.size() as usize);
    entry.read_to_end(&mut bytes).map_err(|e| unreadable(format!("{name}: {e}")))?;
    Ok(bytes)
}

/// A manifest this pkgproxy can take in: its format, and hashes and URLs
/// that can be used as names.
fn checked(manifest: &Manifest) -> Result<(), ImportError> {
    if manifest.format != FORMAT {
        let why = format!("its format is {}; this pkgproxy reads format {FORMAT}", manifest.format);
        return Err(ImportError::Unreadable(why));
    }
    for (index, item) in manifest.items.iter().enumerate() {
        let bad = |why: &str| ImportError::Refused {
            number: index + 1,
            of: manifest.items.len(),
            label: item.label().to_owned(),
            why: why.to_owned(),
        };
        if !is_sha256(&item.sha256) {
            return Err(bad("its sha256 is not a SHA-256 in lower-case hex"));
        }
        if item.key.is_empty() || item.url.as_deref().is_some_and(str::is_empty) {
            return Err(bad("it has no name"));
        }
    }
    Ok(())
}

/// For each hash, the first item with it (the one to blame for its bytes):
/// its number and its label.
fn first_items(manifest: &Manifest) -> HashMap<String, (usize, String)> {
    let mut firsts = HashMap::new();
    for (index, item) in manifest.items.iter().enumerate().rev() {
        firsts.insert(item.sha256.clone(), (index + 1, item.label().to_owned()));
    }
    firsts
}

/// Copies `entry` into a file of `tmp`, checking it has the SHA-256 it is
/// named by.
fn stage(entry: &mut impl Read, tmp: &Path, sha256: &str) -> Result<Blob, String> {
    let mut file = tempfile::Builder::new()
        .prefix("import-")
        .suffix(".part")
        .tempfile_in(tmp)
        .map_err(|e| format!("cannot stage it in {}: {e}", tmp.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 256 * 1024];
    loop {
        let n = entry.read(&mut buffer).map_err(|e| format!("the bundle broke off in its bytes: {e}"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        io::Write::write_all(&mut file, &buffer[..n]).map_err(|e| format!("cannot stage it: {e}"))?;
    }
    if hex::encode(hasher.finalize()) != sha256 {
        return Err("its bytes do not match their SHA-256: the bundle is damaged or was changed".to_owned());
    }
    Ok(Blob { sha256: sha256.to_owned(), file })
}

/// The proofs of the next item, by their keys.
struct Proofs<'a>(&'a [(&'a Item, Arc<Blob>)]);

impl Supply for Proofs<'_> {
    fn source_for(&self, key: &str) -> Option<Box<dyn Source>> {
        let (item, blob) = self.0.iter().find(|(item, _)| item.key == key)?;
        Some(Box::new(StagedSource::new(item, Arc::clone(blob))))
    }
}

/// An item's staged bytes, answered as the upstream would answer them,
/// held to the manifest's hash and size.
struct StagedSource {
    blob: Arc<Blob>,
    size: u64,
    headers: Vec<(String, String)>,
    validators: Validators,
    fetched_at: u64,
}

impl StagedSource {
    fn new(item: &Item, blob: Arc<Blob>) -> Self {
        StagedSource {
            blob,
            size: item.size,
            headers: item.headers.clone(),
            validators: Validators { etag: item.etag.clone(), last_modified: item.last_modified.clone() },
            fetched_at: item.fetched_at,
        }
    }

    /// The answer with the bytes from `from` on.
    fn answer(&self, from: u64) -> StartFetch {
        let (path, size, head) = (self.blob.file.path().to_path_buf(), self.size, self.head(from));
        Box::pin(async move {
            let body =
                body_from(&path, from, size).await.map_err(|e| pkgproxy_cache::FetchError::Upstream(Box::new(e)))?;
            let mut response = head.body(body).map_err(|e| pkgproxy_cache::FetchError::Upstream(Box::new(e)))?;
            response.extensions_mut().insert(AnsweredBy(Arc::from("bundle")));
            Ok(response)
        })
    }

    fn head(&self, from: u64) -> http::response::Builder {
        let status = if from == 0 { StatusCode::OK } else { StatusCode::PARTIAL_CONTENT };
        let mut head = Response::builder()
            .status(status)
            .header(CONTENT_LENGTH, self.size - from)
            .extension(FetchedAt(self.fetched_at))
            .extension(Expected { size: Some(self.size), sha256: Some(self.blob.sha256.clone()), sha512: None });
        if from > 0 {
            head = head.header(CONTENT_RANGE, format!("bytes {from}-{}/{}", self.size - 1, self.size));
        }
        let validators = [(ETAG, &self.validators.etag), (LAST_MODIFIED, &self.validators.last_modified)];
        for (name, value) in validators {
            if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                head = head.header(name, value);
            }
        }
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::from_str(value)) {
                head = head.header(name, value);
            }
        }
        head
    }
}

impl Source for StagedSource {
    fn start(&self) -> StartFetch {
        self.answer(0)
    }

    fn resume(&self, from: u64, _: &Validators) -> Option<StartFetch> {
        (from < self.size).then(|| self.answer(from))
    }
}

/// The staged file at `path` from byte `from` to `size`, as a body.
async fn body_from(path: &PathBuf, from: u64, size: u64) -> io::Result<UpstreamBody> {
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(io::SeekFrom::Start(from)).await?;
    let frames = ReaderStream::with_capacity(file.take(size - from), 64 * 1024)
        .map_ok(Frame::data)
        .map_err(|e| Box::new(e) as pkgproxy_cache::fetch::BoxError);
    Ok(StreamBody::new(frames).boxed())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar of `entries` (name, bytes), as written.
    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (name, bytes) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            tar.append_data(&mut header, name, *bytes).unwrap();
        }
        tar.into_inner().unwrap()
    }

    /// A manifest of one item with `body`, and its sum.
    fn manifest_for(body: &[u8], format: u32) -> (Vec<u8>, Vec<u8>) {
        let item = Item {
            url: Some("/go/example.com/m/@v/v1.0.0.info".into()),
            key: "go/example.com/m/@v/v1.0.0.info".into(),
            sha256: hex::encode(Sha256::digest(body)),
            size: body.len() as u64,
            headers: Vec::new(),
            etag: None,
            last_modified: None,
            fetched_at: 0,
            record: false,
        };
        let manifest = Manifest { format, pkgproxy: "test".into(), created: 0, items: vec![item] };
        let json = serde_json::to_vec(&manifest).unwrap();
        let sum = hex::encode(Sha256::digest(&json)).into_bytes();
        (json, sum)
    }

    /// What the reading thread hands on for `bundle`: the manifest's items
    /// and the blobs' names, or why it stopped.
    fn read_all(bundle: Vec<u8>) -> Result<(usize, Vec<String>), String> {
        let (tx, mut rx) = mpsc::channel(16);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().to_path_buf();
        std::thread::spawn(move || read(std::io::Cursor::new(bundle), &path, &tx)).join().unwrap();
        let (mut items, mut blobs) = (0, Vec::new());
        while let Some(staged) = rx.blocking_recv() {
            match staged {
                Staged::Manifest(manifest) => items = manifest.items.len(),
                Staged::Blob(blob) => blobs.push(blob.sha256.clone()),
                Staged::Broken(error) => return Err(error.to_string()),
            }
        }
        Ok((items, blobs))
    }

    #[test]
    fn a_whole_bundle_is_read_and_each_blob_checked_against_its_name() {
        let body = b"{\"Version\":\"v1.0.0\"}";
        let (manifest, sum) = manifest_for(body, FORMAT);
        let sha = hex::encode(Sha256::digest(body));
        let blob = format!("{BLOBS}{sha}");
        let bundle = tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, &sum), (&blob, body)]);
        assert_eq!(read_all(bundle), Ok((1, vec![sha.clone()])));

        let changed = tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, &sum), (&blob, b"{\"Version\":\"v6.6.6\"}")]);
        let refused = read_all(changed).unwrap_err();
        assert!(refused.starts_with("item 1 of 1 (/go/example.com/m/@v/v1.0.0.info) refused"), "{refused}");
    }

    #[test]
    fn what_is_not_a_bundle_is_refused_saying_why_and_nothing_panics() {
        let body = b"x";
        let (manifest, sum) = manifest_for(body, FORMAT);
        let refused = |bundle: Vec<u8>| read_all(bundle).unwrap_err();

        assert!(refused(b"not a tar at all, just some bytes".repeat(40)).starts_with("not a bundle"));
        assert!(refused(Vec::new()).contains("it ends before pkgproxy-bundle.json"));
        let first = refused(tar_of(&[(MANIFEST_SUM, &sum), (MANIFEST, &manifest)]));
        assert!(first.contains("it starts with pkgproxy-bundle.json.sha256"), "{first}");
        let (newer, newer_sum) = manifest_for(body, FORMAT + 1);
        let format = refused(tar_of(&[(MANIFEST, &newer), (MANIFEST_SUM, &newer_sum)]));
        assert!(format.contains(&format!("its format is {}", FORMAT + 1)), "{format}");
        let stray = refused(tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, &sum), ("etc/passwd", b"x")]));
        assert!(stray.contains("etc/passwd is not part of a bundle"), "{stray}");
        let unnamed = refused(tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, &sum), ("blobs/short", b"x")]));
        assert!(unnamed.contains("blobs/short is not part of a bundle"), "{unnamed}");

        // Cut in the middle of a blob.
        let big = vec![7u8; 64 * 1024];
        let (manifest, sum) = manifest_for(&big, FORMAT);
        let blob = format!("{BLOBS}{}", hex::encode(Sha256::digest(&big)));
        let mut cut = tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, &sum), (&blob, &big)]);
        cut.truncate(cut.len() - 40 * 1024);
        assert!(read_all(cut).is_err(), "a bundle cut short is refused");
    }
}
