//! What a side decides about a request, and the answers it makes itself.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use pkgproxy_cache::{Class, Expected};

use crate::id::SideId;

/// The target of a forward-proxy request, as the client named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `http` (the only scheme a forward proxy is asked for in clear).
    pub scheme: String,
    /// The host, lower-cased, without brackets for IPv6.
    pub host: String,
    /// The port (defaulted from the scheme).
    pub port: u16,
    /// The path exactly as the client sent it (still percent-encoded).
    pub raw_path: String,
}

/// Where a request is fetched from or forwarded to: a pool of equivalent
/// instances, all serving the same thing under `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The pool's name (in logs and `/pkgproxy/v1/info`).
    pub pool: String,
    /// The instances' base URLs (`http://host[:port][/prefix]`, no trailing
    /// slash), in the configured order.
    pub instances: Vec<String>,
    /// The path (and query) below each base URL, starting with `/`, still
    /// percent-encoded as the client sent it.
    pub path: String,
}

/// A request the side will not serve: the status and the reason the client
/// is told (each side phrases it its own way, see [`crate::Failure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `400` for malformed requests, `403` for targets outside the policy,
    /// `404` for paths the side does not serve, `405` for other methods.
    pub status: StatusCode,
    /// Why, in one English sentence.
    pub reason: String,
    /// For a `405`, the methods the side takes (the `Allow` header).
    pub allow: Option<&'static str>,
    /// The side's own error code, for clients that read one (a registry's
    /// `NAME_INVALID`).
    pub code: Option<&'static str>,
    /// The reason phrase, when not the status's own: what clients that
    /// print the status line alone show (pip, pnpm).
    pub phrase: Option<String>,
}

impl Refusal {
    /// A refusal with `status` and `reason`.
    pub fn new(status: StatusCode, reason: impl Into<String>) -> Self {
        Refusal { status, reason: reason.into(), allow: None, code: None, phrase: None }
    }

    /// `403 Forbidden`: outside the policy.
    pub fn forbidden(reason: impl Into<String>) -> Self {
        Refusal::new(StatusCode::FORBIDDEN, reason)
    }

    /// `400 Bad Request`: malformed.
    pub fn bad_request(reason: impl Into<String>) -> Self {
        Refusal::new(StatusCode::BAD_REQUEST, reason)
    }

    /// `404 Not Found`: not something the side serves.
    pub fn not_found(reason: impl Into<String>) -> Self {
        Refusal::new(StatusCode::NOT_FOUND, reason)
    }

    /// `405 Method Not Allowed`, naming the methods the side takes.
    pub fn method_not_allowed(allow: &'static str) -> Self {
        let reason = format!("only {} are served here", allow.replace(", ", " and "));
        Refusal { status: StatusCode::METHOD_NOT_ALLOWED, reason, allow: Some(allow), code: None, phrase: None }
    }

    /// The refusal, with the side's own error `code`.
    pub fn with_code(self, code: &'static str) -> Self {
        Refusal { code: Some(code), ..self }
    }

    /// The refusal told with `phrase` as its status line's reason phrase.
    pub fn with_phrase(self, phrase: String) -> Self {
        Refusal { phrase: Some(phrase), ..self }
    }
}

/// Whether a `Range` request whose `If-Range` is a date (apt resumes its
/// partial files that way) may be answered with a part of this file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DatedResume {
    /// The name always stands for the same bytes (an apt pool file, a go
    /// module version), so a client's partial file of this name holds these
    /// bytes: the date is honoured when it is a strong validator.
    Honoured,
    /// A client's partial file may hold other bytes: apt keeps an index's
    /// partial under the index's name and resumes it by the next
    /// generation's by-hash URL, and a mirror that syncs within one second
    /// gives both files one date. The whole file is sent instead: these
    /// files are small, and apt starts over cleanly on a `200`.
    #[default]
    WholeFile,
}

/// An answer the side rewrites at serve time, after the cache, for the
/// host the client reached pkgproxy by: the URLs it names (the snap store's
/// downloads, a registry's `dl`) must point at pkgproxy as this client
/// reaches it. The stored bytes stay the upstream's, so no client ever gets
/// another client's rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// Where the client reached pkgproxy.
    pub served_at: ServedAt,
    /// Whether the client moves the upstream's own links onto pkgproxy by
    /// itself (npm re-homes the npm registry's tarballs onto the registry
    /// it is pointed at, and keeps the registry's URLs in its lockfile):
    /// those links are then left as they are.
    pub client_rehomes: bool,
}

