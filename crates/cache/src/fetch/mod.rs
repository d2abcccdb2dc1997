//! Shared fetches: one upstream request per key, however many clients ask.
//!
//! The first client to miss a key starts a fetch; it runs in a task of its
//! own, so no client leaving (the first one included) cancels it for the
//! others or for the cache. The body goes to a temporary file while it
//! arrives, and every waiter streams from that file up to what has been
//! written, so a late joiner gets the bytes already there at once and the
//! rest as they come. A waiter never receives the last byte before the body
//! is verified and committed: a body that turns out wrong (a checksum or
//! length mismatch, a broken upstream) reaches every client as an error,
//! never as a complete response.
//!
//! A body that breaks half way is resumed where it broke, through the
//! caller's [`Source::resume`] (a `Range` request, to another instance when
//! there is one), and the bytes are still verified end to end.
//!
//! This module knows nothing of sockets: the caller hands it a [`Source`]
//! of futures that ask the upstream.

mod body;
mod leader;
mod spill;
mod verify;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::combinators::BoxBody;
use tokio::sync::watch;

pub use body::FetchBody;
pub use verify::{BodyReader, StreamingCheck, Verifier};

use crate::entry::{Class, Entry, Validators};
use crate::error::FetchError;
use crate::store::Store;
use spill::{Readers, Spill};

pub use crate::error::BoxError;
/// The body of an upstream answer, as the fetch consumes it.
pub type UpstreamBody = BoxBody<Bytes, BoxError>;
/// The future that sends the upstream request and yields its answer head.
pub type StartFetch = Pin<Box<dyn Future<Output = Result<Sourced, FetchError>> + Send>>;

/// An answer a [`Source`] gives: the upstream's response, and what the
/// source knows of it beside the response, typed.
#[derive(Debug)]
pub struct Sourced {
    /// The upstream's response, its body not yet read.
    pub response: http::Response<UpstreamBody>,
    /// Which upstream answered (an instance's base URL, a cluster's peer or
    /// bucket, a bundle): the access log names it for every request the
    /// fetch served.
    pub answered_by: Option<Arc<str>>,
    /// When another node of a cluster fetched the body (Unix seconds): the
    /// entry's age counts from then, so a shared copy of what changes
    /// under its name is no fresher here than where it was fetched.
    pub fetched_at: Option<u64>,
    /// What the body must match beyond what the request knew (a body read
    /// from a cluster's store is named by its hash).
    pub expected: Option<Expected>,
}

impl Sourced {
    /// `response`, with nothing known beside it.
    pub fn new(response: http::Response<UpstreamBody>) -> Sourced {
        Sourced { response, answered_by: None, fetched_at: None, expected: None }
    }

    /// Answered by `by`.
    pub fn answered_by(self, by: impl Into<Arc<str>>) -> Sourced {
        Sourced { answered_by: Some(by.into()), ..self }
    }
}

impl From<http::Response<UpstreamBody>> for Sourced {
    fn from(response: http::Response<UpstreamBody>) -> Sourced {
        Sourced::new(response)
    }
}

/// Where a fetch gets its bytes.
pub trait Source: Send + Sync {
    /// Asks the upstream for the whole body.
    fn start(&self) -> StartFetch;

    /// Asks the upstream for the body from byte `from` on, after the body
    /// broke there: a `Range` request, with `If-Range` from `validators` when
    /// the first answer had any. `None`: this source cannot resume. The
    /// answer must be a `206` for exactly that range, or the fetch fails.
    fn resume(&self, from: u64, validators: &Validators) -> Option<StartFetch> {
        let _ = (from, validators);
        None
    }

    /// Asks another instance of the upstream for the whole body, after the
    /// one that answered gave a body the check refused (a mirror that is
    /// behind). `None`: this source has no other.
    fn elsewhere(&self) -> Option<StartFetch> {
        None
    }
}

/// A source of one request that cannot resume.
struct Once(Mutex<Option<StartFetch>>);

impl Source for Once {
    fn start(&self) -> StartFetch {
        let start = self.0.lock().take();
        start.unwrap_or_else(|| Box::pin(async { Err(FetchError::Abandoned) }))
    }
}

/// Told of every body a fetch committed, with the name of the upstream that
/// answered (a cluster publishes what its node fetched).
pub trait Committed: Send + Sync + std::fmt::Debug {
    /// `entry` was committed under `key`; `body` reads it.
    fn committed(self: Arc<Self>, key: &str, entry: &Arc<Entry>, body: Arc<File>, answered_by: Option<&str>);
}

