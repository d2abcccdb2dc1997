//! The task that runs a shared fetch: asks the upstream, writes the body to a
//! temporary file (resuming it where it broke, when the source can), verifies
//! it and commits it, publishing each step to the waiters.

use std::fs::File;
use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::sync::watch;

use super::spill::{self, Spill};
use super::BodyReader;
use super::{
    kept_headers, validators, FetchSpec, Head, PassedAnswer, Phase, Progress, Registration, Source, StartFetch,
    UpstreamBody, PASSED_BODY_LIMIT,
};
use crate::blobs::{BodyHashes, TempBlob};
use crate::entry::{unix_secs, Entry, Validators};
use crate::error::FetchError;
use crate::store::{PendingCommit, Store};

/// How many new bytes make waiters worth waking.
const PUBLISH_STEP: u64 = 128 * 1024;

/// How many resumes in a row may bring no new byte before the fetch fails.
const FRUITLESS_RESUMES: u32 = 3;

pub(super) async fn lead(
    store: Arc<Store>,
    spec: FetchSpec,
    source: Box<dyn Source>,
    progress: watch::Sender<Progress>,
    registration: Registration,
) {
    // Shared with the blocking thread that ends a download.
    let progress = Arc::new(progress);
    let mut spec = spec;
    if let Some(verifier) = &spec.verifier {
        spec.expected = spec.expected.clone().or(verifier.expected());
    }
    let (phase, pending) = run(&store, &spec, source.as_ref(), &progress).await;
    match &phase {
        Phase::Failed(error) => {
            let upstream = progress.borrow().answered_by.clone();
            let upstream = upstream.as_deref().unwrap_or("none answered");
            tracing::warn!(key = spec.key, upstream, %error, detail = ?error, "fetch failed")
        }
        phase => tracing::debug!(key = spec.key, outcome = phase.as_str(), "fetch finished"),
    }
    if let (Phase::Done(entry), Some(hook)) = (&phase, registration.fetches.committed.get()) {
        if let Ok(body) = store.open_body(entry) {
            let answered_by = progress.borrow().answered_by.clone();
            Arc::clone(hook).committed(&spec.key, entry, body, answered_by.as_deref());
        }
    }
    progress.send_modify(|p| p.phase = phase);
    // Unregister only after the outcome is published: a request arriving in
    // between joins this fetch and sees the outcome, and one arriving after
    // finds the committed entry in the index. The commit stays pending
    // until then: one waiting for it finds the fetch gone too.
    drop(registration);
    drop(pending);
}

/// Runs the fetch: where it ended, and for a body committed, its commit
/// still counted as pending until the fetch is unregistered.
async fn run(
    store: &Arc<Store>,
    spec: &FetchSpec,
    source: &dyn Source,
    progress: &Arc<watch::Sender<Progress>>,
) -> (Phase, Option<PendingCommit>) {
    let mut asked = ask(store, spec, source, source.start(), progress).await;
    if let Some(elsewhere) = refused_by_its_check(spec, &asked).then(|| source.elsewhere()).flatten() {
        if let Asked::Ended(Phase::Failed(error)) = &asked {
            tracing::info!(key = spec.key, %error, "the body was refused: asking another instance");
        }
        progress.send_modify(|p| {
            p.phase = Phase::Asking;
            p.written = 0;
            p.spill = None;
            p.attempt += 1;
        });
        asked = ask(store, spec, source, elsewhere, progress).await;
    }
    match asked {
        Asked::Body(Downloaded::Cached(entry, pending)) => (Phase::Done(entry), Some(pending)),
        Asked::Body(Downloaded::Uncached(head, size)) => (Phase::Uncached { head, size }, None),
        Asked::Ended(phase) => (phase, None),
    }
}

/// Whether `asked` ended with a body its verifier's check refused, while
/// no client was given any of it (a verifier that judges bodies makes them
/// wait for its verdict): another instance may have the right one.
fn refused_by_its_check(spec: &FetchSpec, asked: &Asked) -> bool {
    let judged = spec.verifier.as_ref().is_some_and(|verifier| verifier.judges_body());
    judged && matches!(asked, Asked::Ended(Phase::Failed(error)) if matches!(**error, FetchError::Rejected(_)))
}

