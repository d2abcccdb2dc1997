//! A fetch that asks the bucket before the upstream.

use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use pkgproxy_cache::{Entry, Expected, FetchError, Source, Sourced, StartFetch, UpstreamBody, Validators};
use sha2::{Digest, Sha256};

use crate::lease::{self, LeaseGuard, Taken};
use crate::peer::{self, TailError};
use crate::tier::SharedTier;

/// The source of a local miss in a cluster: the body another node
/// published, when the bucket holds one that can be this key's; else the
/// body another node is fetching, streamed from it, when it holds the
/// key's lease; else the upstream, under this node's lease.
///
/// For what changes under its name ([`SharedFirst::changing`]), the
/// published entry is taken while it is fresh, and its age goes with it;
/// else the upstream is asked (each node on its own: such answers are
/// small), and a stale published entry is served when the upstream cannot
/// be asked (an offline node), fails or is too busy. The fetch
/// verifies the bucket's body against the hash it is named by, as it
/// verifies an upstream body against its checksum; a body that does not
/// match is removed from the bucket. A peer's body is checked as an
/// upstream's is, and the peer itself never sends the last byte of a body
/// it found wrong.
pub struct SharedFirst {
    tier: Arc<SharedTier>,
    key: String,
    expected: Expected,
    upstream: Arc<dyn Source>,
    /// Where the fetch is reading from: a resume reads on from there, or
    /// from the upstream once that source is gone.
    reading: Arc<Mutex<Reading>>,
    /// The key's lease, while this node fetches it for the cluster:
    /// renewed until the fetch ends (the source is dropped then).
    lease: Arc<Mutex<Option<LeaseGuard>>>,
    /// For a key whose content changes, whether a published entry is
    /// fresh enough to serve without asking the upstream.
    fresh: Option<IsFresh>,
    /// Whether this node takes the key's lease to fetch it for the cluster.
    takes_lease: bool,
}

/// Whether a published entry is fresh for the request being served.
pub type IsFresh = Arc<dyn Fn(&Entry) -> bool + Send + Sync>;

/// What a fetch is reading from, as far as a resume is concerned.
#[derive(Default)]
enum Reading {
    /// The upstream (under this node's lease, when it holds one).
    #[default]
    Upstream,
    /// A body published to the bucket.
    Bucket(Entry),
    /// The fetch of another node, which holds the lease.
    Peer,
}

impl SharedFirst {
    /// The source of a miss of `key` whose body must match `expected`,
    /// falling back to `upstream`.
    pub fn new(tier: Arc<SharedTier>, key: &str, expected: Expected, upstream: Box<dyn Source>) -> Self {
        SharedFirst {
            tier,
            key: key.to_owned(),
            expected,
            upstream: Arc::from(upstream),
            reading: Arc::default(),
            lease: Arc::default(),
            fresh: None,
            takes_lease: true,
        }
    }

    /// For a node that does not ask its upstreams (it is offline): it never
    /// takes a key's lease, which would keep the others waiting for a
    /// fetch it does not make (or, were it to ask one of them, waiting for
    /// each other); it still streams a fetch another node makes.
    pub fn without_lease(self) -> Self {
        SharedFirst { takes_lease: false, ..self }
    }

    /// The source of a miss of `key`, whose content changes under its
    /// name: the published entry when `fresh` says it is, else `upstream`
    /// (falling back to the published entry).
    pub fn changing(tier: Arc<SharedTier>, key: &str, fresh: IsFresh, upstream: Box<dyn Source>) -> Self {
        SharedFirst { fresh: Some(fresh), ..SharedFirst::new(tier, key, Expected::default(), upstream) }
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
            last_used_ns: 0,
        }),
        _ => None,
    }
}