impl Rewrite {
    /// For a client reached at `served_at` that re-homes nothing itself.
    pub fn at(served_at: ServedAt) -> Rewrite {
        Rewrite { served_at, client_rehomes: false }
    }
}

/// The entity tag an answer from the cache carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Etag {
    /// The upstream's, when it gave one.
    #[default]
    Upstream,
    /// pkgproxy's own, strong, from the body's SHA-256: a client that
    /// revalidates (cargo, each index file) is answered `304` from the
    /// cache whatever the upstream sends, or strips on the way (corporate
    /// caches drop validators).
    Content,
}

/// Where a client reached pkgproxy: `http://HOST[:PORT]` and the side's
/// mount, from the host the client named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedAt {
    /// The base URL, without a trailing slash.
    pub base: String,
}

/// What a side keeps of a forwarded answer, for replay when the upstream
/// cannot be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// The per-action results of a snap store refresh `POST`, for the
    /// device these request headers name.
    SnapActions(HeaderMap),
}

/// What a cached body must say of itself to answer a request, beyond the
/// checksums the side expects: a body that does not is not served (not
/// even stale) and is fetched again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acceptance {
    /// Any body.
    #[default]
    Any,
    /// A snap assertion of at most this format (snapd names the newest
    /// format it can read; an older snapd cannot read a newer one).
    AssertionFormatAtMost(u32),
}

/// Whether pkgproxy follows the upstream's redirects itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Redirects {
    /// A redirect is passed on to the client, which follows it.
    #[default]
    PassedOn,
    /// pkgproxy follows it (the snap store's redirects carry an expiring
    /// token to its CDN: the client must get the bytes, not the redirect,
    /// and the redirect is never cached).
    Followed,
}

/// How pkgproxy authorises itself upstream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum UpstreamAuth {
    /// It does not: the request goes as it is.
    #[default]
    None,
    /// An OCI registry's Bearer token dance: on a `401` with a Bearer
    /// challenge, pkgproxy fetches a token for `scope` from the challenge's
    /// realm (only on the upstream's own domain), anonymously or with the
    /// upstream's configured `credentials`, keeps it until it expires for
    /// every request of that scope, and asks again once.
    Bearer {
        /// The scope asked for (`repository:library/alpine:pull`).
        scope: String,
        /// The account configured for the upstream, if any.
        credentials: Option<Credentials>,
    },
    /// With the client's own `Authorization`, for content only some
    /// clients may read (a private repository's). Used for this client's
    /// requests only, and never for a token of pkgproxy's.
    Client(ClientAuthorization),
}

/// A client's `Authorization` header, never shown in logs or debug output.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientAuthorization(pub http::HeaderValue);

impl std::fmt::Debug for ClientAuthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = self.0.to_str().ok().and_then(|v| v.split(' ').next()).unwrap_or("");
        write!(f, "ClientAuthorization({scheme} ***)")
    }
}

/// Cached content that not every client may read (a private repository's,
/// or one the upstream has not yet said a name holds): before any of it is
/// served, the upstream confirms that this client may read it (a `HEAD`
/// with the request's [`UpstreamAuth`]), unless it did for the same grant
/// within `lasting`. A fetch this request starts is its own confirmation;
/// one it joins is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// What one confirmation stands for (one credential's pull of one
    /// repository): confirmations are remembered per grant.
    pub grant: String,
    /// How long a confirmation is remembered.
    pub lasting: Duration,
    /// Whether a confirmation, once given, still counts while pkgproxy is
    /// offline (when nothing can be confirmed).
    pub offline: bool,
    /// The side's error code for content the upstream says it does not
    /// hold under this name (`BLOB_UNKNOWN`).
    pub unknown_code: &'static str,
    /// Where the confirmation is asked, when not at the request's own
    /// origin: a tarball's grant is its package's, confirmed with the
    /// registry's document of that package wherever the tarball is.
    pub confirmed_at: Option<Origin>,
}

impl Access {
    /// Confirmed per `grant` at the request's own origin, not offline.
    pub fn new(grant: String, lasting: Duration) -> Access {
        Access { grant, lasting, offline: false, unknown_code: "", confirmed_at: None }
    }
}

/// Where the upstream holds a download, once its prerequisites said
/// (the fetching role's `located`), and whether a client's own credentials go
/// there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Where it is fetched from.
    pub origin: Origin,
    /// Whose host that is.
    pub host: LocatedHost,
}

/// Whose host a located download is on: a client's credentials go only
/// to the origins of the registry they were given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocatedHost {
    /// One of the registry's own origins (a configured mirror, the
    /// registry's canonical host, or where the registry's client itself
    /// sends its token: cargo's `dl`): a client's credentials go along.
    Registry,
    /// Another host a document names: fetched without any credentials.
    Foreign,
}

