//! The remembering role: upstream answers a side keeps for a while instead
//! of caching them (go's "not found" for the parent paths the go command
//! probes, a registry's refusal of pkgproxy's own token). Asked before
//! every cache lookup and told of every answer passed on, so both hooks
//! are written together.

use std::sync::Arc;
use std::time::Instant;

use pkgproxy_cache::PassedAnswer;

use crate::decision::CachedRequest;

/// Upstream answers kept for a while.
pub trait Remembering: Send + Sync {
    /// An upstream answer remembered for `request` at `now` (`frozen`:
    /// offline, time stands still).
    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>>;

    /// The upstream answered `request` with `answer`, passed on, at `now`.
    fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: Instant);
}