impl Source for SharedFirst {
    fn start(&self) -> StartFetch {
        if let Some(fresh) = &self.fresh {
            return self.start_changing(Arc::clone(fresh));
        }
        let (tier, key, expected) = (Arc::clone(&self.tier), self.key.clone(), self.expected.clone());
        let (upstream, reading, lease) =
            (Arc::clone(&self.upstream), Arc::clone(&self.reading), Arc::clone(&self.lease));
        let takes_lease = self.takes_lease;
        Box::pin(async move {
            if !tier.worth_asking() {
                return upstream.start().await;
            }
            if let Some(entry) = shared_entry(&tier, &key, &expected).await {
                if let Ok(Some(answer)) = tier.answer(&entry, 0).await {
                    tracing::debug!(key, sha256 = entry.sha256, "answered from the cluster store");
                    *reading.lock() = Reading::Bucket(entry.clone());
                    return Ok(checked(answer, tier, entry));
                }
            }
            match from_whoever_fetches(&tier, &key, 0, takes_lease).await {
                Ok(Whoever::Peer(answer)) => {
                    *reading.lock() = Reading::Peer;
                    Ok(answer)
                }
                Ok(Whoever::ThisNode(guard)) => {
                    let answered = upstream.start().await;
                    match brings_a_body(&answered) {
                        true => *lease.lock() = Some(guard),
                        // Nothing to share: the others ask for themselves.
                        false => guard.release_now().await,
                    }
                    answered
                }
                // Nobody can be asked: this node fetches on its own.
                Err(_) => upstream.start().await,
            }
        })
    }

    fn resume(&self, from: u64, validators: &Validators) -> Option<StartFetch> {
        let reading = std::mem::take(&mut *self.reading.lock());
        match reading {
            Reading::Upstream => self.upstream.resume(from, validators),
            Reading::Bucket(entry) => {
                let tier = Arc::clone(&self.tier);
                *self.reading.lock() = Reading::Bucket(entry.clone());
                Some(Box::pin(async move {
                    match tier.answer(&entry, from).await {
                        Ok(Some(answer)) => Ok(answer),
                        Ok(None) => Err(FetchError::Rejected("the cluster store no longer holds the body".into())),
                        Err(error) => Err(FetchError::Rejected(error.to_string())),
                    }
                }))
            }
            Reading::Peer => {
                // The peer's stream broke: it may have died. Its lease is
                // looked at again: taken over, this node resumes from the
                // upstream where the peer's bytes ended.
                let (tier, key, upstream) = (Arc::clone(&self.tier), self.key.clone(), Arc::clone(&self.upstream));
                let (reading, validators) = (Arc::clone(&self.reading), validators.clone());
                let (lease, takes_lease) = (Arc::clone(&self.lease), self.takes_lease);
                Some(Box::pin(async move {
                    let whoever = from_whoever_fetches(&tier, &key, from, takes_lease).await;
                    if let Ok(Whoever::Peer(answer)) = whoever {
                        *reading.lock() = Reading::Peer;
                        return Ok(answer);
                    }
                    if let Ok(Whoever::ThisNode(guard)) = whoever {
                        *lease.lock() = Some(guard);
                    }
                    match upstream.resume(from, &validators) {
                        Some(resumed) => resumed.await,
                        None => Err(FetchError::Rejected("the upstream cannot resume a body a peer began".into())),
                    }
                }))
            }
        }
    }
}

impl SharedFirst {
    /// The fetch of a key whose content changes: the published entry if
    /// fresh, else the upstream, else the published entry however old.
    fn start_changing(&self, fresh: IsFresh) -> StartFetch {
        let (tier, key, upstream, reading) =
            (Arc::clone(&self.tier), self.key.clone(), Arc::clone(&self.upstream), Arc::clone(&self.reading));
        Box::pin(async move {
            if !tier.worth_asking() {
                return upstream.start().await;
            }
            let published = tier.lookup(&key).await.ok().flatten().map(|shared| shared.entry);
            let from_bucket = |entry: Entry| {
                let (tier, reading) = (Arc::clone(&tier), Arc::clone(&reading));
                async move {
                    let answer = tier.answer(&entry, 0).await.ok().flatten()?;
                    *reading.lock() = Reading::Bucket(entry.clone());
                    Some(checked(answer, tier, entry))
                }
            };
            if let Some(entry) = published.clone().filter(|entry| fresh(entry)) {
                if let Some(answer) = from_bucket(entry).await {
                    tracing::debug!(key, "answered from the cluster store while fresh");
                    return Ok(answer);
                }
            }
            let asked = upstream.start().await;
            let failed = match &asked {
                Ok(answer) => {
                    let status = answer.response.status();
                    status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS
                }
                Err(_) => true,
            };
            match published {
                Some(entry) if failed => match from_bucket(entry).await {
                    Some(answer) => {
                        tracing::debug!(key, "the upstream failed: answered from the cluster store");
                        Ok(answer)
                    }
                    None => asked,
                },
                _ => asked,
            }
        })
    }
}