impl Located {
    /// On one of the registry's own origins.
    pub fn at_registry(origin: Origin) -> Located {
        Located { origin, host: LocatedHost::Registry }
    }

    /// On a host that is not the registry's.
    pub fn foreign(origin: Origin) -> Located {
        Located { origin, host: LocatedHost::Foreign }
    }
}

/// An account's `user:password`, never shown in logs or debug output.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials(pub String);

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user = self.0.split_once(':').map_or("", |(user, _)| user);
        write!(f, "Credentials({user}:***)")
    }
}

/// A name that stands for whichever content the upstream names now (a
/// registry tag): revalidated by a `HEAD` whose answer names the current
/// content's digest in a header; content that changed is fetched by that
/// digest (the digests role's `by_digest`), checked and kept, and only then
/// does the name point at it. Served at its last content, with a warning,
/// when the upstream cannot say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    /// The name as people write it (`docker.io/library/alpine:3.20`), for
    /// the warning.
    pub name: String,
    /// The header of the `HEAD` answer that names the digest.
    pub digest_header: http::HeaderName,
    /// The header of the `HEAD` answer that says how many pulls the quota
    /// has left (`ratelimit-remaining: 20;w=21600`), and the reserve at or
    /// below which new content is not fetched while the name has some.
    pub quota: Option<(http::HeaderName, u64)>,
}

/// A request to serve through the cache. Beside what every request has
/// (its side, key, origin and class), what it asks is split by the phase
/// that reads it, each with a default that asks nothing: a simple side's
/// decision names only what it needs.
#[derive(Debug, Clone)]
pub struct CachedRequest {
    /// The side that decided.
    pub side: SideId,
    /// The cache key: the same for every mirror of one archive.
    pub key: String,
    /// Where to fetch it from.
    pub origin: Origin,
    /// How the cached entry ages.
    pub class: Class,
    /// What a cached body must be to answer it: what the lookup reads.
    pub wanted: Wanted,
    /// How the upstream is asked: what the fetch reads.
    pub asking: Asking,
    /// How the answer is made for the client: what the reply reads.
    pub reply: Reply,
    /// For content not every client may read, how a client's access is
    /// confirmed (boxed: most requests have none).
    pub access: Option<Box<Access>>,
}

/// What a cached body must be to answer a request.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    /// What the body must match. A cached entry that does not match it is
    /// superseded: never served, refetched.
    pub expected: Expected,
    /// What set `expected`, for people (`Release of 2026-12-01 12:03 UTC`):
    /// named when a cached copy is superseded.
    pub expected_from: Option<String>,
    /// How long a revalidated entry is served without asking the upstream
    /// (zero: revalidated at once).
    pub fresh_for: Duration,
    /// What a cached body must say of itself to answer this request.
    pub accepts: Acceptance,
    /// Whether the client's `Cache-Control` (`no-cache`, `max-age`) may
    /// make the upstream be asked before `fresh_for` has passed.
    pub client_cache_control: ClientCacheControl,
}

/// Whether a client's `Cache-Control` asks the upstream sooner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientCacheControl {
    /// Honoured: a client that asks for a fresh copy gets one.
    #[default]
    Honoured,
    /// Not read: the client sends `no-cache` with every request, whatever
    /// it needs (Maven's transport does), and honouring it would ask the
    /// upstream on every build; the side's window decides.
    Ignored,
}

/// How the upstream is asked for a request.
#[derive(Debug, Clone, Default)]
pub struct Asking {
    /// Headers of the client's sent upstream beside pkgproxy's own (snapd's
    /// device headers, which the side put in the key).
    pub headers: HeaderMap,
    /// Whether the upstream's redirects are followed.
    pub redirects: Redirects,
    /// How pkgproxy authorises itself upstream.
    pub auth: UpstreamAuth,
}

/// How the answer to a request is made for its client.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// Whether a client may resume this file by its date.
    pub dated_resume: DatedResume,
    /// How the answer is rewritten at serve time, if it is.
    pub rewrite: Option<Rewrite>,
    /// Headers the side puts on every answer, whether from the cache or
    /// the upstream (a registry's API version).
    pub headers: HeaderMap,
    /// Headers that describe the content itself (a registry's digest), put
    /// only on an answer that carries it (`2xx`, `304`), never on a `404`.
    pub content_headers: HeaderMap,
    /// The entity tag the cached answer carries.
    pub etag: Etag,
    /// What the client gets when nothing cached can answer and the
    /// upstream cannot: an answer the side makes itself (a registry's
    /// `config.json`, a wheel's core metadata read from the held wheel);
    /// `None`: the side's failure answer.
    pub fallback: Option<Arc<dyn Fallback>>,
}

