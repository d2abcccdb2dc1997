//! The explaining role: where pkgproxy serves an upstream's own URL, as a
//! lockfile names it, and the headers the side's clients ask with: what
//! `pkgproxyctl explain`, `check` and `warm` make of a lockfile's URLs.

use crate::needs::HeldBodies;

/// Where an upstream's own URL is served.
pub trait Explaining: Send + Sync {
    /// Where pkgproxy serves `url`, when it is one of the side's upstreams'
    /// own URLs: on an instance configured, or on the upstream's canonical
    /// host, as a lockfile names it
    /// (`https://registry.npmjs.org/ms/-/ms-2.1.3.tgz`, served at
    /// `/npm/ms/-/ms-2.1.3.tgz`). What only a held body says (a crate's
    /// SHA-256, from its index file) is read in `held`. `None`: not an
    /// upstream URL of this side's. Blocking.
    fn upstream_path(&self, url: &str, held: &dyn HeldBodies) -> Option<UpstreamPath>;

    /// The headers the side's clients send that choose the answer (pip's
    /// and uv's `Accept`, which picks a PyPI page's JSON form): what a
    /// request is explained with.
    fn clients_headers(&self) -> http::HeaderMap {
        http::HeaderMap::new()
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