/// Whether the upstream's answer is a body a fetch may store.
fn brings_a_body(answered: &Result<Sourced, FetchError>) -> bool {
    answered.as_ref().is_ok_and(|answer| {
        matches!(answer.response.status(), http::StatusCode::OK | http::StatusCode::PARTIAL_CONTENT)
    })
}

/// Who brings a key's body.
enum Whoever {
    /// The node holding the key's lease, streaming it.
    Peer(Sourced),
    /// This node, which holds the lease now.
    ThisNode(LeaseGuard),
}

/// The body of `key` from byte `from` on, streamed from the node that
/// holds its lease. `ThisNode`: this node took the lease (it fetches);
/// `Err`: the holder could not be asked (this node fetches too: at most
/// one duplicate fetch, never an error for a client). A holder that is not
/// fetching the key, or cannot be reached (it died, or its `peer_url` does
/// not work from here), is taken over at once: asking it once is the
/// probe, and nobody waits out its lease. A node that does not take
/// leases only streams from a holder.
async fn from_whoever_fetches(
    tier: &Arc<SharedTier>,
    key: &str,
    from: u64,
    takes_lease: bool,
) -> Result<Whoever, FetchError> {
    if !takes_lease {
        let holder = lease::holder(tier, key).await;
        let holder = holder.filter(|h| h.node != tier.identity().node && h.peer_url.is_some());
        let holder = holder.ok_or_else(|| FetchError::Rejected("nobody fetches it".into()))?;
        let answer = peer::tail(tier, &holder, key, from).await?;
        return Ok(Whoever::Peer(answer));
    }
    let mut taken = lease::take(tier, key).await;
    for _ in 0..HOLDERS_ASKED {
        let holder = match taken {
            Taken::Held(guard) => return Ok(Whoever::ThisNode(guard)),
            Taken::HeldBy(holder) if holder.node != tier.identity().node && holder.peer_url.is_some() => holder,
            Taken::HeldBy(_) | Taken::Unavailable => return Err(FetchError::Rejected("no lease".into())),
        };
        taken = match peer::tail(tier, &holder, key, from).await {
            Ok(answer) => return Ok(Whoever::Peer(answer)),
            Err(TailError::NotThere(why)) => {
                tracing::debug!(key, why, "the node holding this key's lease is not fetching it");
                lease::take_from(tier, key, &holder).await
            }
            Err(TailError::Unreachable(why)) => {
                let taken = lease::take_from(tier, key, &holder).await;
                if let Taken::Held(_) = &taken {
                    tracing::info!(key, from = holder.node, why, "took over the fetch of a node that does not answer");
                }
                taken
            }
        };
    }
    Err(FetchError::Rejected("the key's lease kept moving between nodes that do not answer".into()))
}

/// The most holders a miss asks before fetching on its own: each one that
/// fails is taken over, so another only when yet another node took it
/// meanwhile.
const HOLDERS_ASKED: usize = 3;

/// The bucket's answer, hashed as it streams: a body that does not match
/// its name is removed from the bucket (the fetch, which checks it too,
/// fails it, and the next miss goes upstream).
fn checked(answer: Sourced, tier: Arc<SharedTier>, entry: Entry) -> Sourced {
    let response = answer.response.map(|body| Hashed { inner: body, hasher: Some(Sha256::new()), tier, entry }.boxed());
    Sourced { response, ..answer }
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
