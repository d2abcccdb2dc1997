//! Taking a bundle in: a blocking thread reads the tar as it arrives. It
//! stages the manifest in a file, checks it against its sum and its
//! signature against the keys this pkgproxy trusts, reads it through once
//! (item by item: see [`super::manifest`]) to learn which blob each item
//! needs, then stages each blob in a file of the cache's `tmp/` (removed
//! at start-up after a crash), checked against its name. The items are
//! taken in one by one, in the manifest's order, read from the staged
//! manifest again, through the request path (see
//! [`crate::proxy::supplied`]), each checked as a fetch is. An item
//! refused is reported and the import goes on with the next; one the
//! cache holds is not taken twice. Only a bundle that cannot be read on (a
//! tar cut short, blobs out of order) stops it.

use std::collections::HashMap;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::TryStreamExt;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_RANGE, ETAG, LAST_MODIFIED};
use http::{Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use pkgproxy_cache::{Expected, Source, Sourced, StartFetch, UpstreamBody, Validators};
use pkgproxy_control::Imported;
use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio_util::io::{ReaderStream, StreamReader, SyncIoBridge};

use super::manifest::{self, ManifestError};
use super::{
    is_sha256, Carried, Item, BLOBS, MALICIOUS, MALICIOUS_LIMIT, MANIFEST, MANIFEST_LIMIT, MANIFEST_SUM, SIGNATURE,
};
use crate::context::Supply;
use crate::proxy::supplied::{self, Handed, Taken};
use crate::signing::{self, PublicKey, SignatureError, SIGNATURE_LIMIT};
use crate::state::State;
use pkgproxy_sides::SideId;

/// Why a bundle was not taken in.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ImportError {
    /// Not a bundle, or a damaged one, that cannot be read on.
    #[error("not a bundle pkgproxy can read: {0}")]
    Unreadable(String),
    /// Not signed by a key this pkgproxy trusts (nothing was taken).
    #[error("bundle refused: {0}")]
    Untrusted(SignatureError),
    /// Its malicious-package records could not be kept, or not put in
    /// force (the policy in force stays).
    #[error("its malicious-package records were not put in force: {0}")]
    Policy(String),
}

/// How many refused items an import names (it counts them all).
const REFUSALS_NAMED: usize = 100;

/// What the reading thread hands on.
enum Staged {
    Manifest(Arc<Checked>),
    Blob(Arc<Blob>),
    /// A blob whose bytes are not those its name says.
    Damaged {
        sha256: String,
        why: String,
    },
    /// The bundle cannot be read on.
    Broken(ImportError),
}

/// The manifest, staged and checked: its sum, its signature, every item
/// readable within bounds.
struct Checked {
    file: NamedTempFile,
    items: usize,
    /// For each blob, the index of the last item that needs it: a staged
    /// blob is let go after it.
    last_use: HashMap<[u8; 32], usize>,
    signed_by: Option<PublicKey>,
    /// The malicious-package records the manifest names.
    records: Option<Carried>,
    /// Those records, staged and checked against the manifest.
    malicious: Option<NamedTempFile>,
}

/// One blob, staged in a file.
struct Blob {
    sha256: String,
    file: NamedTempFile,
}

/// Takes in the bundle `body` streams: one signed by a key of `[bundles]
/// trusted_keys`, or any when `trust_unsigned`.
pub async fn import(state: &Arc<State>, body: Incoming, trust_unsigned: bool) -> Result<Imported, ImportError> {
    let reader = StreamReader::new(body.into_data_stream().map_err(io::Error::other));
    let bridge = SyncIoBridge::new(reader);
    let (tx, mut rx) = mpsc::channel(2);
    let tmp = state.cache.dir().join("tmp");
    let trust = Trust { keys: state.trusted_keys.load_full(), unsigned: trust_unsigned };
    let reading = tokio::task::spawn_blocking(move || read(bridge, &tmp, &trust, &tx));
    let taken = async {
        let checked = match rx.recv().await {
            Some(Staged::Manifest(checked)) => checked,
            Some(Staged::Broken(error)) => return Err(error),
            _ => return Err(ImportError::Unreadable("it ends before its manifest".to_owned())),
        };
        take_all(state, &checked, &mut rx).await
    };
    let taken = taken.await;
    // Whatever became of it, the client's upload is read to its end before
    // it is answered: an answer sent under an upload still going reaches
    // the client as a broken connection, not as the reason.
    drop(rx);
    let _ = reading.await;
    taken
}