/// What the body must match before it is cached. Empty: only the upstream's
/// own `Content-Length` is checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    /// Exact length in bytes.
    pub size: Option<u64>,
    /// Lower-case hex SHA-256.
    pub sha256: Option<String>,
    /// Lower-case hex SHA-512.
    pub sha512: Option<String>,
}

/// What to fetch and how to treat the answer.
#[derive(Debug, Clone)]
pub struct FetchSpec {
    /// The cache key the answer is stored under.
    pub key: String,
    /// How the stored entry will age.
    pub class: Class,
    /// What the body must match.
    pub expected: Expected,
    /// The cached entry being revalidated, when the request is conditional:
    /// a `304` then refreshes it instead of failing.
    pub revalidating: Option<Arc<Entry>>,
    /// The side's hooks, if it has any for this request.
    pub verifier: Option<Arc<dyn Verifier>>,
}

/// The head of a body being downloaded.
#[derive(Debug)]
pub struct Head {
    /// Headers worth replaying (see [`kept_headers`]).
    pub headers: Vec<(String, String)>,
    /// The upstream's validators.
    pub validators: Validators,
    /// The upstream's `Content-Length`, when it sent one.
    pub content_length: Option<u64>,
    /// When the head arrived: a `Last-Modified` at least a second older is a
    /// strong validator.
    pub received_at: SystemTime,
    /// The temporary file, read with positioned reads.
    reader: Arc<File>,
    /// The try at the body it heads (see `Progress::attempt`).
    attempt: u32,
}

/// An upstream answer that is passed to the client but not cached (a `404`,
/// a `5xx`, ...). Its body is kept in memory, up to a small limit.
#[derive(Debug)]
pub struct PassedAnswer {
    /// The upstream's status.
    pub status: StatusCode,
    /// The upstream's headers, hop-by-hop ones and `Content-Length` removed.
    pub headers: Vec<(String, String)>,
    /// The upstream's body (truncated at [`PASSED_BODY_LIMIT`]).
    pub body: Bytes,
}

/// The most of a passed-through answer's body that is kept.
pub const PASSED_BODY_LIMIT: usize = 64 * 1024;

/// Where a fetch stands. Waiters watch it change.
#[derive(Debug, Clone)]
pub enum Phase {
    /// The upstream has not answered yet.
    Asking,
    /// A `200` body is being downloaded.
    Streaming(Arc<Head>),
    /// The body is complete and verified, and being committed. The waiters
    /// serve it whole now, through the download's handle: a client waits
    /// for the check, never for the disk's flushes.
    Checked {
        /// The entry the commit writes.
        entry: Arc<Entry>,
        /// The download's handle, which reads the body before and after the
        /// commit moves it.
        body: Arc<File>,
    },
    /// The body is complete, verified and cached.
    Done(Arc<Entry>),
    /// The upstream confirmed the cached entry (`304`); it was refreshed.
    NotModified(Arc<Entry>),
    /// The upstream answered something not cacheable; pass it on.
    Passed(Arc<PassedAnswer>),
    /// The body was complete and verified, but is not cached (the disk had
    /// no room for it, or it is larger than the cache takes): passed
    /// through to the waiters, who read it through the download's handle.
    Uncached {
        /// The download's head, its handle included.
        head: Arc<Head>,
        /// The body's length.
        size: u64,
    },
    /// The fetch failed; nothing was cached.
    Failed(Arc<FetchError>),
}

impl Phase {
    /// Whether the upstream answered with a body for the cache (`200`),
    /// whatever became of it since but failing.
    pub fn is_body(&self) -> bool {
        matches!(self, Phase::Streaming(_) | Phase::Checked { .. } | Phase::Done(_) | Phase::Uncached { .. })
    }

    /// The name used in logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Phase::Asking => "asking",
            Phase::Streaming(_) => "streaming",
            Phase::Checked { .. } => "checked",
            Phase::Done(_) => "done",
            Phase::NotModified(_) => "not-modified",
            Phase::Passed(_) => "passed",
            Phase::Uncached { .. } => "uncached",
            Phase::Failed(_) => "failed",
        }
    }
}

