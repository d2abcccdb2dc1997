//! The fetching role: what a miss needs around its fetch, beyond the
//! checks every side gives ([`crate::Side::verifier`]). Played by the sides
//! whose downloads are proven by another file (go's checksum database
//! record, a registry's manifest, a crate's index line, a project's page,
//! a package's document), and used by the server's miss path alone.

use bytes::Bytes;

use crate::decision::{CachedRequest, Located};

/// What a miss needs before and around its fetch.
pub trait Fetching: Send + Sync {
    /// What must be fetched, through the cache and in this order, before
    /// `request` can be checked; a fetch that does not end in a `200` ends
    /// the list. Never asked on a hit.
    fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest>;

    /// Whether the prerequisites are alternatives, each had or not on its
    /// own (a Maven file's checksums: the strongest published wins): all
    /// are asked at once, and the check is given every one's body in
    /// order, an empty one for each not had as a `200`.
    fn prerequisites_independent(&self) -> bool {
        false
    }

    /// Where the upstream holds `request`'s content when only its
    /// prerequisites' bodies say (a crate's download URL, from its
    /// registry's `config.json`), and whether a client's credentials go
    /// there; `None` keeps the origin decided.
    fn located(&self, _request: &CachedRequest, _prerequisites: &[Bytes]) -> Option<Located> {
        None
    }

    /// How an upstream's failure for what is not held is told.
    fn upstream_failures(&self) -> UpstreamFailures {
        UpstreamFailures::PASSED_ON
    }
}

/// How an upstream's failing answer for what is not held reaches the
/// side's clients: passed on as it came, or told by the side's
/// [`crate::Side::failure_answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamFailures {
    /// An upstream's `5xx` is a failure, told by the side: an installer
    /// that retries a `5xx` for minutes and reads a `4xx` as final (cargo,
    /// pip, uv, npm) is better told at once that it cannot be had now.
    pub errors_fail: bool,
    /// An upstream's answer that asks to be left alone (a `429`, a `503`
    /// with `Retry-After`) is told as [`crate::Failure::Overloaded`]: pip
    /// sleeps a `Retry-After` before each of its five retries, and is
    /// better told at once.
    pub waits_fail: bool,
}

impl UpstreamFailures {
    /// Every upstream answer passed on as it came.
    pub const PASSED_ON: UpstreamFailures = UpstreamFailures { errors_fail: false, waits_fail: false };
}