/// An import's work in progress.
struct Taking {
    imported: Imported,
    /// Blobs staged and still needed, by hash.
    staged: HashMap<String, Arc<Blob>>,
    /// Blobs whose bytes were not theirs, and why.
    damaged: HashMap<String, String>,
    /// The proofs read for the next item with a URL.
    proofs: Vec<(Item, Arc<Blob>)>,
}

impl Taking {
    fn refuse(&mut self, index: usize, item: &Item, why: &str) {
        self.imported.refused += 1;
        if self.imported.refusals.len() < REFUSALS_NAMED {
            let of = self.imported.items;
            self.imported.refusals.push(format!("item {} of {of} ({}): {why}", index + 1, item.label()));
        }
    }

    fn stored(&mut self, size: u64) {
        self.imported.imported += 1;
        self.imported.bytes += size;
    }

    /// The staged blob `item` needs, waiting for the reading thread when
    /// it is the first to need it. `Ok(Err(why))`: the item's bytes are not
    /// to be had; `Err`: the bundle cannot be read on.
    async fn blob_for(
        &mut self,
        item: &Item,
        rx: &mut mpsc::Receiver<Staged>,
    ) -> Result<Result<Arc<Blob>, String>, ImportError> {
        if let Some(blob) = self.staged.get(&item.sha256) {
            return Ok(Ok(Arc::clone(blob)));
        }
        if let Some(why) = self.damaged.get(&item.sha256) {
            return Ok(Err(why.clone()));
        }
        let (sha256, arrived) = match rx.recv().await {
            Some(Staged::Blob(blob)) => (blob.sha256.clone(), Ok(blob)),
            Some(Staged::Damaged { sha256, why }) => (sha256, Err(why)),
            Some(Staged::Broken(error)) => return Err(error),
            Some(Staged::Manifest(_)) => return Err(ImportError::Unreadable("it has a second manifest".to_owned())),
            None => return Ok(Err("the bundle ends before its bytes".to_owned())),
        };
        if sha256 != item.sha256 {
            let why = format!("it has {BLOBS}{sha256} where the bytes of {} belong", item.label());
            return Err(ImportError::Unreadable(why));
        }
        match &arrived {
            Ok(blob) => {
                self.staged.insert(sha256, Arc::clone(blob));
            }
            Err(why) => {
                self.damaged.insert(sha256, why.clone());
            }
        }
        Ok(arrived)
    }

    /// Lets go of the staged blobs no item after the `index`th needs.
    fn release(&mut self, checked: &Checked, index: usize) {
        self.staged.retain(|sha256, _| checked.last_use.get(&digest(sha256)).is_some_and(|last| *last > index));
    }
}

/// Takes in each item of the manifest `checked` as its blob arrives on
/// `rx`.
async fn take_all(
    state: &Arc<State>,
    checked: &Checked,
    rx: &mut mpsc::Receiver<Staged>,
) -> Result<Imported, ImportError> {
    let malicious_records = match &checked.malicious {
        Some(staged) => Some(super::records::take(state, staged.path()).await.map_err(ImportError::Policy)?),
        None => None,
    };
    let mut items = read_again(checked)?;
    let signed_by = checked.signed_by.as_ref().map(ToString::to_string);
    let imported = Imported { items: checked.items, signed_by, malicious_records, ..Imported::default() };
    let mut taking = Taking { imported, staged: HashMap::new(), damaged: HashMap::new(), proofs: Vec::new() };
    let mut seen = 0;
    while let Some((index, item)) = items.recv().await {
        seen += 1;
        let blob = match taking.blob_for(&item, rx).await? {
            Ok(blob) => blob,
            Err(why) => {
                taking.refuse(index, &item, &why);
                taking.release(checked, index);
                continue;
            }
        };
        take(state, &mut taking, index, item, blob).await;
        taking.release(checked, index);
    }
    if seen != checked.items {
        return Err(ImportError::Unreadable(format!("its manifest could not be read again after item {seen}")));
    }
    taking.imported.held += taking.proofs.len();
    match rx.recv().await {
        None => Ok(taking.imported),
        Some(Staged::Broken(error)) => Err(error),
        Some(Staged::Blob(_) | Staged::Damaged { .. }) => {
            Err(ImportError::Unreadable("it has bytes its manifest does not name".to_owned()))
        }
        Some(Staged::Manifest(_)) => Err(ImportError::Unreadable("it has a second manifest".to_owned())),
    }
}