#[derive(Debug, Clone)]
struct Progress {
    phase: Phase,
    /// Body bytes received: written to the temporary file, then held in
    /// the spill if there is one.
    written: u64,
    /// The rest of the body, held in memory, once the disk had no room for
    /// it.
    spill: Option<Arc<Spill>>,
    /// Where the waiters are reading, so a spill keeps what they need.
    readers: Arc<Readers>,
    /// The upstream that answered, once one did.
    answered_by: Option<Arc<str>>,
    /// Which try at the body this is: a body its check refused is asked
    /// of another instance, and what was read of the refused one must
    /// not be taken for the new one's.
    attempt: u32,
}

/// One fetch in progress, shared by its waiters.
#[derive(Debug)]
pub struct Fetch {
    key: String,
    progress: watch::Receiver<Progress>,
}

/// A client's place in a fetch.
#[derive(Debug)]
pub struct Joined {
    /// The shared fetch the client joined.
    pub fetch: Arc<Fetch>,
    /// True for the client whose miss started it.
    pub started: bool,
    /// True for a client that joined once the body was whole and checked
    /// (not yet committed): it is served what pkgproxy holds, a hit.
    pub held: bool,
}

impl Fetch {
    /// Waits until the upstream has answered (or the fetch failed) and
    /// returns where the fetch then stands; never [`Phase::Asking`].
    pub async fn answered(&self) -> Phase {
        self.past(|phase| matches!(phase, Phase::Asking)).await
    }

    /// Waits until the body is checked whole (or the fetch ended
    /// otherwise) and returns where the fetch then stands; never
    /// [`Phase::Asking`] or [`Phase::Streaming`].
    pub async fn checked(&self) -> Phase {
        self.past(|phase| matches!(phase, Phase::Asking | Phase::Streaming(_))).await
    }

    /// Waits until the fetch has ended (done, refreshed, passed on or
    /// failed) and returns how.
    pub async fn finished(&self) -> Phase {
        self.past(|phase| matches!(phase, Phase::Asking | Phase::Streaming(_) | Phase::Checked { .. })).await
    }

    /// The first phase that is not `before`; a fetch whose leader went
    /// while `before` failed.
    async fn past(&self, before: impl Fn(&Phase) -> bool) -> Phase {
        let mut progress = self.progress.clone();
        loop {
            let phase = progress.borrow_and_update().phase.clone();
            if !before(&phase) {
                return phase;
            }
            if progress.changed().await.is_err() {
                let phase = progress.borrow().phase.clone();
                return match before(&phase) {
                    true => Phase::Failed(Arc::new(FetchError::Abandoned)),
                    false => phase,
                };
            }
        }
    }

    /// Waits until the leader is gone: the outcome published, the fetch no
    /// longer registered (a request then finds the committed entry).
    async fn gone(&self) {
        let mut progress = self.progress.clone();
        while progress.changed().await.is_ok() {}
    }

    /// Whether the body is whole and checked now (committed or not).
    fn is_whole(&self) -> bool {
        matches!(self.progress.borrow().phase, Phase::Checked { .. } | Phase::Done(_))
    }

    /// The upstream that answered, once one did.
    pub fn answered_by(&self) -> Option<Arc<str>> {
        self.progress.borrow().answered_by.clone()
    }

    /// Whether the body passes through memory and its start is gone.
    fn lost_its_start(&self) -> bool {
        self.progress.borrow().spill.as_ref().is_some_and(|spill| spill.lost_its_start())
    }

    /// The bytes `start..end` (`end`: to the end of the body) of a body being
    /// downloaded, streamed as they arrive.
    pub fn body(&self, head: &Head, start: u64, end: Option<u64>) -> FetchBody {
        FetchBody::new(self.progress.clone(), Arc::clone(&head.reader), head.attempt, start, end)
    }
}

/// A source that sends `start` and cannot resume.
pub fn once(start: StartFetch) -> Box<dyn Source> {
    Box::new(Once(Mutex::new(Some(start))))
}

/// The registry of fetches in progress.
#[derive(Debug)]
pub struct Fetches {
    store: Arc<Store>,
    inflight: Mutex<HashMap<String, Arc<Fetch>>>,
    /// Told of every commit, once set.
    committed: std::sync::OnceLock<Arc<dyn Committed>>,
}

impl Fetches {
    /// A registry storing into `store`.
    pub fn new(store: Arc<Store>) -> Arc<Self> {
        Arc::new(Fetches { store, inflight: Mutex::new(HashMap::new()), committed: std::sync::OnceLock::new() })
    }

    /// Tells `hook` of every body committed from now on (once: a second
    /// hook is refused).
    pub fn on_commit(&self, hook: Arc<dyn Committed>) -> bool {
        self.committed.set(hook).is_ok()
    }