/// An answer a side makes itself when neither the cache nor the upstream
/// can give one, from what it knows or what the cache holds.
pub trait Fallback: Send + Sync + std::fmt::Debug {
    /// The answer, from what `cache` holds; `None`: there is none to give.
    /// Blocking.
    fn answer(&self, cache: &dyn CacheView) -> Option<LocalAnswer>;
}

/// An answer known whole when the request is decided.
impl Fallback for LocalAnswer {
    fn answer(&self, _cache: &dyn CacheView) -> Option<LocalAnswer> {
        Some(self.clone())
    }
}

/// The cache as a side reads it for a request it made itself (a
/// fallback's, a resolver's): what the request would be answered with
/// offline, looked up by the request as it is. Nothing is routed or
/// classified again, so what is read is what the side asked for.
pub trait CacheView {
    /// The body `request` would be answered with offline, opened (read it
    /// with positioned reads: the file may be shared).
    fn open(&self, request: &CachedRequest) -> Option<Arc<std::fs::File>>;

    /// The body `request` would be answered with offline, read whole up
    /// to `limit` bytes.
    fn read(&self, request: &CachedRequest, limit: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let file = self.open(request)?;
        let mut bytes = Vec::new();
        pkgproxy_cache::BodyReader::new(&file).take(limit).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }
}

impl CachedRequest {
    /// A request for `key` of `side`, fetched from `origin`, aging as
    /// `class`, with nothing else asked: no checksum expected, revalidated
    /// at once, any cached body accepted; no headers of the client's sent
    /// upstream, redirects passed on, no authorisation; resumed by date
    /// only as a whole file, no rewrite, no headers added to the answer;
    /// readable by every client.
    pub fn new(side: SideId, key: String, origin: Origin, class: Class) -> CachedRequest {
        CachedRequest {
            side,
            key,
            origin,
            class,
            wanted: Wanted::default(),
            asking: Asking::default(),
            reply: Reply::default(),
            access: None,
        }
    }
}

/// A request for a name that points at content by digest (a registry
/// tag): served through the cache under its own key, revalidated as its
/// [`Pointer`] says.
#[derive(Debug, Clone)]
pub struct PointerRequest {
    /// The name's own request: its key holds the content it points at.
    pub name: CachedRequest,
    /// How the name is revalidated.
    pub pointer: Pointer,
}

/// The client's headers a forwarded request sends upstream: all of them
/// but the connection's own and the encoding it accepts.
pub fn forwarded_headers(client: &HeaderMap) -> HeaderMap {
    const NOT_FORWARDED: [&str; 11] = [
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    ];
    let mut headers = client.clone();
    for name in NOT_FORWARDED {
        headers.remove(name);
    }
    headers.insert(http::header::ACCEPT_ENCODING, http::HeaderValue::from_static("identity"));
    headers
}

/// A request passed to the upstream uncached, its body included: never
/// shared with another client, and never sent twice when its method is not
/// idempotent (see the pool's rules).
#[derive(Debug, Clone)]
pub struct ForwardRequest {
    /// The side that decided.
    pub side: SideId,
    /// Where it goes.
    pub origin: Origin,
    /// The method sent upstream.
    pub method: Method,
    /// The headers sent upstream (the side chooses which of the client's).
    pub headers: HeaderMap,
    /// The largest request body taken, in bytes; a longer one is refused
    /// with `413`.
    pub body_limit: u64,
    /// What is kept of the answer for later replay, if anything.
    pub record: Option<Record>,
    /// How the answer is rewritten for the client, if it is.
    pub rewrite: Option<Rewrite>,
}

/// An answer a side makes itself, without the upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAnswer {
    /// The status the client gets.
    pub status: StatusCode,
    /// Its headers (`Content-Length` is the server's business).
    pub headers: HeaderMap,
    /// The whole body: a local answer is small.
    pub body: Bytes,
    /// The reason phrase, when not the status's own (HTTP/1.1 carries it;
    /// pip and uv print it: `424 Offline (pkgproxy): not held`).
    pub reason: Option<std::borrow::Cow<'static, str>>,
}

impl LocalAnswer {
    /// An answer of `status` with `headers` and `body`.
    pub fn new(status: StatusCode, headers: HeaderMap, body: Bytes) -> Self {
        LocalAnswer { status, headers, body, reason: None }
    }

