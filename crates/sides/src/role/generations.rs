//! The generations role: files that are only true together (a
//! simplestreams index and the products files it names), refreshed and
//! adopted as one generation so that a client never reads an index from one
//! and a products file from another.

use bytes::Bytes;

use crate::decision::CachedRequest;

/// Files that are one generation with a root.
pub trait Generations: Send + Sync {
    /// The files that are one generation with `root`, whose body is
    /// `body`.
    fn members(&self, root: &CachedRequest, body: &[u8]) -> Result<Vec<CachedRequest>, String>;

    /// Checks a new generation of `root` (its body and its members' with
    /// theirs) and makes it the side's; `Err` keeps the previous one.
    /// Blocking.
    fn adopt(&self, root: &CachedRequest, body: &[u8], members: &[(CachedRequest, Bytes)]) -> Result<(), String>;
}
