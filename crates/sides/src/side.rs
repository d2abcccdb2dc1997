//! The seam between the request path and the sides: the [`Side`] trait,
//! which each side's folder implements, writing only the hooks it needs
//! ([`crate::Sides`] holds them all; the route table,
//! [`crate::route::ROUTES`], says where each is mounted).
//!
//! The hooks, in the order a request meets them:
//!
//! 1. [`Side::classify`]: before anything else, for every request routed to
//!    the side, whatever its method: what to do with it ([`Decision`]).
//!    Quick: it runs on every cache hit, on the runtime's thread. It opens
//!    no socket, but may read the cache (what a registry side linked).
//! 2. [`Side::remembered`]: before the cache lookup, a "not found" the side
//!    remembers for the key (the go command probes parent paths).
//! 3. [`Side::prerequisites`], then [`Side::located`] and
//!    [`Side::verifier`]: on a miss, before the fetch starts, what must be
//!    fetched first (through the cache) to find or check the download,
//!    where it is, and the checks themselves. Never on a hit.
//! 4. [`Side::remember`]: after an upstream's answer was passed on, not
//!    cached (go remembers a `404` or `410`; the registry, that a
//!    repository needs credentials). [`Side::granted`]: for a request with
//!    an [`crate::Access`], once the upstream confirmed the client may read
//!    the content, or served it to the fetch this request started.
//! 5. For a forwarded request that asks for a [`crate::Record`]:
//!    [`Side::record`] with a successful answer, or [`Side::replay`] when
//!    the upstream cannot be asked (offline, its breaker open) or fails.
//! 6. [`Side::rewrite`] (or [`Side::streaming_rewrite`], for bodies too
//!    large to hold): after the cache (or the forward, or the replay), at
//!    serve time, for every answer of a request that asks for one.
//! 7. [`Side::failure_answer`]: how the side's clients are told that
//!    pkgproxy cannot serve the request (refused, offline, overloaded,
//!    upstream failed).
//!
//! Outside the request path: [`Side::upstream_path`] with
//! [`Side::clients_headers`] (what `pkgproxyctl explain` makes of an
//! upstream's own URL, and asks with), [`Side::tunnels_to`] (the `CONNECT` policy),
//! [`Side::learned`] (what the side shows in info and metrics),
//! [`Side::reporting`] (the role naming what its keys hold, for the page
//! listing the cache), and
//! [`Side::needs`] with [`Side::needs_first`] (what `pkgproxyctl check`
//! and `warm` follow in the cache, from what the side's
//! [`crate::needs::NeedsReader`] read of a build's files).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use pkgproxy_cache::{PassedAnswer, Verifier};

use crate::decision::{Acceptance, CachedRequest, Decision, LocalAnswer, Located, Record, Rewrite, Target};
use crate::failure::Failure;
use crate::id::SideId;
use crate::learned::Learned;
use crate::needs::{FirstAsk, HeldBodies, Needs, NeedsError};
use crate::route::Request;