/// The items of the staged manifest, read again on a blocking thread and
/// handed on as they are taken.
fn read_again(checked: &Checked) -> Result<mpsc::Receiver<(usize, Item)>, ImportError> {
    let file = checked.file.reopen().map_err(|e| ImportError::Unreadable(format!("its staged manifest: {e}")))?;
    let (tx, rx) = mpsc::channel(64);
    tokio::task::spawn_blocking(move || {
        // The importer stopped listening: nothing more to hand on.
        let handed = |index, item| tx.blocking_send((index, item)).map_err(|_| ManifestError::Bound(String::new()));
        let _ = manifest::read_items(BufReader::new(file), handed);
    });
    Ok(rx)
}

/// Takes in the `index`th item, whose bytes are `blob`: a record, a proof
/// kept for the next item with a URL, or an item fetched from its bytes.
async fn take(state: &Arc<State>, taking: &mut Taking, index: usize, item: Item, blob: Arc<Blob>) {
    if item.record {
        match take_record(state, &item, &blob).await {
            Ok(Taken::Stored) => taking.stored(item.size),
            Ok(Taken::Held) => taking.imported.held += 1,
            Err(why) => taking.refuse(index, &item, &why),
        }
        return;
    }
    let Some(url) = &item.url else {
        taking.proofs.push((item, blob));
        return;
    };
    let proofs = std::mem::take(&mut taking.proofs);
    let before: Vec<bool> = proofs.iter().map(|(proof, _)| holds(&state.cache, proof)).collect();
    let source = || Box::new(StagedSource::new(&item, Arc::clone(&blob))) as Box<dyn Source>;
    let handed = Handed { url, sha256: &item.sha256, fetched_at: item.fetched_at, source: &source };
    match supplied::take(state, &handed, &Proofs(&proofs)).await {
        Ok(Taken::Stored) => taking.stored(item.size),
        Ok(Taken::Held) => taking.imported.held += 1,
        Err(why) => taking.refuse(index, &item, &why),
    }
    for ((proof, _), held_before) in proofs.iter().zip(before) {
        match !held_before && holds(&state.cache, proof) {
            true => taking.stored(proof.size),
            false => taking.imported.held += 1,
        }
    }
}

/// A blob's hash as bytes (hashes were checked to be hex when read).
fn digest(sha256: &str) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    let _ = hex::decode_to_slice(sha256, &mut bytes);
    bytes
}

/// The largest record of an answer taken in.
const RECORD_LIMIT: u64 = 4 * 1024 * 1024;

/// Takes in `item`, a side's record of an answer, once the side that keeps
/// such records (the key's first part) has read it as one.
async fn take_record(state: &Arc<State>, item: &Item, blob: &Blob) -> Result<Taken, String> {
    if holds(&state.cache, item) {
        return Ok(Taken::Held);
    }
    if item.size > RECORD_LIMIT {
        return Err(format!("a record of more than {RECORD_LIMIT} bytes"));
    }
    let side = item.key.split('/').next().and_then(SideId::from_name).ok_or("no side keeps such records")?;
    let (state, key, path) = (Arc::clone(state), item.key.clone(), blob.file.path().to_path_buf());
    let taken = tokio::task::spawn_blocking(move || {
        let body = std::fs::read(&path).map_err(|error| format!("cannot read it back: {error}"))?;
        let recording = state.sides.get(side).roles().recording.ok_or("no side keeps such records")?;
        recording.take_record(&key, &body)
    });
    taken.await.map_err(|_| "taking it in stopped".to_owned())??;
    Ok(Taken::Stored)
}

/// Whether the cache holds `item`'s bytes under its key.
fn holds(cache: &pkgproxy_cache::Cache, item: &Item) -> bool {
    cache.lookup(&item.key).is_some_and(|entry| entry.sha256 == item.sha256)
}

/// Which bundles an import takes.
struct Trust {
    keys: Arc<Vec<PublicKey>>,
    unsigned: bool,
}

