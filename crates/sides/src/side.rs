//! The seam between the request path and the sides: the [`Side`] trait,
//! which each side's folder implements. Its core is what every side has;
//! everything else is a role ([`crate::role`]) the side hands out through
//! [`Side::roles`], and a server module takes only the role it uses.
//!
//! The core, in the order a request meets it:
//!
//! 1. [`Side::classify`]: before anything else, for every request routed to
//!    the side, whatever its method: what to do with it ([`Decision`]).
//!    Quick: it runs on every cache hit, on the runtime's thread. It opens
//!    no socket, but may read the cache (what a registry side linked).
//! 2. [`Side::verifier`]: on a miss, before the fetch starts, the checks of
//!    the download (`proxy/cached.rs`), given what the fetching role's
//!    prerequisites brought. Never on a hit.
//! 3. [`Side::failure_answer`]: how the side's clients are told that
//!    pkgproxy cannot serve the request (refused, offline, overloaded,
//!    upstream failed): `proxy/outcome.rs`, `proxy/access.rs`.
//!
//! Outside the request path: [`Side::client_url`] (the request a client
//! makes for a key: bundles, `check` and `warm`), [`Side::client_setup`]
//! (what the status page shows a person to copy) and [`Side::roles`].

use std::sync::Arc;

use bytes::Bytes;
use pkgproxy_cache::Verifier;

use crate::decision::{CachedRequest, Decision, LocalAnswer};
use crate::failure::Failure;
use crate::id::SideId;
use crate::role::Roles;
use crate::route::Request;

/// A side at run time: its configuration and what it has learnt. A side
/// writes [`Side::id`] and [`Side::classify`]; every other hook has a
/// default that does nothing, and [`Side::roles`] hands out the roles it
/// plays (none by default).
pub trait Side: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Which side this is.
    fn id(&self) -> SideId;

    /// What to do with `request`.
    fn classify(&self, request: &Request<'_>) -> Decision;

    /// The checks of a fetch of `request`, given the bodies of its
    /// prerequisites that were had (in order, stopping at the first that
    /// was not). `None`: the upstream's bytes are kept as they come.
    fn verifier(&self, _request: &CachedRequest, _prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        None
    }

    /// The request a client makes for what is cached under `key`, as the
    /// request path takes it (`http://HOST/...` for apt, `/go/...`), with
    /// its rank among the side's files: what proves others (a `Release`, a
    /// checksum database record, a tag) ranks before them. `None` for keys
    /// no request reads as they are (what is reached through a link or an
    /// index generation, records of answers). A bundle of the whole cache
    /// is made of these.
    fn client_url(&self, _key: &str) -> Option<(u8, String)> {
        None
    }

    /// How the side's clients are pointed at pkgproxy at `host`
    /// (`HOST:PORT`, as the reader reached it): what the status page shows
    /// a person to copy.
    fn client_setup(&self, _host: &str) -> Option<ClientSetup> {
        None
    }

    /// How the side's clients are told of `failure`.
    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        failure.plain_text()
    }

    /// The roles the side plays: `Roles { fetching: Some(self),
    /// ..Roles::default() }` for a side that writes [`crate::role::Fetching`].
    fn roles(&self) -> Roles<'_> {
        Roles::default()
    }
}

/// How a side's clients are pointed at pkgproxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSetup {
    /// The clients, for people (`apt, apt-get`, `Docker, containerd`).
    pub clients: String,
    /// Lines to copy: a configuration line, an environment variable, a
    /// command.
    pub lines: Vec<String>,
}