    /// Joins the fetch of `spec.key` in progress, or starts one with the
    /// source `make` returns (called only then). The fetch runs on its own
    /// task.
    pub fn join(self: &Arc<Self>, spec: FetchSpec, make: impl FnOnce() -> Box<dyn Source>) -> Joined {
        let mut inflight = self.inflight.lock();
        // A fetch passing its body through whose start is gone (the disk
        // was full and the body larger than the spill's window) cannot be
        // joined: this client gets a fetch of its own.
        if let Some(fetch) = inflight.get(&spec.key).filter(|fetch| !fetch.lost_its_start()) {
            return Joined { fetch: Arc::clone(fetch), started: false, held: fetch.is_whole() };
        }
        let readers = Arc::default();
        let (tx, rx) = watch::channel(Progress {
            phase: Phase::Asking,
            written: 0,
            spill: None,
            readers,
            answered_by: None,
            attempt: 0,
        });
        let fetch = Arc::new(Fetch { key: spec.key.clone(), progress: rx });
        inflight.insert(spec.key.clone(), Arc::clone(&fetch));
        drop(inflight);
        let registration = Registration { fetches: Arc::clone(self), fetch: Arc::clone(&fetch) };
        tokio::spawn(leader::lead(Arc::clone(&self.store), spec, make(), tx, registration));
        Joined { fetch, started: true, held: false }
    }

    /// The fetch of `key` in progress, if there is one (nothing is
    /// started).
    pub fn get(&self, key: &str) -> Option<Arc<Fetch>> {
        self.inflight.lock().get(key).cloned()
    }

    /// Waits until every body that is whole now is committed (or failed
    /// to be): what clients were served is then in the index.
    pub async fn settled(&self) {
        if !self.store.commits_pending() {
            return;
        }
        let whole: Vec<Arc<Fetch>> = {
            let inflight = self.inflight.lock();
            inflight.values().filter(|fetch| fetch.is_whole()).cloned().collect()
        };
        for fetch in whole {
            fetch.gone().await;
        }
    }

    /// Waits until `key`'s body, if a fetch has it whole, is committed and
    /// the fetch gone; `true` if it waited.
    pub async fn settled_on(&self, key: &str) -> bool {
        match self.get(key).filter(|fetch| fetch.is_whole()) {
            Some(fetch) => {
                fetch.gone().await;
                true
            }
            None => false,
        }
    }

    /// The entry and the handle of `key`'s body, whole and checked but not
    /// yet committed.
    pub fn whole(&self, key: &str) -> Option<(Arc<Entry>, Arc<File>)> {
        let fetch = self.get(key)?;
        let progress = fetch.progress.borrow();
        match &progress.phase {
            Phase::Checked { entry, body } => Some((Arc::clone(entry), Arc::clone(body))),
            _ => None,
        }
    }

    /// How many fetches are in progress.
    pub fn in_progress(&self) -> usize {
        self.inflight.lock().len()
    }
}

/// Removes a fetch from the registry when its leader ends, however it ends
/// (a panic included), so a dead fetch never captures its key.
struct Registration {
    fetches: Arc<Fetches>,
    fetch: Arc<Fetch>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut inflight = self.fetches.inflight.lock();
        if inflight.get(&self.fetch.key).is_some_and(|f| Arc::ptr_eq(f, &self.fetch)) {
            inflight.remove(&self.fetch.key);
        }
    }
}

/// The response headers a cache entry keeps and replays: those that describe
/// the representation. Validators are kept apart, in [`Validators`].
pub fn kept_headers(headers: &http::HeaderMap) -> Vec<(String, String)> {
    const KEPT: [http::HeaderName; 4] = [
        http::header::CONTENT_TYPE,
        http::header::CONTENT_ENCODING,
        http::header::CONTENT_DISPOSITION,
        http::header::CONTENT_LANGUAGE,
    ];
    KEPT.iter()
        .flat_map(|name| headers.get_all(name).iter().map(move |v| (name, v)))
        .filter_map(|(name, v)| Some((name.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// The validators in response headers.
pub fn validators(headers: &http::HeaderMap) -> Validators {
    let text = |name| headers.get(name).and_then(|v: &http::HeaderValue| v.to_str().ok()).map(str::to_string);
    Validators { etag: text(http::header::ETAG), last_modified: text(http::header::LAST_MODIFIED) }
}

#[cfg(test)]
mod tests;