/// The reading thread: the manifest checked, then each blob staged,
/// handed on in order; it stops when the importer stops listening.
fn read(mut reader: impl Read, tmp: &Path, trust: &Trust, tx: &mpsc::Sender<Staged>) {
    let read = read_staging(&mut tar::Archive::new(&mut reader), tmp, trust, tx);
    // The rest (a bundle refused, or taken whole, and its tar's padding) is
    // read to its end: the client is answered once it has sent it all.
    let _ = io::copy(&mut reader, &mut io::sink());
    if let Err(error) = read {
        let _ = tx.blocking_send(Staged::Broken(error));
    }
}

fn unreadable(what: &str, error: &dyn std::fmt::Display) -> ImportError {
    ImportError::Unreadable(format!("{what}: {error}"))
}

fn read_staging<R: Read>(
    archive: &mut tar::Archive<R>,
    tmp: &Path,
    trust: &Trust,
    tx: &mpsc::Sender<Staged>,
) -> Result<(), ImportError> {
    let mut entries = archive.entries().map_err(|e| unreadable("its tar", &e))?;
    let (file, sha256) = staged_manifest(&mut entries, tmp)?;
    let sum = named(&mut entries, MANIFEST_SUM, 128)?;
    if sha256 != String::from_utf8_lossy(&sum).trim() {
        return Err(ImportError::Unreadable(format!("{MANIFEST} does not match its SHA-256: the bundle is damaged")));
    }
    let mut next = entries.next().transpose().map_err(|e| unreadable("its tar", &e))?;
    let mut signature = None;
    if let Some(entry) = next.as_mut().filter(|entry| entry_name(entry).is_ok_and(|name| name == SIGNATURE)) {
        signature = Some(bounded(entry, SIGNATURE, SIGNATURE_LIMIT)?);
        next = entries.next().transpose().map_err(|e| unreadable("its tar", &e))?;
    }
    let signed_by = match signing::signer(signature.as_deref(), &sha256, &trust.keys) {
        Ok(key) => Some(key),
        Err(SignatureError::Unsigned | SignatureError::Untrusted(_)) if trust.unsigned => None,
        Err(error) => return Err(ImportError::Untrusted(error)),
    };
    let mut checked = checked(file, signed_by)?;
    if let Some(records) = checked.records.clone() {
        let named_so = |entry: &tar::Entry<'_, R>| entry_name(entry).is_ok_and(|name| name == MALICIOUS);
        let Some(mut entry) = next.take().filter(named_so) else {
            return Err(ImportError::Unreadable(format!("its manifest names {MALICIOUS}, which does not follow it")));
        };
        checked.malicious = Some(staged_records(&mut entry, tmp, &records)?);
        next = entries.next().transpose().map_err(|e| unreadable("its tar", &e))?;
    }
    if tx.blocking_send(Staged::Manifest(Arc::new(checked))).is_err() {
        return Ok(());
    }
    let first = next.map(Ok);
    for entry in first.into_iter().chain(&mut entries) {
        let mut entry = entry.map_err(|e| unreadable("its tar", &e))?;
        let name = entry_name(&entry)?;
        let sha256 = name.strip_prefix(BLOBS).filter(|sha| is_sha256(sha)).map(str::to_owned);
        let Some(sha256) = sha256 else {
            return Err(ImportError::Unreadable(format!("{name} is not part of a bundle")));
        };
        let staged = match stage(&mut entry, tmp, &sha256)? {
            Ok(file) => Staged::Blob(Arc::new(Blob { sha256, file })),
            Err(why) => Staged::Damaged { sha256, why },
        };
        if tx.blocking_send(staged).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// The name of a tar entry.
fn entry_name<R: Read>(entry: &tar::Entry<'_, R>) -> Result<String, ImportError> {
    Ok(entry.path().map_err(|e| unreadable("its tar", &e))?.to_string_lossy().into_owned())
}

/// The manifest, the tar's first entry, copied into a file of `tmp` as it
/// is read (never held whole), and its SHA-256.
fn staged_manifest<R: Read>(
    entries: &mut tar::Entries<'_, R>,
    tmp: &Path,
) -> Result<(NamedTempFile, String), ImportError> {
    let mut entry = next_named(entries, MANIFEST)?;
    if entry.size() > MANIFEST_LIMIT {
        return Err(ImportError::Unreadable(format!("{MANIFEST} is larger than {MANIFEST_LIMIT} bytes")));
    }
    match copy_hashing(&mut entry, tmp) {
        Ok(staged) => Ok(staged),
        Err(Copy::Read(why) | Copy::Write(why)) => Err(ImportError::Unreadable(format!("{MANIFEST}: {why}"))),
    }
}

/// The manifest staged in `file`, read through: its items within bounds,
/// and where each blob is needed last.
fn checked(file: NamedTempFile, signed_by: Option<PublicKey>) -> Result<Checked, ImportError> {
    let input = file.reopen().map_err(|e| unreadable(MANIFEST, &e))?;
    let mut last_use = HashMap::new();
    let mut needs = |index, item: Item| {
        last_use.insert(digest(&item.sha256), index);
        Ok::<_, ManifestError>(())
    };
    let read = manifest::read_items(BufReader::new(input), &mut needs).map_err(|e| unreadable(MANIFEST, &e))?;
    Ok(Checked { file, items: read.items, last_use, signed_by, records: read.malicious, malicious: None })
}

/// The malicious-package index `entry` holds, staged in a file of `tmp`
/// and checked against what the manifest says of it (`records`).
fn staged_records(entry: &mut impl Read, tmp: &Path, records: &Carried) -> Result<NamedTempFile, ImportError> {
    if records.size > MALICIOUS_LIMIT {
        return Err(ImportError::Unreadable(format!("{MALICIOUS} is larger than {MALICIOUS_LIMIT} bytes")));
    }
    match stage(&mut entry.take(MALICIOUS_LIMIT + 1), tmp, &records.sha256)? {
        Ok(file) => Ok(file),
        Err(_) => Err(ImportError::Unreadable(format!(
            "{MALICIOUS} does not match its manifest: the bundle is damaged or was changed"
        ))),
    }
}

/// The next entry, which must be `name`.
fn next_named<'a, R: Read>(entries: &mut tar::Entries<'a, R>, name: &str) -> Result<tar::Entry<'a, R>, ImportError> {
    let entry = entries
        .next()
        .ok_or_else(|| ImportError::Unreadable(format!("it ends before {name}")))?
        .map_err(|e| unreadable("its tar", &e))?;
    let path = entry_name(&entry)?;
    if path != name {
        return Err(ImportError::Unreadable(format!("it starts with {path}, not {name}")));
    }
    Ok(entry)
}