/// A side at run time: its configuration and what it has learnt. A side
/// writes [`Side::id`] and [`Side::classify`]; every other hook has a
/// default that does nothing (or says "not this side's"), so a side writes
/// only the hooks it needs.
pub trait Side: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Which side this is.
    fn id(&self) -> SideId;

    /// What to do with `request`.
    fn classify(&self, request: &Request<'_>) -> Decision;

    /// An upstream answer remembered for `request` at `now` (`frozen`:
    /// offline, time stands still): the go side's "not found", a
    /// registry's refusal of pkgproxy's own token.
    fn remembered(&self, _request: &CachedRequest, _now: Instant, _frozen: bool) -> Option<Arc<PassedAnswer>> {
        None
    }

    /// The upstream answered `request` with `answer`, passed on, at `now`.
    fn remember(&self, _request: &CachedRequest, _answer: &Arc<PassedAnswer>, _now: Instant) {}

    /// The upstream confirmed that `request`'s client may read its content
    /// (or served it to the client's own fetch). Blocking.
    fn granted(&self, _request: &CachedRequest) {}

    /// The entries under `keys` were removed by hand (`pkgproxyctl cache
    /// rm`): what the side held about them is dropped too. Blocking.
    fn removed(&self, _keys: &[String]) {}

    /// What must be fetched, through the cache and in this order, before
    /// `request` can be checked; a fetch that does not end in a `200` ends
    /// the list.
    fn prerequisites(&self, _request: &CachedRequest) -> Vec<CachedRequest> {
        Vec::new()
    }

    /// The largest body of `request` that names what its client asks for
    /// next ([`Side::follow_ups`]); `None` for a request whose body names
    /// nothing, which is then not read again.
    fn follow_up_limit(&self, _request: &CachedRequest) -> Option<u64> {
        None
    }

    /// What a client that asked for `request` and got `body` asks for
    /// next, fetched ahead of it once `body` is in: cargo asks for the
    /// index files of a crate's dependencies only once it has read the
    /// crate's, one wave of files after another, each wave waiting for its
    /// slowest file. Fetched ahead, a file's dependencies are on their way
    /// while the rest of its wave still is. Never for a client's own
    /// credentials: what is fetched ahead is fetched as pkgproxy.
    fn follow_ups(&self, _request: &CachedRequest, _body: &[u8]) -> Vec<CachedRequest> {
        Vec::new()
    }

    /// Where the upstream holds `request`'s content when only its
    /// prerequisites' bodies say (a crate's download URL, from its
    /// registry's `config.json`), and whether a client's credentials go
    /// there; `None` keeps the origin decided.
    fn located(&self, _request: &CachedRequest, _prerequisites: &[Bytes]) -> Option<Located> {
        None
    }

    /// The checks of a fetch of `request`, given the bodies of its
    /// prerequisites that were had (in order, stopping at the first that
    /// was not). `None`: the upstream's bytes are kept as they come.
    fn verifier(&self, _request: &CachedRequest, _prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        None
    }

    /// The request a client makes for what is cached under `key`, as the
    /// request path takes it (`http://HOST/...` for apt, `/go/...`), with
    /// its rank among the side's files: what proves others (a `Release`, a
    /// checksum database record, a tag) ranks before them. `None` for keys
    /// no request reads as they are (what is reached through a link or an
    /// index generation, records of answers). A bundle of the whole cache
    /// is made of these.
    fn client_url(&self, _key: &str) -> Option<(u8, String)> {
        None
    }

    /// Whether what is cached under `key` may be handed to anyone who asks
    /// for the key (a peer of a cluster), with no client's credentials
    /// checked: false for what only some clients may read. Blocking.
    fn readable_by_anyone(&self, _key: &str) -> bool {
        true
    }

    /// What the side tells of its cache keys, for the page listing what
    /// pkgproxy holds: the reporting role, if the side has it.
    fn reporting(&self) -> Option<&dyn crate::reporting::Reporting> {
        None
    }

    /// Whether a request for `path` (below the side's mount, as the
    /// client sent it, with its `query`) is served from a space only some
    /// clients may read, whoever asks (a registry repository pkgproxy
    /// pulls with its own account, a registry that requires a login): its
    /// path is then never shown to other clients (the status page's
    /// recent trouble). A request that carries a client's credentials is
    /// kept from them whatever this says.
    fn serves_privately(&self, _path: &str, _query: Option<&str>) -> bool {
        false
    }

    /// The cache keys of what proves what is cached under `key`, beyond
    /// its prerequisites: what a bundle carries before it so that taking
    /// it in checks it (a pool file: its archive's Releases and `Packages`
    /// indexes). Only what the cache holds is carried.
    fn proving_keys(&self, _key: &str) -> Vec<String> {
        Vec::new()
    }

    /// Where the side keeps the answers it records for replay (the prefix
    /// of their keys), if it records any.
    fn record_prefix(&self) -> Option<&'static str> {
        None
    }

    /// The requests (paths below the side's mount) whose answers the
    /// recorded answers under `keys` name: what a bundle carries with them.
    fn named_by_records(&self, _keys: &[String]) -> Vec<String> {
        Vec::new()
    }

    /// Keeps `body`, which another pkgproxy recorded under `key` (an answer
    /// replayed offline, carried in a bundle), once the side has read it
    /// as one. Blocking.
    fn take_record(&self, _key: &str, _body: &[u8]) -> Result<(), String> {
        Err("this side keeps no records of answers".to_owned())
    }

    /// The request for the content `digest` that `request`, a
    /// [`crate::Pointer`]'s name, now points at; `None` when the digest is
    /// not one the side can fetch (the name is then fetched as it is).
    fn by_digest(&self, _request: &CachedRequest, _digest: &str) -> Option<CachedRequest> {
        None
    }

    /// The files that are one generation with `root`, whose body is
    /// `body` (a simplestreams index's products files).
    fn members(&self, _root: &CachedRequest, _body: &[u8]) -> Result<Vec<CachedRequest>, String> {
        Ok(Vec::new())
    }

    /// Checks a new generation of `root` (its body and its members' with
    /// theirs) and makes it the side's; `Err` keeps the previous one.
    /// Blocking.
    fn adopt(&self, _root: &CachedRequest, _body: &[u8], _members: &[(CachedRequest, Bytes)]) -> Result<(), String> {
        Ok(())
    }

    /// Whether a cached body starting with `head` answers a request that
    /// `accepts` it (a snap assertion no newer than the client reads).
    fn accepts(&self, accepts: Acceptance, _head: &[u8]) -> bool {
        accepts == Acceptance::Any
    }

    /// Keeps what `record` asks for of a forwarded request whose body was
    /// `sent` and whose successful answer is `answer`. Blocking.
    fn record(&self, _record: &Record, _sent: &[u8], _answer: &[u8]) {}

    /// The answer to a forwarded request whose body was `sent`, from what
    /// `record` kept, when the upstream could not answer as `failure` says;
    /// `None`: nothing to replay, the failure stands. Blocking.
    fn replay(&self, _record: &Record, _sent: &[u8], _failure: &Failure<'_>) -> Option<LocalAnswer> {
        None
    }

    /// `body`, an answer to a request that asked for `rewrite`, as this
    /// client is to get it; `None`: as it is.
    fn rewrite(&self, _rewrite: &Rewrite, _body: &[u8]) -> Option<Bytes> {
        None
    }

    /// For answers too large to hold whole (npm's documents run to tens
    /// of megabytes, asked by a hundred clients at once): a rewrite made
    /// as the body streams to the client, in place of [`Side::rewrite`].
    fn streaming_rewrite(&self, _rewrite: &Rewrite) -> Option<Box<dyn StreamRewriter>> {
        None
    }

    /// For a client that takes gzip: the held body `stored`, served
    /// compressed and rewritten as `rewrite` says, from a compressed form
    /// the side keeps of it (npm's documents: a hundred clients of one are
    /// then sent the stored form, not each a compression of its own).
    /// `None`: served as [`Side::streaming_rewrite`] says (the side may be
    /// making that form meanwhile).
    fn compressed(&self, _rewrite: &Rewrite, _stored: &StoredBody) -> Option<Pieced> {
        None
    }

    /// Whether an upstream's `5xx` for what is not held is a failure, told
    /// by [`Side::failure_answer`], rather than passed on as it came: an
    /// installer that retries a `5xx` for minutes and reads a `4xx` as
    /// final (cargo, pip, uv, npm) is better told at once that it cannot
    /// be had now.
    fn upstream_errors_fail(&self) -> bool {
        false
    }

    /// Whether an upstream's answer for what is not held that asks to be
    /// left alone (a `429`, a `503` with `Retry-After`) is told by
    /// [`Side::failure_answer`] as [`Failure::Overloaded`], rather than
    /// passed on: pip sleeps a `Retry-After` before each of its five
    /// retries, and is better told at once.
    fn upstream_waits_fail(&self) -> bool {
        false
    }

    /// How the side's clients are told of `failure`.
    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        failure.plain_text()
    }

    /// Whether the side's clients may open a blind tunnel to `host`.
    fn tunnels_to(&self, _host: &str) -> bool {
        false
    }

    /// Whether the side serves a forward-proxy request for `target` that
    /// the route table gave another side (the image files an LXD daemon
    /// sends through its proxy).
    fn claims(&self, _target: &Target) -> bool {
        false
    }

    /// The key prefixes under which entries may be superseded for good
    /// (an apt index file a newer Release replaced): eviction looks there
    /// first.
    fn superseded_prefixes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the entry under `key` can never be served again.
    fn superseded(&self, _key: &str, _entry: &pkgproxy_cache::Entry) -> bool {
        false
    }

    /// What the side has learnt, for info and metrics.
    fn learned(&self) -> Vec<Learned> {
        Vec::new()
    }

    /// The names clients add pkgproxy under, one per upstream the side
    /// mounts by name (LXD's remotes): what `pkgproxyctl setup` and the
    /// status page name.
    fn remote_names(&self) -> Vec<String> {
        Vec::new()
    }

    /// What the side serves offline only until a time before `by` (a
    /// suite whose `Release` expires), with that time: what info and the
    /// status page warn of.
    fn expiring(&self, _by: SystemTime) -> Vec<(String, SystemTime)> {
        Vec::new()
    }

    /// What a build needs of this side, from `asked` (what its reader
    /// left the daemon to follow, [`Asked::Resolve`](crate::needs::Asked)),
    /// followed in what `held` holds: an install's packages in the held
    /// indexes, an image's blobs in its held manifest. Blocking.
    fn needs(&self, _asked: serde_json::Value, _held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        Err(NeedsError::new(format!("the {} side has nothing to follow for a check", self.id())))
    }

    /// For a warm: the request to make through the side's own path before
    /// [`Side::needs`] follows `asked` (a snap's store answer, which only
    /// the store can give).
    fn needs_first(&self, _asked: &serde_json::Value) -> Result<Option<FirstAsk>, NeedsError> {
        Ok(None)
    }

    /// Where pkgproxy serves `url`, when it is one of the side's upstreams'
    /// own URLs: on an instance configured, or on the upstream's canonical
    /// host, as a lockfile names it
    /// (`https://registry.npmjs.org/ms/-/ms-2.1.3.tgz`, served at
    /// `/npm/ms/-/ms-2.1.3.tgz`). What only a held body says (a crate's
    /// SHA-256, from its index file) is read in `held`. `None`: not an
    /// upstream URL of this side's. Blocking.
    fn upstream_path(&self, _url: &str, _held: &dyn HeldBodies) -> Option<UpstreamPath> {
        None
    }

    /// The headers the side's clients send that choose the answer (pip's
    /// and uv's `Accept`, which picks a PyPI page's JSON form): what a
    /// request is explained with.
    fn clients_headers(&self) -> http::HeaderMap {
        http::HeaderMap::new()
    }

    /// How the side's clients are pointed at pkgproxy at `host`
    /// (`HOST:PORT`, as the reader reached it): what the status page shows
    /// a person to copy.
    fn client_setup(&self, _host: &str) -> Option<ClientSetup> {
        None
    }
}

