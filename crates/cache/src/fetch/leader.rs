//! The task that runs a shared fetch: asks the upstream, writes the body to a
//! temporary file, verifies it and commits it, publishing each step to the
//! waiters.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::sync::watch;

use super::BodyReader;
use super::{
    kept_headers, validators, FetchSpec, Head, PassedAnswer, Phase, Progress, Registration, StartFetch, UpstreamBody,
    PASSED_BODY_LIMIT,
};
use crate::blobs::TempBlob;
use crate::entry::{unix_secs, Entry};
use crate::error::FetchError;
use crate::store::Store;

/// How many new bytes make waiters worth waking.
const PUBLISH_STEP: u64 = 128 * 1024;

pub(super) async fn lead(
    store: Arc<Store>,
    spec: FetchSpec,
    start: StartFetch,
    progress: watch::Sender<Progress>,
    registration: Registration,
) {
    let mut spec = spec;
    if let Some(verifier) = &spec.verifier {
        spec.expected = spec.expected.clone().or(verifier.expected());
    }
    let phase = run(&store, &spec, start, &progress).await;
    match &phase {
        Phase::Failed(error) => tracing::warn!(key = spec.key, %error, "fetch failed"),
        phase => tracing::debug!(key = spec.key, outcome = phase.as_str(), "fetch finished"),
    }
    progress.send_modify(|p| p.phase = phase);
    // Unregister only after the outcome is published: a request arriving in
    // between joins this fetch and sees the outcome, and one arriving after
    // finds the committed entry in the index.
    drop(registration);
}

async fn run(store: &Arc<Store>, spec: &FetchSpec, start: StartFetch, progress: &watch::Sender<Progress>) -> Phase {
    let answer = match start.await {
        Ok(answer) => answer,
        Err(error) => return Phase::Failed(Arc::new(error)),
    };
    let (parts, body) = answer.into_parts();
    match (parts.status, &spec.revalidating) {
        (StatusCode::OK, _) => match download(store, spec, &parts.headers, body, progress).await {
            Ok(entry) => Phase::Done(entry),
            Err(error) => Phase::Failed(Arc::new(error)),
        },
        (StatusCode::NOT_MODIFIED, Some(cached)) => {
            Phase::NotModified(refresh(store, spec, cached, &parts.headers).await)
        }
        (status, _) => Phase::Passed(Arc::new(pass(status, &parts.headers, body, spec).await)),
    }
}

/// Streams a `200` body into the store.
async fn download(
    store: &Arc<Store>,
    spec: &FetchSpec,
    headers: &http::HeaderMap,
    mut body: UpstreamBody,
    progress: &watch::Sender<Progress>,
) -> Result<Arc<Entry>, FetchError> {
    let content_length =
        headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if let (Some(declared), Some(expected)) = (content_length, spec.expected.size) {
        if declared != expected {
            return Err(FetchError::Length { expected, actual: declared });
        }
    }
    let limit = spec.expected.size.or(content_length);
    let mut temp = store.temp()?;
    let head = Head {
        headers: kept_headers(headers),
        validators: validators(headers),
        content_length: limit,
        reader: temp.reader(),
    };
    let entry_headers = head.headers.clone();
    let entry_validators = head.validators.clone();
    progress.send_modify(|p| p.phase = Phase::Streaming(Arc::new(head)));

    let mut published = 0;
    loop {
        let frame = match tokio::time::timeout(spec.idle_timeout, body.frame()).await {
            Err(_) => {
                let idle_secs = spec.idle_timeout.as_secs();
                return Err(FetchError::Stalled { received: temp.written(), idle_secs });
            }
            Ok(None) => break,
            Ok(Some(Err(error))) => {
                return Err(FetchError::Body { received: temp.written(), message: error.to_string() });
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        append(&mut temp, &data, limit)?;
        let written = temp.written();
        // Waking every waiter for every small chunk costs more than it
        // brings; they read all that is there when they wake.
        if published == 0 || written - published >= PUBLISH_STEP {
            progress.send_modify(|p| p.written = written);
            published = written;
        }
    }

    let hashes = temp.hashes();
    verify(spec, limit, &hashes)?;
    let body = temp.reader();
    if let Some(verifier) = &spec.verifier {
        let (verifier, body, hashes) = (Arc::clone(verifier), Arc::clone(&body), hashes.clone());
        tokio::task::spawn_blocking(move || verifier.check(&mut BodyReader::new(&body), &hashes))
            .await
            .map_err(|_| FetchError::Abandoned)?
            .map_err(FetchError::Rejected)?;
    }
    let entry = Entry {
        sha256: hashes.sha256.clone(),
        size: hashes.size,
        headers: entry_headers,
        validators: entry_validators,
        fetched_at: unix_secs(SystemTime::now()),
        class: spec.class,
    };
    let (store, key, committed_hashes) = (Arc::clone(store), spec.key.clone(), hashes.clone());
    let entry = tokio::task::spawn_blocking(move || store.commit(&key, temp, &hashes, entry))
        .await
        .map_err(|_| FetchError::Abandoned)??;
    if let Some(verifier) = &spec.verifier {
        let verifier = Arc::clone(verifier);
        tokio::task::spawn_blocking(move || verifier.committed(&mut BodyReader::new(&body), &committed_hashes));
    }
    Ok(entry)
}

fn append(temp: &mut TempBlob, data: &Bytes, limit: Option<u64>) -> Result<(), FetchError> {
    let total = temp.written() + data.len() as u64;
    if let Some(expected) = limit {
        if total > expected {
            return Err(FetchError::Length { expected, actual: total });
        }
    }
    temp.append(data)?;
    Ok(())
}

fn verify(spec: &FetchSpec, limit: Option<u64>, hashes: &crate::blobs::BodyHashes) -> Result<(), FetchError> {
    if let Some(expected) = limit {
        if hashes.size != expected {
            return Err(FetchError::Length { expected, actual: hashes.size });
        }
    }
    let checks = [("SHA256", &spec.expected.sha256, &hashes.sha256), ("SHA512", &spec.expected.sha512, &hashes.sha512)];
    for (algorithm, expected, actual) in checks {
        if let Some(expected) = expected {
            if !expected.eq_ignore_ascii_case(actual) {
                return Err(FetchError::Checksum { algorithm, expected: expected.clone(), actual: actual.clone() });
            }
        }
    }
    Ok(())
}

/// Refreshes a revalidated entry after a `304`, taking any new validators.
async fn refresh(store: &Arc<Store>, spec: &FetchSpec, cached: &Arc<Entry>, headers: &http::HeaderMap) -> Arc<Entry> {
    let mut entry = Entry::clone(cached);
    entry.fetched_at = unix_secs(SystemTime::now());
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
async fn pass(status: StatusCode, headers: &http::HeaderMap, mut body: UpstreamBody, spec: &FetchSpec) -> PassedAnswer {
    let mut collected = Vec::new();
    while collected.len() < PASSED_BODY_LIMIT {
        match tokio::time::timeout(spec.idle_timeout, body.frame()).await {
            Ok(Some(Ok(frame))) => {
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