/// How asking the upstream ended.
enum Asked {
    /// With a `200` body, downloaded.
    Body(Downloaded),
    /// Otherwise: refreshed, passed on or failed.
    Ended(Phase),
}

/// Asks the upstream (`start` is the request sent) and takes its answer;
/// `source` resumes a body that breaks.
async fn ask(
    store: &Arc<Store>,
    spec: &FetchSpec,
    source: &dyn Source,
    start: StartFetch,
    progress: &Arc<watch::Sender<Progress>>,
) -> Asked {
    let answer = match start.await {
        Ok(answer) => answer,
        Err(error) => return Asked::Ended(Phase::Failed(Arc::new(error))),
    };
    let super::Sourced { response, answered_by, fetched_at, expected } = answer;
    let (parts, body) = response.into_parts();
    // A source may promise more than the request knew (a body read from a
    // cluster's store is named by its hash): it is held to that too.
    let promised;
    let spec = match expected {
        Some(more) => {
            promised = FetchSpec { expected: spec.expected.clone().or(more), ..spec.clone() };
            &promised
        }
        None => spec,
    };
    if let Some(by) = answered_by {
        progress.send_modify(|p| p.answered_by = Some(by));
    }
    if let (StatusCode::OK, Some(coding)) = (parts.status, content_coding(&parts.headers)) {
        let refused =
            format!("the body is encoded as {coding:?}; only its identity bytes (which checksums cover) are taken");
        return Asked::Ended(Phase::Failed(Arc::new(FetchError::Rejected(refused))));
    }
    match (parts.status, &spec.revalidating) {
        (StatusCode::OK, _) => match download(store, spec, &parts.headers, body, source, progress, fetched_at).await {
            Ok(downloaded) => Asked::Body(downloaded),
            Err(error) => Asked::Ended(Phase::Failed(Arc::new(error))),
        },
        (StatusCode::NOT_MODIFIED, Some(cached)) => {
            Asked::Ended(Phase::NotModified(refresh(store, spec, cached, &parts.headers).await))
        }
        (status, _) => Asked::Ended(Phase::Passed(Arc::new(pass(status, &parts.headers, body).await))),
    }
}

/// The content coding of an answer, other than `identity`: pkgproxy asks
/// for the identity (`Accept-Encoding: identity`) and keeps only that, the
/// bytes every checksum covers; an upstream that encodes anyway is refused
/// rather than stored in a form some clients cannot read.
fn content_coding(headers: &http::HeaderMap) -> Option<String> {
    let coding = headers.get(http::header::CONTENT_ENCODING)?.to_str().unwrap_or("?").trim().to_ascii_lowercase();
    (!coding.is_empty() && coding != "identity").then_some(coding)
}

/// What a `200` body became.
enum Downloaded {
    /// Verified and cached; its commit counted as pending while held.
    Cached(Arc<Entry>, PendingCommit),
    /// Verified and passed through: the disk had no room for it.
    Uncached(Arc<Head>, u64),
}

