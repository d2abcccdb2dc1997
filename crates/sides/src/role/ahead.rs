//! The fetching-ahead role: what a client asks for next, once it has read
//! a body. cargo asks for the index files of a crate's dependencies only
//! once it has read the crate's, one wave of files after another, each
//! wave waiting for its slowest file; fetched ahead, a file's dependencies
//! are on their way while the rest of its wave still is. Never for a
//! client's own credentials: what is fetched ahead is fetched as pkgproxy.

use crate::decision::CachedRequest;

/// What a client asks for next, fetched ahead of it.
pub trait FetchingAhead: Send + Sync {
    /// The largest body of `request` that names what its client asks for
    /// next; `None` for a request whose body names nothing, which is then
    /// not read again.
    fn follow_up_limit(&self, request: &CachedRequest) -> Option<u64>;

    /// What a client that asked for `request` and got `body` asks for
    /// next, fetched ahead of it once `body` is in.
    fn follow_ups(&self, request: &CachedRequest, body: &[u8]) -> Vec<CachedRequest>;
}
