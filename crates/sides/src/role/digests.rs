//! The digests role: names that point at content by digest (a registry's
//! tags), whose content is then fetched and kept by the digest, once.

use crate::decision::CachedRequest;

/// Names that point at content by digest.
pub trait Digests: Send + Sync {
    /// The request for the content `digest` that `request`, a
    /// [`crate::Pointer`]'s name, now points at; `None` when the digest is
    /// not one the side can fetch (the name is then fetched as it is).
    fn by_digest(&self, request: &CachedRequest, digest: &str) -> Option<CachedRequest>;
}
