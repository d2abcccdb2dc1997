//! The gating role: sides whose registries say when each release was
//! published (npm's document `time`, PyPI's `upload-time`, the crates
//! index's `pubtime`, a go version's `.info`), so that the fleet's policy
//! can hold back what is too fresh, past a freeze date or known to be
//! malicious. The side says what a request is of and reads the times and
//! listings of its ecosystem; the request path judges (`proxy/gate.rs`).
//!
//! Listings are filtered when they are served, from what is cached, so a
//! rule's change applies at once, online and offline; the stored bytes stay
//! the upstream's.

use std::collections::HashMap;
use std::time::SystemTime;

use bytes::Bytes;

use crate::decision::CachedRequest;

/// Publish times, by what the side times its releases by (a version; a
/// file's name on PyPI, where each file has its own upload).
pub type Times = HashMap<String, SystemTime>;

/// What the policy judges in requests, and how.
pub trait Gating: Send + Sync {
    /// What the policy judges of `request`: one release's artifact, a
    /// listing of releases, or (`None`) nothing: the side's other files,
    /// and everything of a registry configured with `policy = false`.
    fn gated(&self, request: &CachedRequest) -> Option<Gated>;

    /// The publish times `body`, the answer to `source` (an artifact's
    /// [`Gated::Artifact::times_from`]), gives.
    fn times(&self, source: &CachedRequest, body: &[u8]) -> Times;

    /// A request a client would make for one artifact of `name` at
    /// `version` (the name as people write it; the side puts it in its
    /// normal form) on the side's first upstream (the public registry, not
    /// one beside it): npm's tarball, a wheel or sdist, a `.crate`, a go
    /// version's `.zip`. `pkgproxyctl policy why` judges that request as
    /// the request path would ([`Gating::gated`], then the times its
    /// `times_from` gives), so what it says is what a client would be
    /// told. It names the file by the side's layout alone and fetches
    /// nothing. Where each file of a release is timed by its own upload
    /// (PyPI), the side picks the file that stands for the release (its
    /// sdist, say) and documents which. `None` when the side cannot name
    /// an artifact of that release (a name or version it cannot spell).
    fn release_request(&self, name: &str, version: &str) -> Option<CachedRequest>;

    /// `body`, the listing `request` asked for, as a client is served it
    /// under the policy `judge` applies: every release it does not serve
    /// taken out (tags that named one re-pointed).
    fn filtered(&self, request: &CachedRequest, body: &[u8], judge: &mut dyn Judge) -> Filtered;
}

/// A listing, as the policy lets a client have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filtered {
    /// Served as stored: it names no release the policy refuses.
    AsStored,
    /// Served as this body: what the policy refuses taken out.
    Rewritten(Bytes),
    /// Not served: it names one release and no other, which the policy
    /// refuses, and nothing it serves can stand in (go's `@latest` when no
    /// listed version is served). The line that release was refused with
    /// ([`Judged::Blocked`]): answered `403` as an artifact of it is, for
    /// a client reads a missing answer as "ask elsewhere" (the go command
    /// then tries the next proxy, or says only that nothing matched).
    Refused(String),
}

impl From<Option<Bytes>> for Filtered {
    /// A rewritten body, or (`None`) the stored one.
    fn from(body: Option<Bytes>) -> Filtered {
        body.map_or(Filtered::AsStored, Filtered::Rewritten)
    }
}

/// What a request is, to the policy.
#[derive(Debug, Clone)]
pub enum Gated {
    /// One release's file (a tarball, wheel, `.crate`, a go version's
    /// files): served whole, or refused.
    Artifact {
        /// The release.
        release: ReleaseName,
        /// The metadata that says when it was published, fetched through
        /// the cache for pkgproxy when it is not held.
        times_from: Box<CachedRequest>,
    },
    /// A listing of releases: filtered.
    Listing,
}

/// A release as its side names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseName {
    /// Its package, in the ecosystem's normal form.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What its time goes by in [`Times`]: the version, or on PyPI the
    /// file's name.
    pub timed_as: String,
}

/// What the policy says of one release, for a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// Served.
    Served,
    /// Not served: the line that says why (`npm:x@1.0.1 is blocked by
    /// policy: ...`).
    Blocked(String),
}

impl Judged {
    /// Whether the release is served.
    pub fn serves(&self) -> bool {
        matches!(self, Judged::Served)
    }
}

/// The policy, as a side's listing filter asks it.
pub trait Judge {
    /// Whether a rule in force reads publish times: without one, a side
    /// fetches nothing to learn them.
    fn needs_times(&self) -> bool;

    /// What the policy says of `name` at `version`, published `published`
    /// (`None`: not known).
    fn judge(&mut self, name: &str, version: &str, published: Option<SystemTime>) -> Judged;

    /// The bodies of `requests` (metadata giving times a listing does not
    /// itself: each listed go version's `.info`, a PyPI project's JSON
    /// page), fetched through the cache for pkgproxy, in order; `None`
    /// where one could not be had as a `200`.
    fn fetch(&mut self, requests: Vec<CachedRequest>) -> Vec<Option<Bytes>>;
}