/// pkgproxy's path for an upstream's own URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamPath {
    /// At this path of pkgproxy's (`/npm/ms/-/ms-2.1.3.tgz`).
    At(String),
    /// At a path that names what only a body pkgproxy does not hold says
    /// (a crate's SHA-256, without its index file): why it cannot be told.
    Unknown(String),
}

/// A rewrite of a body as it streams to one client: bytes in, bytes out,
/// holding no more than it must.
pub trait StreamRewriter: Send + std::fmt::Debug {
    /// Takes the next bytes of the body, `input`, appending what the client
    /// gets of them to `output`.
    fn feed(&mut self, input: &[u8], output: &mut Vec<u8>);

    /// The body ended: appends what is still held to `output`.
    fn finish(&mut self, output: &mut Vec<u8>);
}

/// A held body, whole, as the cache serves it.
#[derive(Debug, Clone)]
pub struct StoredBody {
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
    /// Its length.
    pub size: u64,
    /// Its file (read it with positioned reads: the file is shared).
    pub file: Arc<std::fs::File>,
}

/// A body sent as ranges of a file with bytes in between, each made as it
/// is sent.
pub struct Pieced {
    /// The file the ranges are of.
    pub file: Arc<std::fs::File>,
    /// The body's whole length.
    pub len: u64,
    /// Its content coding (`gzip`).
    pub encoding: &'static str,
    /// Its pieces, in order.
    pub pieces: Box<dyn Iterator<Item = Piece> + Send>,
}

impl std::fmt::Debug for Pieced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieced").field("len", &self.len).field("encoding", &self.encoding).finish_non_exhaustive()
    }
}

/// A piece of a [`Pieced`] body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// `len` bytes of the file from `offset`.
    File {
        /// Where they start.
        offset: u64,
        /// How many.
        len: u64,
    },
    /// Bytes of their own.
    Bytes(Bytes),
}

/// How a side's clients are pointed at pkgproxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSetup {
    /// The clients, for people (`apt, apt-get`, `Docker, containerd`).
    pub clients: String,
    /// Lines to copy: a configuration line, an environment variable, a
    /// command.
    pub lines: Vec<String>,
}
