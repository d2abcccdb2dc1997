//! A fetch that asks the bucket before the upstream.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use pkgproxy_cache::{Entry, Expected, FetchError, Source, StartFetch, UpstreamBody, Validators};
use sha2::{Digest, Sha256};

use crate::tier::SharedTier;

/// The source of a local miss in a cluster: the body another node
/// published, when the bucket holds one that can be this key's, else the
/// upstream. The fetch verifies the bucket's body against the hash it is
/// named by, as it verifies an upstream body against its checksum; a body
/// that does not match is removed from the bucket.
pub struct SharedFirst {
    tier: Arc<SharedTier>,
    key: String,
    expected: Expected,
    upstream: Arc<dyn Source>,
    /// The entry whose body the fetch is reading from the bucket, if any:
    /// a resume reads on from the bucket too.
    reading: Arc<Mutex<Option<Entry>>>,
}

impl SharedFirst {
    /// The source of a miss of `key` whose body must match `expected`,
    /// falling back to `upstream`.
    pub fn new(tier: Arc<SharedTier>, key: &str, expected: Expected, upstream: Box<dyn Source>) -> Self {
        SharedFirst { tier, key: key.to_owned(), expected, upstream: Arc::from(upstream), reading: Arc::default() }
    }
}

/// What the bucket holds for `key`, if it can be the body `expected`
/// describes: the published entry, or (when the key's body is known by
/// hash and no entry was published under this key) the blob of that hash.
async fn shared_entry(tier: &SharedTier, key: &str, expected: &Expected) -> Option<Entry> {
    let published = tier.lookup(key).await.ok().flatten().map(|shared| shared.entry);
    let fits = |entry: &Entry| {
        expected.sha256.as_deref().is_none_or(|sha| sha.eq_ignore_ascii_case(&entry.sha256))
            && expected.size.is_none_or(|size| size == entry.size)
    };
    match (published.filter(fits), &expected.sha256, expected.size) {
        (Some(entry), _, _) => Some(entry),
        (None, Some(sha256), Some(size)) => Some(Entry {
            sha256: sha256.to_ascii_lowercase(),
            size,
            headers: Vec::new(),
            validators: Validators::default(),
            fetched_at: 0,
            class: pkgproxy_cache::Class::Immutable,
            last_used: 0,
        }),
        _ => None,
    }
}

impl Source for SharedFirst {
    fn start(&self) -> StartFetch {
        let (tier, key, expected) = (Arc::clone(&self.tier), self.key.clone(), self.expected.clone());
        let (upstream, reading) = (Arc::clone(&self.upstream), Arc::clone(&self.reading));
        Box::pin(async move {
            let entry = match tier.worth_asking() {
                true => shared_entry(&tier, &key, &expected).await,
                false => None,
            };
            if let Some(entry) = entry {
                if let Ok(Some(answer)) = tier.answer(&entry, 0).await {
                    tracing::debug!(key, sha256 = entry.sha256, "answered from the cluster store");
                    *reading.lock().unwrap_or_else(|p| p.into_inner()) = Some(entry.clone());
                    return Ok(checked(answer, tier, entry));
                }
            }
            upstream.start().await
        })
    }

    fn resume(&self, from: u64, validators: &Validators) -> Option<StartFetch> {
        let reading = self.reading.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(entry) = reading else { return self.upstream.resume(from, validators) };
        let tier = Arc::clone(&self.tier);
        Some(Box::pin(async move {
            match tier.answer(&entry, from).await {
                Ok(Some(answer)) => Ok(answer),
                Ok(None) => Err(FetchError::Rejected("the cluster store no longer holds the body".into())),
                Err(error) => Err(FetchError::Rejected(error.to_string())),
            }
        }))
    }
}

/// The bucket's answer, hashed as it streams: a body that does not match
/// its name is removed from the bucket (the fetch, which checks it too,
/// fails it, and the next miss goes upstream).
fn checked(answer: http::Response<UpstreamBody>, tier: Arc<SharedTier>, entry: Entry) -> http::Response<UpstreamBody> {
    answer.map(|body| Hashed { inner: body, hasher: Some(Sha256::new()), tier, entry }.boxed())
}

struct Hashed {
    inner: UpstreamBody,
    hasher: Option<Sha256>,
    tier: Arc<SharedTier>,
    entry: Entry,
}

impl Body for Hashed {
    type Data = Bytes;
    type Error = pkgproxy_cache::fetch::BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(hasher), Some(data)) = (this.hasher.as_mut(), frame.data_ref()) {
                    hasher.update(data);
                }
            }
            Poll::Ready(None) => {
                if let Some(hasher) = this.hasher.take() {
                    let actual = hex::encode(hasher.finalize());
                    if actual != this.entry.sha256 {
                        let (tier, sha256) = (Arc::clone(&this.tier), this.entry.sha256.clone());
                        tokio::spawn(async move { tier.count_corrupt(&sha256).await });
                    }
                }
            }
            // A broken read: the fetch resumes from the bucket, and this
            // hash no longer covers the whole body.
            Poll::Ready(Some(Err(_))) => this.hasher = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
