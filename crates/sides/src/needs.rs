//! What a build needs of a side, for `pkgproxyctl check`, `warm` and
//! `export`: the side's reader turns the build's own files (a `go.sum`,
//! apt's sources, image references) into the requests its clients will
//! make, or into what only the daemon can follow further ([`Asked`]); the
//! side's `needs` (its resolving role) then follows it in what the
//! cache holds (the packages an install pulls in, the blobs a manifest
//! names). Readers run in `pkgproxyctl`, where the files are; resolvers in
//! the daemon, where the cache is.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use crate::decision::CacheView;
pub use pkgproxy_control::{NeededItem, Needs};

/// Why a build's files or a resolver's input could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NeedsError(pub String);

impl NeedsError {
    /// `what` could not be read: `why`.
    pub fn new(why: impl Into<String>) -> NeedsError {
        NeedsError(why.into())
    }
}

/// What a side's reader made of the build's files.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// The requests, known from the files alone (a `go.sum` names them).
    Known(Needs),
    /// What the daemon follows in what it holds, as the side's resolver
    /// reads it.
    Resolve(serde_json::Value),
}

/// A side's reader of a build's files: the arguments `pkgproxyctl check
/// SIDE ...` takes, and what it makes of them. Runs in `pkgproxyctl`.
pub trait NeedsReader: Sync {
    /// The subcommand (`check SIDE ARGS`): its name is the side's, its
    /// arguments and help the side's.
    fn command(&self) -> clap::Command;

    /// What the arguments `matches` ask, reading the files they name.
    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError>;
}

/// The cache as a resolver reads it. What the side asks for itself it
/// reads by its request ([`CacheView`]); what a user names by URL (a
/// sources list's indexes, an image's manifests) by that URL, routed and
/// classified as a client's `GET` of it would be.
pub trait HeldBodies: CacheView {
    /// The body a `GET` of `url` (as a client asks pkgproxy for it) would
    /// be answered with offline, read whole up to `limit` bytes.
    fn body(&self, url: &str, limit: u64) -> Option<Vec<u8>>;

    /// The stored bytes of sha256 `sha256` (hex) and `size`, whatever name
    /// they were fetched under.
    fn open_sha256(&self, sha256: &str, size: u64) -> Option<Arc<std::fs::File>>;

    /// The time now, as the cache's freshness reads it.
    fn now(&self) -> SystemTime;

    /// Whether whoever asked for the search is gone (its connection
    /// closed): what it finds would reach nobody, so a search that reads
    /// much checks between steps and stops.
    fn abandoned(&self) -> bool {
        false
    }
}

/// A request a warm makes through the side's own path before resolving:
/// what only an upstream answer names (a snap's download), asked as a
/// client would, and read back for what the upstream refused.
pub struct FirstAsk {
    /// Its path below the side's mount.
    pub path: &'static str,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body (a `POST`).
    pub body: Bytes,
    /// What the answer says was refused, by item, or why it said nothing.
    pub refusals: Refusals,
}

/// Reads an upstream's answer (its status and body) for what it refused,
/// by item, or why it said nothing.
pub type Refusals = Box<dyn FnOnce(StatusCode, &[u8]) -> Vec<String> + Send>;

/// The architecture of this machine as Debian names it (`amd64`), as dpkg
/// says; `amd64` when it cannot.
pub fn machine_architecture() -> String {
    let asked = std::process::Command::new("dpkg").arg("--print-architecture").output();
    let said = asked.ok().filter(|output| output.status.success()).map(|output| output.stdout);
    let said = said.map(|out| String::from_utf8_lossy(&out).trim().to_owned()).filter(|arch| !arch.is_empty());
    said.unwrap_or_else(|| "amd64".to_owned())
}

/// The file at `path`, read as text.
pub fn read_file(path: &std::path::Path) -> Result<String, NeedsError> {
    std::fs::read_to_string(path).map_err(|error| NeedsError::new(format!("read {}: {error}", path.display())))
}

/// What the lock at `path` asks, as `read` makes of its text, for the
/// daemon to follow; an error names the file.
pub fn read_lock<T: serde::Serialize>(
    path: &std::path::Path,
    read: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Asked, NeedsError> {
    let text = read_file(path)?;
    let lock = read(&text).map_err(|why| NeedsError::new(format!("{}: {why}", path.display())))?;
    resolve(&lock)
}

/// `asked`, the reader's output, as the resolver's type.
pub fn parse<T: serde::de::DeserializeOwned>(asked: serde_json::Value) -> Result<T, NeedsError> {
    serde_json::from_value(asked).map_err(|error| NeedsError::new(format!("not what this side reads: {error}")))
}

/// `asked`, the resolver's input, as the reader sends it.
pub fn resolve<T: serde::Serialize>(asked: &T) -> Result<Asked, NeedsError> {
    serde_json::to_value(asked).map(Asked::Resolve).map_err(|error| NeedsError::new(error.to_string()))
}

/// The arguments `matches` as the reader's own type.
pub fn arguments<T: clap::FromArgMatches>(matches: &clap::ArgMatches) -> Result<T, NeedsError> {
    T::from_arg_matches(matches).map_err(|error| NeedsError::new(error.to_string()))
}
