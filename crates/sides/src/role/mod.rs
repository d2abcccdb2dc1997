//! The roles a side may play beyond its core ([`crate::Side`]): each a
//! small trait of the hooks that must be written together, handed out by
//! [`crate::Side::roles`]. A side writes the roles its ecosystem has and
//! no other; a server module takes the one role it uses, never the whole
//! side. A ninth side that needs a mechanism no side has adds a role here,
//! not a hook on every side's trait.
//!
//! Each role, who plays it and who uses it:
//!
//! | role | played by | used by (in `crates/server` unless said) |
//! |---|---|---|
//! | [`Fetching`] | go, cargo, pypi, npm, maven, rpm | `proxy/cached.rs` (the miss), `proxy/readiness.rs` |
//! | [`Remembering`] | go, registry, cargo, pypi, npm, maven | `proxy/lookup.rs`, `proxy/cached.rs`, `proxy/access.rs`, `proxy/pointer.rs` |
//! | [`FetchingAhead`] | cargo | `proxy/follow.rs` |
//! | [`Rewriting`] | snap, cargo, pypi, npm | `proxy/rewrite.rs` |
//! | [`Private`] | registry, cargo, npm | `proxy/access.rs`, `proxy/peer.rs`, `trouble.rs`, [`crate::Sides::readable_by_anyone`] |
//! | [`Recording`] | snap | `proxy/forward.rs`, `proxy/lookup.rs`, `bundle/` |
//! | [`Generations`] | lxd | `proxy/generation.rs`, `proxy/readiness.rs` |
//! | [`Digests`] | registry | `proxy/pointer.rs`, `proxy/supplied.rs` |
//! | [`Evicting`] | apt, rpm | the cache's eviction ([`crate::Sides`] as `Obsolete`), `control/cache.rs` |
//! | [`Exporting`] | apt, npm | `proxy/readiness.rs` (what a bundle carries) |
//! | [`Resolving`] | apt, snap, registry, lxd, cargo, pypi, npm, rpm | `proxy/needs.rs`, `control/` (a warm's first ask) |
//! | [`Reporting`] | apt, go, registry, cargo, pypi, npm, maven, rpm | `browse/` (the cache's page) |
//! | [`Informing`] | apt, lxd | `report/`, `health.rs`, `control/` (info, metrics, the status page) |
//! | [`Explaining`] | go, cargo, pypi, npm, maven, rpm | `proxy/explain.rs` (a lockfile's upstream URLs) |
//! | [`Forwarding`] | apt, lxd, rpm | [`crate::Sides::owner`], [`crate::Sides::allows_tunnel`] |
//! | [`Gating`] | npm, pypi, cargo, go, maven, rpm | `proxy/gate.rs`, `proxy/ruling.rs` (the fleet's policy) |

pub mod ahead;
pub mod digests;
pub mod evicting;
pub mod explaining;
pub mod exporting;
pub mod fetching;
pub mod forwarding;
pub mod gating;
pub mod generations;
pub mod informing;
pub mod private;
pub mod recording;
pub mod remembering;
pub mod reporting;
pub mod resolving;
pub mod rewriting;

pub use ahead::FetchingAhead;
pub use digests::Digests;
pub use evicting::Evicting;
pub use explaining::{Explaining, UpstreamPath};
pub use exporting::Exporting;
pub use fetching::{Fetching, UpstreamFailures};
pub use forwarding::Forwarding;
pub use gating::{Filtered, Gated, Gating, Judge, Judged, ReleaseName, Times};
pub use generations::Generations;
pub use informing::Informing;
pub use private::Private;
pub use recording::Recording;
pub use remembering::Remembering;
pub use reporting::{Named, Reporting};
pub use resolving::Resolving;
pub use rewriting::{Piece, Pieced, Rewriting, StoredBody, StreamRewriter};

/// The roles one side plays: each `None` unless the side writes it.
#[derive(Clone, Copy, Default)]
pub struct Roles<'a> {
    /// What a miss needs before and around its fetch.
    pub fetching: Option<&'a dyn Fetching>,
    /// Upstream answers kept for a while instead of cached.
    pub remembering: Option<&'a dyn Remembering>,
    /// What a client asks for next, fetched ahead of it.
    pub fetching_ahead: Option<&'a dyn FetchingAhead>,
    /// Bodies made over for each client.
    pub rewriting: Option<&'a dyn Rewriting>,
    /// Content only some clients may read.
    pub private: Option<&'a dyn Private>,
    /// Answers to forwarded requests kept for replay.
    pub recording: Option<&'a dyn Recording>,
    /// Files that are one generation with a root.
    pub generations: Option<&'a dyn Generations>,
    /// Names that point at content by digest.
    pub digests: Option<&'a dyn Digests>,
    /// Entries that can never be served again.
    pub evicting: Option<&'a dyn Evicting>,
    /// What proves a key, carried with it in a bundle.
    pub exporting: Option<&'a dyn Exporting>,
    /// What a build needs, followed in the cache.
    pub resolving: Option<&'a dyn Resolving>,
    /// What the side's keys name, for the cache's page.
    pub reporting: Option<&'a dyn Reporting>,
    /// What the side has learnt, for info, metrics and the status page.
    pub informing: Option<&'a dyn Informing>,
    /// Where an upstream's own URL is served.
    pub explaining: Option<&'a dyn Explaining>,
    /// Forward-proxy requests beyond the route table.
    pub forwarding: Option<&'a dyn Forwarding>,
    /// Releases the fleet's policy judges.
    pub gating: Option<&'a dyn Gating>,
}

impl std::fmt::Debug for Roles<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let played = [
            ("fetching", self.fetching.is_some()),
            ("remembering", self.remembering.is_some()),
            ("fetching_ahead", self.fetching_ahead.is_some()),
            ("rewriting", self.rewriting.is_some()),
            ("private", self.private.is_some()),
            ("recording", self.recording.is_some()),
            ("generations", self.generations.is_some()),
            ("digests", self.digests.is_some()),
            ("evicting", self.evicting.is_some()),
            ("exporting", self.exporting.is_some()),
            ("resolving", self.resolving.is_some()),
            ("reporting", self.reporting.is_some()),
            ("informing", self.informing.is_some()),
            ("explaining", self.explaining.is_some()),
            ("forwarding", self.forwarding.is_some()),
            ("gating", self.gating.is_some()),
        ];
        f.debug_list().entries(played.iter().filter(|(_, on)| *on).map(|(name, _)| name)).finish()
    }
}