/// Streams a `200` body into the store.
async fn download(
    store: &Arc<Store>,
    spec: &FetchSpec,
    headers: &http::HeaderMap,
    mut body: UpstreamBody,
    source: &dyn Source,
    progress: &Arc<watch::Sender<Progress>>,
    fetched_at: Option<u64>,
) -> Result<Downloaded, FetchError> {
    let content_length =
        headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if let (Some(declared), Some(expected)) = (content_length, spec.expected.size) {
        if declared != expected {
            return Err(FetchError::Length { expected, actual: declared });
        }
    }
    let limit = spec.expected.size.or(content_length);
    let mut temp = match spec.expected.sha512 {
        Some(_) => store.temp()?.also_sha512(),
        None => store.temp()?,
    };
    let head = Head {
        headers: kept_headers(headers),
        validators: validators(headers),
        content_length: limit,
        received_at: store.clock().now(),
        reader: temp.reader(),
        attempt: progress.borrow().attempt,
    };
    let entry_headers = head.headers.clone();
    let entry_validators = head.validators.clone();
    let head = Arc::new(head);
    progress.send_modify(|p| p.phase = Phase::Streaming(Arc::clone(&head)));

    let mut streaming_check = spec.verifier.as_ref().and_then(|verifier| verifier.streaming_check());
    let mut spill: Option<Arc<Spill>> = None;
    let mut published = 0;
    let mut fruitless = 0;
    let mut resumed_at = None;
    loop {
        let frame = match body.frame().await {
            None => break,
            Some(Err(error)) => {
                let received = temp.written();
                let error = FetchError::Body { received, message: error.to_string() };
                if resumed_at == Some(received) {
                    fruitless += 1;
                }
                if fruitless >= FRUITLESS_RESUMES || limit.is_none() || limit == Some(received) {
                    return Err(error);
                }
                tracing::info!(key = spec.key, %error, "resuming the body from byte {received}");
                body = resume(source, received, &entry_validators, limit).await.map_err(|reason| FetchError::Body {
                    received,
                    message: format!("{error}; resuming failed: {reason}"),
                })?;
                resumed_at = Some(received);
                continue;
            }
            Some(Ok(frame)) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        if !data.is_empty() {
            fruitless = 0;
        }
        check_length(&temp, spill.as_deref(), &data, limit)?;
        match &spill {
            Some(spill) => spilled(&mut temp, spill, &data, progress).await,
            None => {
                if let Err(error) = temp.append(&data) {
                    spill = make_room_or_spill(store, spec, &mut temp, &data, limit, error, progress).await?;
                }
            }
        }
        if let Some(check) = streaming_check.as_mut() {
            check.update(&data);
        }
        let written = temp.written() + spill.as_ref().map_or(0, |spill| spill.len());
        // Waking every waiter for every small chunk costs more than it
        // brings; they read all that is there when they wake.
        if published == 0 || written - published >= PUBLISH_STEP {
            progress.send_modify(|p| p.written = written);
            published = written;
        }
    }

    let hashes = temp.hashes();
    verify(spec, limit, &hashes)?;
    if let Some(check) = streaming_check {
        check.verdict().map_err(FetchError::Rejected)?;
    }
    if spill.is_none() && !store.admits(hashes.size) {
        // Larger than the cache may hold: the waiters read the temporary
        // file through their open handles, and it goes.
        tracing::info!(key = spec.key, size = hashes.size, "larger than the cache takes: passed through");
        return Ok(Downloaded::Uncached(head, hashes.size));
    }
    if spill.is_some() {
        if spec.verifier.as_ref().is_some_and(|verifier| verifier.judges_body()) {
            return Err(FetchError::Rejected("the disk has no room to keep the body for its check".into()));
        }
        return Ok(Downloaded::Uncached(head, hashes.size));
    }
    let now = unix_secs(store.clock().now());
    let entry = Entry {
        sha256: hashes.sha256.clone(),
        size: hashes.size,
        headers: entry_headers,
        validators: entry_validators,
        // Never later than now: another node's clock may run ahead.
        fetched_at: fetched_at.map_or(now, |at| at.min(now)),
        class: spec.class,
        // Stamped as used when committed: an entry fetched long ago
        // elsewhere is new to this node's eviction.
        last_used_ns: 0,
    };
    let (size, entry, body) = (hashes.size, Arc::new(entry), temp.reader());
    // With no check to wait for, the waiters are answered at once.
    let checked = spec.verifier.is_none().then(|| publish_checked(store, progress, &entry, &body));
    let ending = Ending {
        store: Arc::clone(store),
        key: spec.key.clone(),
        verifier: spec.verifier.clone(),
        progress: Arc::clone(progress),
        entry,
        body,
    };
    let ended = tokio::task::spawn_blocking(move || ending.run(temp, &hashes, checked));
    match ended.await.map_err(|_| FetchError::Abandoned)? {
        Ended::Rejected(reason) => Err(FetchError::Rejected(reason)),
        Ended::Cached(entry, pending) => Ok(Downloaded::Cached(entry, pending)),
        // The body is whole and checked: the waiters read it through their
        // handles; only the cache goes without it.
        Ended::NotStored(error) => {
            store.report_not_stored(&spec.key, &error);
            Ok(Downloaded::Uncached(head, size))
        }
    }
}

/// What is left of a download once its bytes are in, done on one trip to a
/// blocking thread (each trip costs two thread switches a miss): the
/// verifier's check, the waiters told the body is whole, its commit, and
/// what the verifier learns from it.
struct Ending {
    store: Arc<Store>,
    key: String,
    verifier: Option<Arc<dyn super::Verifier>>,
    progress: Arc<watch::Sender<Progress>>,
    entry: Arc<Entry>,
    body: Arc<File>,
}

/// Tells the waiters the body is whole and checked: they are answered now;
/// the commit's flushes are the disk's business, not theirs. The commit
/// counts as pending from here.
fn publish_checked(
    store: &Arc<Store>,
    progress: &watch::Sender<Progress>,
    entry: &Arc<Entry>,
    body: &Arc<File>,
) -> PendingCommit {
    let pending = PendingCommit::new(store);
    progress.send_modify(|p| p.phase = Phase::Checked { entry: Arc::clone(entry), body: Arc::clone(body) });
    pending
}

/// How a download's ending went.
enum Ended {
    /// The verifier refused the body.
    Rejected(String),
    /// Committed; its commit counted as pending while held.
    Cached(Arc<Entry>, PendingCommit),
    /// Checked and served, but the store could not keep it.
    NotStored(crate::error::StoreError),
}

impl Ending {
    /// Blocking. `checked` when the waiters were told already.
    fn run(self, temp: TempBlob, hashes: &BodyHashes, checked: Option<PendingCommit>) -> Ended {
        let body = &self.body;
        let pending = match checked {
            Some(pending) => pending,
            None => {
                if let Some(verifier) = &self.verifier {
                    if let Err(reason) = verifier.check(&mut BodyReader::new(body), hashes) {
                        return Ended::Rejected(reason);
                    }
                }
                publish_checked(&self.store, &self.progress, &self.entry, body)
            }
        };
        let entry = match self.store.commit(&self.key, temp, hashes, Entry::clone(&self.entry)) {
            Ok(entry) => entry,
            Err(error) => return Ended::NotStored(error),
        };
        if let Some(verifier) = self.verifier.filter(|verifier| verifier.learns()) {
            let hashes = hashes.clone();
            let body = self.body;
            tokio::task::spawn_blocking(move || verifier.committed(&mut BodyReader::new(&body), &hashes));
        }
        Ended::Cached(entry, pending)
    }
}

/// Asks the source for the bytes from `from` on and checks the answer is
/// exactly that range of the same representation.
async fn resume(
    source: &dyn Source,
    from: u64,
    validators: &Validators,
    total: Option<u64>,
) -> Result<UpstreamBody, String> {
    let start = source.resume(from, validators).ok_or("this upstream cannot resume")?;
    let answer = start.await.map_err(|error| error.to_string())?.response;
    if answer.status() != StatusCode::PARTIAL_CONTENT {
        return Err(format!("the range request was answered {}", answer.status()));
    }
    let range = answer.headers().get(http::header::CONTENT_RANGE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let expected = match total {
        Some(total) => format!("bytes {from}-{}/{total}", total.saturating_sub(1)),
        None => return Err("the body's length is unknown".to_string()),
    };
    if range != expected {
        return Err(format!("the range request was answered with Content-Range {range:?}, not {expected:?}"));
    }
    Ok(answer.into_body())
}

/// Fails a body that grows past the length it was given.
fn check_length(temp: &TempBlob, spill: Option<&Spill>, data: &Bytes, limit: Option<u64>) -> Result<(), FetchError> {
    let held = temp.written() + spill.map_or(0, Spill::len);
    let total = held + data.len() as u64;
    match limit {
        Some(expected) if total > expected => Err(FetchError::Length { expected, actual: total }),
        _ => Ok(()),
    }
}

/// The disk had no room for `data` (`error`): evict what the rest of the
/// body needs and write it; failing that, pass the rest of the body
/// through memory to the waiters, uncached (still checked whole). Any
/// other error fails the fetch.
async fn make_room_or_spill(
    store: &Arc<Store>,
    spec: &FetchSpec,
    temp: &mut TempBlob,
    data: &Bytes,
    limit: Option<u64>,
    error: crate::error::StoreError,
    progress: &watch::Sender<Progress>,
) -> Result<Option<Arc<Spill>>, FetchError> {
    if !error.is_full() {
        return Err(error.into());
    }
    let rest = limit.map_or(data.len() as u64, |limit| limit.saturating_sub(temp.written()));
    let evicting = Arc::clone(store);
    let room = tokio::task::spawn_blocking(move || evicting.make_room(rest + rest / 10)).await;
    if matches!(room, Ok(Ok(freed)) if freed > 0) && temp.append(data).is_ok() {
        return Ok(None);
    }
    store.report_full(&spec.key);
    let spill = Arc::new(Spill::at(temp.written()));
    spilled(temp, &spill, data, progress).await;
    Ok(Some(spill))
}

/// `data`, which the disk has no room for, held in `spill` and hashed;
/// returns once the spill is back within its window (the slowest waiter
/// has read enough).
async fn spilled(temp: &mut TempBlob, spill: &Arc<Spill>, data: &Bytes, progress: &watch::Sender<Progress>) {
    temp.spill(data);
    spill.push(data.clone());
    if progress.borrow().spill.is_none() {
        let shared = Arc::clone(spill);
        progress.send_modify(|p| p.spill = Some(shared));
    }
    let readers = Arc::clone(&progress.borrow().readers);
    // The waiters are told of the new bytes before waiting for them.
    let received = spill.base + spill.len();
    progress.send_modify(|p| p.written = received);
    spill::keep_within(spill, &readers, spill::WINDOW).await;
}

fn verify(spec: &FetchSpec, limit: Option<u64>, hashes: &BodyHashes) -> Result<(), FetchError> {
    if let Some(expected) = limit {
        if hashes.size != expected {
            return Err(FetchError::Length { expected, actual: hashes.size });
        }
    }
    let checks = [
        ("SHA256", &spec.expected.sha256, Some(&hashes.sha256)),
        ("SHA512", &spec.expected.sha512, hashes.sha512.as_ref()),
    ];
    for (algorithm, expected, actual) in checks {
        if let Some(expected) = expected {
            let actual = actual.map_or("", String::as_str);
            if !expected.eq_ignore_ascii_case(actual) {
                return Err(FetchError::Checksum { algorithm, expected: expected.clone(), actual: actual.to_string() });
            }
        }
    }
    Ok(())
}

/// Refreshes a revalidated entry after a `304`, taking any new validators.
async fn refresh(store: &Arc<Store>, spec: &FetchSpec, cached: &Arc<Entry>, headers: &http::HeaderMap) -> Arc<Entry> {
    let mut entry = Entry::clone(cached);
    entry.fetched_at = unix_secs(store.clock().now());
    let fresh = validators(headers);
    if fresh.etag.is_some() {
        entry.validators.etag = fresh.etag;
    }
    if fresh.last_modified.is_some() {
        entry.validators.last_modified = fresh.last_modified;
    }
    let (store2, key) = (Arc::clone(store), spec.key.clone());
    match tokio::task::spawn_blocking(move || store2.update(&key, entry)).await {
        Ok(Ok(entry)) => entry,
        Ok(Err(error)) => {
            tracing::warn!(key = spec.key, %error, "cannot record revalidation; serving the cached entry");
            Arc::clone(cached)
        }
        Err(_) => Arc::clone(cached),
    }
}

/// Reads a non-cacheable answer (bounded) to hand to every waiter.
async fn pass(status: StatusCode, headers: &http::HeaderMap, mut body: UpstreamBody) -> PassedAnswer {
    let mut collected = Vec::new();
    while collected.len() < PASSED_BODY_LIMIT {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = PASSED_BODY_LIMIT - collected.len();
                    collected.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            _ => break,
        }
    }
    let headers = headers
        .iter()
        .filter(|(name, _)| *name != http::header::CONTENT_LENGTH && *name != http::header::TRANSFER_ENCODING)
        .filter_map(|(name, v)| Some((name.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    PassedAnswer { status, headers, body: Bytes::from(collected) }
}
