//! The sides: one folder per client ecosystem (apt, go, snap, the registry,
//! LXD, cargo, PyPI and npm), each reading its section of the configuration
//! ([`SidesFile`]) and turning a request into a [`Decision`]:
//! refuse it, serve it through the cache under a key with a freshness class
//! and what the body must match, forward it uncached, or answer it. Sides
//! open no sockets: the server carries out their decisions. What a side
//! learns from what passes through (the apt index of `Release` and
//! `Packages` sums, go's remembered "not found" answers) it keeps itself.
//!
//! A side also knows its clients from outside the request path: how each
//! is pointed at pkgproxy ([`setup`], for `pkgproxyctl setup`), and how a
//! build's files name what it will ask for ([`needs`], for `pkgproxyctl
//! check` and `warm`).
//!
//! [`Side`] is the seam the request path calls (its module doc lists the
//! hooks and where each runs); [`route::ROUTES`] says where each side is
//! mounted. A new side is its folder (implementing [`Side`], writing only
//! the hooks it needs, and [`Configures`] for its configuration), its
//! variant of [`SideId`], its entry in the list of sides (`sides.rs`:
//! [`configure`] of its configuration, its reader of a build's files and
//! its clients' setups), and one line of the route table.

#![forbid(unsafe_code)]

pub mod accept;
pub mod apt;
pub mod cargo;
mod config;
mod decision;
mod failure;
pub mod go;
mod id;
pub mod instances;
pub mod json;
mod learned;
pub mod lxd;
pub mod maven;
mod named;
pub mod needs;
pub mod npm;
pub mod path;
pub mod pypi;
pub mod raw_object;
pub mod registry;
mod remembered;
pub mod role;
pub mod route;
pub mod rpm;
pub mod setup;
mod sha1_check;
mod side;
mod sides;
pub mod snap;
/// A side that exists only to show what adding one takes: built with the
/// `toy` feature, by its test alone.
#[cfg(feature = "toy")]
#[path = "../tests/toy/mod.rs"]
pub mod toy;

pub use config::{configure, unknown_key, ConfigError, Configures, OpenError, SectionError, SideConfig, SidesFile};
pub use decision::{
    Acceptance, Access, Asking, CacheView, CachedRequest, ClientAuthorization, ClientCacheControl, Credentials,
    DatedResume, Decision, Etag, Fallback, ForwardRequest, GenerationRequest, LocalAnswer, Located, LocatedHost,
    Member, Origin, Pointer, PointerRequest, Record, Redirects, Refusal, Reply, Rewrite, ServedAt, Target,
    UpstreamAuth, Wanted,
};
pub use failure::{retry_after_secs, Failure};
pub use id::{every_client, SideId};
pub use learned::Learned;
pub use role::{Piece, Pieced, Roles, StoredBody, StreamRewriter, UpstreamPath};
pub use route::{Mount, Request, Route};
pub use side::{ClientSetup, Side};
pub use sides::{needs_readers, setup_clients, Sides, SidesConfig};
