//! What the request path keeps between requests for the kinds of request
//! only some sides make: a registry's Bearer tokens ([`tokens`]), the names
//! pointing at content by digest (one `HEAD` per name, and the names whose
//! upstream asked to be left alone: [`holds`]), the credentials an upstream
//! let read private content ([`grants`]), and the refreshes of
//! generations. Each piece is read only by the module of `proxy/` that
//! serves its kind (`fetching.rs`, `pointer.rs`, `access.rs`,
//! `generation.rs`); the server's state holds them as one field, not one
//! field per mechanism.

pub mod grants;
pub mod holds;
pub mod tokens;

use std::sync::Arc;

use http::{HeaderMap, StatusCode};
use pkgproxy_cache::FetchError;

use crate::failed::Failed;
use crate::single_flight::SingleFlight;

/// What the kinds of request only some sides make keep.
#[derive(Debug, Default)]
pub struct Kept {
    /// Bearer tokens for the upstreams that ask for them.
    pub tokens: tokens::Tokens,
    /// The names pointing at content by digest.
    pub pointers: Pointers,
    /// Which credentials the upstream let read private content, lately.
    pub grants: grants::Grants,
    /// The refreshes of generations in progress, one per root.
    pub generations: SingleFlight<Refreshed>,
}

/// What is kept of the names pointing at content.
#[derive(Debug, Default)]
pub struct Pointers {
    /// The `HEAD`s asking what a name points at now, one per name.
    pub checks: SingleFlight<PointerCheck>,
    /// The names whose upstream asked to be left alone, until when.
    pub holds: holds::Holds,
}

/// What a `HEAD` of a name brought: the upstream's status and headers.
pub type PointerCheck = Result<(StatusCode, HeaderMap), Arc<FetchError>>;

/// How a refresh of a generation ended.
pub type Refreshed = Result<(), Failed>;