    /// A plain-text answer: `text` and a newline.
    pub fn text(status: StatusCode, text: &str) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
        LocalAnswer::new(status, headers, Bytes::from(format!("{text}\n")))
    }

    /// A JSON answer with `body`, typed exactly `application/json`: no
    /// parameters (snapd reads error bodies only under that type).
    pub fn json(status: StatusCode, body: impl Into<Bytes>) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        LocalAnswer::new(status, headers, body.into())
    }

    /// The same answer saying `reason` in its status line.
    pub fn because(self, reason: &'static str) -> Self {
        LocalAnswer { reason: Some(std::borrow::Cow::Borrowed(reason)), ..self }
    }
}

/// A request served from a generation: a file that is one unit with the
/// files it names (a simplestreams index and its products files). After
/// the root's `fresh_for` the root and every file it names
/// (the generations role's `members`) are fetched again together, the side checks
/// them as one (its `adopt`), and they replace the previous
/// generation in one commit: a client never gets a root that names a file
/// pkgproxy does not hold. While the upstream cannot be asked, the last
/// generation is served.
#[derive(Debug, Clone)]
pub struct GenerationRequest {
    /// The root: its key, where it is fetched, how long it is fresh.
    pub root: CachedRequest,
    /// What the client is served once the generation is current.
    pub serve: Member,
}

/// What a request of a generation is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    /// The entry under this key: the root, or a file it names.
    Key(String),
    /// The request, decided again: a file the generation may name, asked
    /// for before pkgproxy has read the root (through the forward proxy).
    DecidedAgain,
}

/// A side's verdict on a request.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Refuse it.
    Refuse(Refusal),
    /// Serve it through the cache (boxed: most of a decision's size).
    Cache(Box<CachedRequest>),
    /// Serve a name that points at content by digest, revalidated by
    /// asking which content it names now.
    Pointer(Box<PointerRequest>),
    /// Serve it from a generation, brought up to date first.
    Generation(Box<GenerationRequest>),
    /// Pass it to the upstream, uncached.
    Forward(ForwardRequest),
    /// Answer it without the upstream.
    Answer(LocalAnswer),
}

impl Decision {
    /// Serve `request` through the cache.
    pub fn cache(request: CachedRequest) -> Decision {
        Decision::Cache(Box::new(request))
    }

    /// The request whose cache entry answers this decision: a request to
    /// cache, or a name's own. `None` for the others.
    pub fn into_cached(self) -> Option<CachedRequest> {
        match self {
            Decision::Cache(request) => Some(*request),
            Decision::Pointer(pointer) => Some(pointer.name),
            Decision::Refuse(_) | Decision::Generation(_) | Decision::Forward(_) | Decision::Answer(_) => None,
        }
    }
}

/// What tests of the sides take a decision apart with.
#[cfg(test)]
pub(crate) mod expect {
    use super::{CachedRequest, Decision, ForwardRequest, PointerRequest, Refusal};

    /// The request to cache, or the test fails.
    pub fn cached(decision: Decision) -> CachedRequest {
        match decision {
            Decision::Cache(request) => *request,
            other => panic!("not cached: {other:?}"),
        }
    }

    /// The request for a name that points at content, or the test fails.
    pub fn named(decision: Decision) -> PointerRequest {
        match decision {
            Decision::Pointer(request) => *request,
            other => panic!("not a name: {other:?}"),
        }
    }

    /// The refusal, or the test fails.
    pub fn refused(decision: Decision) -> Refusal {
        match decision {
            Decision::Refuse(refusal) => refusal,
            other => panic!("not refused: {other:?}"),
        }
    }

    /// The request to forward, or the test fails.
    pub fn forwarded(decision: Decision) -> ForwardRequest {
        match decision {
            Decision::Forward(request) => request,
            other => panic!("not forwarded: {other:?}"),
        }
    }
}

#[cfg(test)]
mod forwarded_tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn a_forwarded_request_loses_the_connection_s_headers_and_asks_for_identity() {
        let mut client = HeaderMap::new();
        for (name, value) in [("host", "p:3142"), ("connection", "close"), ("accept-encoding", "gzip"), ("x-a", "1")] {
            client.append(name, HeaderValue::from_static(value));
        }
        let sent = forwarded_headers(&client);
        assert!(!sent.contains_key("host") && !sent.contains_key("connection"));
        assert_eq!((sent["accept-encoding"].to_str().unwrap(), sent["x-a"].to_str().unwrap()), ("identity", "1"));
    }
}