/// The bytes of the next entry, which must be `name`, up to `limit`.
fn named<R: Read>(entries: &mut tar::Entries<'_, R>, name: &str, limit: u64) -> Result<Vec<u8>, ImportError> {
    bounded(&mut next_named(entries, name)?, name, limit)
}

/// The bytes of `entry` (named `name`), up to `limit`.
fn bounded<R: Read>(entry: &mut tar::Entry<'_, R>, name: &str, limit: u64) -> Result<Vec<u8>, ImportError> {
    if entry.size() > limit {
        return Err(ImportError::Unreadable(format!("{name} is larger than {limit} bytes")));
    }
    let mut bytes = Vec::with_capacity(entry.size() as usize);
    entry.read_to_end(&mut bytes).map_err(|e| unreadable(name, &e))?;
    Ok(bytes)
}

/// Why a copy into a staged file stopped.
enum Copy {
    /// The bundle broke off.
    Read(String),
    /// The file could not be written.
    Write(String),
}

/// Copies `entry` into a new file of `tmp`: the file, and the SHA-256 of
/// what was copied.
fn copy_hashing(entry: &mut impl Read, tmp: &Path) -> Result<(NamedTempFile, String), Copy> {
    let mut file = tempfile::Builder::new()
        .prefix("import-")
        .suffix(".part")
        .tempfile_in(tmp)
        .map_err(|e| Copy::Write(format!("cannot stage it in {}: {e}", tmp.display())))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 256 * 1024];
    loop {
        let n = entry.read(&mut buffer).map_err(|e| Copy::Read(format!("the bundle broke off: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        io::Write::write_all(&mut file, &buffer[..n]).map_err(|e| Copy::Write(format!("cannot stage it: {e}")))?;
    }
    Ok((file, hex::encode(hasher.finalize())))
}

/// Copies `entry` into a file of `tmp`: `Ok(Err(why))` when its bytes
/// do not have the SHA-256 it is named by; `Err` when the bundle cannot be
/// read on, or not staged.
fn stage(entry: &mut impl Read, tmp: &Path, sha256: &str) -> Result<Result<NamedTempFile, String>, ImportError> {
    let (file, copied) = match copy_hashing(entry, tmp) {
        Ok(staged) => staged,
        Err(Copy::Read(why) | Copy::Write(why)) => {
            return Err(ImportError::Unreadable(format!("{BLOBS}{sha256}: {why}")))
        }
    };
    match copied == sha256 {
        true => Ok(Ok(file)),
        false => Ok(Err("its bytes do not match their SHA-256: the bundle is damaged or was changed".to_owned())),
    }
}

/// The proofs of the next item, by their keys.
struct Proofs<'a>(&'a [(Item, Arc<Blob>)]);

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
        let (fetched_at, expected) = (self.fetched_at, self.expected());
        Box::pin(async move {
            let body =
                body_from(&path, from, size).await.map_err(|e| pkgproxy_cache::FetchError::Upstream(Box::new(e)))?;
            let response = head.body(body).map_err(|e| pkgproxy_cache::FetchError::Upstream(Box::new(e)))?;
            Ok(Sourced {
                response,
                answered_by: Some(Arc::from("bundle")),
                fetched_at: Some(fetched_at),
                expected: Some(expected),
            })
        })
    }

    /// What the body must be: the bundle's item says.
    fn expected(&self) -> Expected {
        Expected { size: Some(self.size), sha256: Some(self.blob.sha256.clone()), sha512: None }
    }

    fn head(&self, from: u64) -> http::response::Builder {
        let status = if from == 0 { StatusCode::OK } else { StatusCode::PARTIAL_CONTENT };
        let mut head = Response::builder().status(status).header(CONTENT_LENGTH, self.size - from);
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
    use super::super::{Manifest, FORMAT};
    use super::*;
    use crate::signing::SigningKey;

    use pkgproxy_testkit::tarball::tar_of;

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
        let manifest = Manifest { format, pkgproxy: "test".into(), created: 0, items: vec![item], malicious: None };
        let json = serde_json::to_vec(&manifest).unwrap();
        let sum = hex::encode(Sha256::digest(&json)).into_bytes();
        (json, sum)
    }

    /// What the reading thread hands on for `bundle`, taking what `trust`
    /// takes: the manifest's items, the blobs' names (`!` before a damaged
    /// one), or why it stopped.
    fn read_with(bundle: Vec<u8>, trust: Trust) -> Result<(usize, Vec<String>), String> {
        let (tx, mut rx) = mpsc::channel(16);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().to_path_buf();
        std::thread::spawn(move || read(std::io::Cursor::new(bundle), &path, &trust, &tx)).join().unwrap();
        let (mut items, mut blobs) = (0, Vec::new());
        while let Some(staged) = rx.blocking_recv() {
            match staged {
                Staged::Manifest(checked) => {
                    items = checked.items;
                    blobs.extend(checked.malicious.as_ref().map(|_| MALICIOUS.to_owned()));
                }
                Staged::Blob(blob) => blobs.push(blob.sha256.clone()),
                Staged::Damaged { sha256, .. } => blobs.push(format!("!{sha256}")),
                Staged::Broken(error) => return Err(error.to_string()),
            }
        }
        Ok((items, blobs))
    }

    fn unsigned_taken() -> Trust {
        Trust { keys: Arc::default(), unsigned: true }
    }

    fn read_all(bundle: Vec<u8>) -> Result<(usize, Vec<String>), String> {
        read_with(bundle, unsigned_taken())
    }

    /// A signing key and its public key.
    fn key() -> (SigningKey, PublicKey) {
        let dir = tempfile::tempdir().unwrap();
        let (pem, public) = signing::generate().unwrap();
        std::fs::write(dir.path().join("key"), pem).unwrap();
        (SigningKey::read(&dir.path().join("key")).unwrap(), public)
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
        assert_eq!(read_all(changed), Ok((1, vec![format!("!{sha}")])), "the item is refused, the bundle read on");
    }

    #[test]
    fn a_bundle_is_taken_signed_by_a_trusted_key_or_unsigned_only_when_the_admin_says_so() {
        let body = b"v1.0.0\n";
        let (manifest, sum) = manifest_for(body, FORMAT);
        let blob = format!("{BLOBS}{}", hex::encode(Sha256::digest(body)));
        let (key, public) = key();
        let signed = key.sign(std::str::from_utf8(&sum).unwrap());
        let bundle = |signature: Option<&[u8]>, manifest: &[u8], sum: &[u8]| {
            let mut entries: Vec<(&str, &[u8])> = vec![(MANIFEST, manifest), (MANIFEST_SUM, sum)];
            entries.extend(signature.map(|signature| (SIGNATURE, signature)));
            entries.push((&blob, body));
            tar_of(&entries)
        };
        let trusting = |keys: Vec<PublicKey>| Trust { keys: Arc::new(keys), unsigned: false };
        let taken = read_with(bundle(Some(&signed), &manifest, &sum), trusting(vec![public.clone()]));
        assert_eq!(taken.map(|(items, _)| items), Ok(1));
        let unsigned = read_with(bundle(None, &manifest, &sum), trusting(vec![public.clone()])).unwrap_err();
        assert!(unsigned.contains("it is not signed"), "{unsigned}");
        let (_, stranger) = signing::generate().unwrap();
        let untrusted = read_with(bundle(Some(&signed), &manifest, &sum), trusting(vec![stranger])).unwrap_err();
        assert!(untrusted.contains("which is not among [bundles] trusted_keys"), "{untrusted}");
        assert!(read_with(bundle(None, &manifest, &sum), unsigned_taken()).is_ok(), "--trust-unsigned");

        // Changed on purpose, its sum made again: the signature does not hold.
        let (forged, forged_sum) = manifest_for(b"v6.6.6\n", FORMAT);
        for trust in [trusting(vec![public]), unsigned_taken()] {
            let refused = read_with(bundle(Some(&signed), &forged, &forged_sum), trust).unwrap_err();
            assert!(refused.contains("does not match its manifest"), "{refused}");
        }
    }

    #[test]
    fn the_malicious_package_records_are_staged_only_as_the_manifest_names_them() {
        let index = format!("{}\nnpm\tx\tMAL-2025-1\t=1.0.1\n", pkgproxy_policy::INDEX_HEADER);
        let records = Carried { sha256: hex::encode(Sha256::digest(&index)), size: index.len() as u64 };
        let manifest =
            |malicious| Manifest { format: FORMAT, pkgproxy: "t".into(), created: 0, items: vec![], malicious };
        let json = serde_json::to_vec(&manifest(Some(records))).unwrap();
        let sum = hex::encode(Sha256::digest(&json)).into_bytes();
        let carried = tar_of(&[(MANIFEST, &json), (MANIFEST_SUM, &sum), (MALICIOUS, index.as_bytes())]);
        assert_eq!(read_all(carried), Ok((0, vec![MALICIOUS.to_owned()])));
        let changed = index.replace("1.0.1", "1.0.2");
        let changed = read_all(tar_of(&[(MANIFEST, &json), (MANIFEST_SUM, &sum), (MALICIOUS, changed.as_bytes())]));
        assert!(changed.unwrap_err().contains("does not match its manifest"));
        let missing = read_all(tar_of(&[(MANIFEST, &json), (MANIFEST_SUM, &sum)])).unwrap_err();
        assert!(missing.contains("which does not follow it"), "{missing}");
        let plain = serde_json::to_vec(&manifest(None)).unwrap();
        let plain_sum = hex::encode(Sha256::digest(&plain)).into_bytes();
        let unnamed = tar_of(&[(MANIFEST, &plain), (MANIFEST_SUM, &plain_sum), (MALICIOUS, index.as_bytes())]);
        assert!(read_all(unnamed).unwrap_err().contains("policy/malicious.tsv is not part of a bundle"));
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
        let signature = refused(tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, &sum), (SIGNATURE, b"{}")]));
        assert!(signature.contains("its signature cannot be read"), "{signature}");

        // Cut in the middle of a blob.
        let big = vec![7u8; 64 * 1024];
        let (manifest, sum) = manifest_for(&big, FORMAT);
        let blob = format!("{BLOBS}{}", hex::encode(Sha256::digest(&big)));
        let mut cut = tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, &sum), (&blob, &big)]);
        cut.truncate(cut.len() - 40 * 1024);
        assert!(read_all(cut).is_err(), "a bundle cut short is refused");
    }
}
