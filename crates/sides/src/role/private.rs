//! The private role: content only some clients may read (a registry
//! repository that needs a login, a cargo registry with `auth-required`, a
//! scoped npm registry with a token). What it says keeps such content from
//! a cluster's peers, from the status page, and from clients the upstream
//! has not let read it.

use crate::decision::CachedRequest;

/// Content only some clients may read.
pub trait Private: Send + Sync {
    /// Whether what is cached under `key` may be handed to anyone who asks
    /// for the key (a peer of a cluster), with no client's credentials
    /// checked: false for what only some clients may read. Blocking.
    fn readable_by_anyone(&self, key: &str) -> bool;

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

    /// The upstream confirmed that `request`'s client may read its content
    /// (or served it to the client's own fetch). Blocking.
    fn granted(&self, _request: &CachedRequest) {}
}
