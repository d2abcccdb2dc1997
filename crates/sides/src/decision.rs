//! What a side decides about a request.

use pkgproxy_cache::{Class, Expected};

/// The client ecosystems pkgproxy serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// apt, as a forward proxy.
    Apt,
    /// The go command, as a module proxy under `/go`.
    Go,
}

impl Side {
    /// Every side, in the order stats list them.
    pub const ALL: [Side; 2] = [Side::Apt, Side::Go];

    /// The name used in logs, metrics and cache keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Apt => "apt",
            Side::Go => "go",
        }
    }
}

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

impl Target {
    /// The absolute URI to ask the upstream with. Built only on a miss, not
    /// for every hit.
    pub fn uri(&self) -> Option<http::Uri> {
        let port = if self.port == 80 { String::new() } else { format!(":{}", self.port) };
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("{}://{host}{port}{}", self.scheme, self.raw_path).parse().ok()
    }
}

/// Where a cached request is fetched from: a pool of equivalent instances,
/// all serving the same file under `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The pool's name (in logs and `/pkgproxy/v1/info`).
    pub pool: String,
    /// The instances' base URLs (`http://host[:port][/prefix]`, no trailing
    /// slash), in the configured order.
    pub instances: Vec<String>,
    /// The path below each base URL, starting with `/`, still
    /// percent-encoded as the client sent it.
    pub path: String,
}

/// A request the side will not serve, with the status and the plain-text
/// reason the client gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `400` for malformed requests, `403` for targets outside the policy.
    pub status: u16,
    /// Why, in one English sentence.
    pub reason: String,
}

impl Refusal {
    /// A `403 Forbidden` with `reason`.
    pub fn forbidden(reason: impl Into<String>) -> Self {
        Refusal { status: 403, reason: reason.into() }
    }

    /// A `400 Bad Request` with `reason`.
    pub fn bad_request(reason: impl Into<String>) -> Self {
        Refusal { status: 400, reason: reason.into() }
    }
}

/// A request to serve through the cache.
#[derive(Debug, Clone)]
pub struct CachedRequest {
    /// The side that decided.
    pub side: Side,
    /// The cache key: the same for every mirror of one archive.
    pub key: String,
    /// Where to fetch it from.
    pub origin: Origin,
    /// How the cached entry ages.
    pub class: Class,
    /// What the body must match. A cached entry that does not match it is
    /// superseded: never served, refetched.
    pub expected: Expected,
    /// Whether a client may resume this file by its date.
    pub dated_resume: DatedResume,
}

/// Whether a `Range` request whose `If-Range` is a date (apt resumes its
/// partial files that way) may be answered with a part of this file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    WholeFile,
}

/// A side's verdict on a request.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Refuse it.
    Refuse(Refusal),
    /// Serve it through the cache.
    Cache(CachedRequest),
}
