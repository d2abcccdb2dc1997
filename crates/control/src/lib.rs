//! What pkgproxy's control sockets say (`stats.sock`, read-only, and
//! `admin.sock`, read-write: HTTP/1.1 with JSON bodies): the paths, the
//! messages (serialized by the daemon and read back by `pkgproxyctl` and
//! the tests from these same types, so a renamed field cannot silently turn
//! into a zero or a question mark), and the client that asks.

#![forbid(unsafe_code)]

mod browse;
mod client;
mod messages;
mod policy;

pub use browse::{Browse, BrowsePackage, BrowseSide, BrowseVersion, TopClient, TopPackage};
pub use client::{ControlClient, ControlError};
pub use messages::{
    utc_minute, CacheEntry, CacheStatus, CacheVerified, ClientSetup, ClusterInfo, ErrorAnswer, Explanation,
    ExportRequest, Imported, Info, InstanceInfo, ItemReadiness, ModeRequest, NeededItem, Needs, NeedsRequest,
    OfflineInfo, OfflineReport, PoolInfo, ReadinessRequest, RecentTrouble, Removed, ShadowInfo, SideStatus, Status,
    StatusOffline, SuiteValidity, UpstreamReport, VerifyProgress, VALIDITY_WARNED_WITHIN,
};
pub use messages::{Traffic, TrafficSeries};
pub use policy::{BlockedCount, BlockedRelease, PolicyReport, PolicyWhy, StatusPolicy, POLICY_WHY_QUERY};

/// `POST` (admin socket): read the configuration again and take it; `422`
/// with an [`ErrorAnswer`] when it cannot be used (the one in use stays).
pub const RELOAD_PATH: &str = "/pkgproxy/v1/reload";
/// `GET ?url=URL` (either socket): what pkgproxy would do for a `GET` of
/// URL now, and why, without doing it ([`Explanation`]).
pub const EXPLAIN_PATH: &str = "/pkgproxy/v1/explain";
/// `POST` a [`ReadinessRequest`] (either socket): whether each request
/// would be answered with the network gone, a list of [`ItemReadiness`].
pub const CHECK_PATH: &str = "/pkgproxy/v1/check";
/// `POST` a [`NeedsRequest`] to this followed by a side's name (either
/// socket; a warm, the admin socket): what the build needs of that side,
/// found in what pkgproxy holds ([`Needs`]).
pub const NEEDS_PATH: &str = "/pkgproxy/v1/needs/";
/// `POST` a [`ReadinessRequest`] (admin socket): each request fetched
/// through the daemon unless it is ready, a list of [`ItemReadiness`].
pub const WARM_PATH: &str = "/pkgproxy/v1/warm";
/// `POST` an [`ExportRequest`] (either socket): a bundle of what those
/// requests need, a tar stream; `409` with an [`ErrorAnswer`] naming what
/// is not held, before anything is written.
pub const EXPORT_PATH: &str = "/pkgproxy/v1/export";
/// `POST` a bundle, a tar stream (admin socket): each item checked as a
/// fetch is and taken into the cache, those refused counted and named
/// ([`Imported`]); `422` with an [`ErrorAnswer`] for a bundle that cannot
/// be read, or is not signed by a trusted key.
pub const IMPORT_PATH: &str = "/pkgproxy/v1/import";
/// The query parameter of [`IMPORT_PATH`] (`=true`) that takes a bundle
/// unsigned, or signed by a key not trusted.
pub const IMPORT_TRUST_UNSIGNED: &str = "trust-unsigned";
/// `GET` (either socket): the fleet's policy in force and what it
/// refused ([`PolicyReport`]).
pub const POLICY_PATH: &str = "/pkgproxy/v1/policy";
/// `GET ?side=S&name=N&version=V` (either socket): whether that release is
/// served now, and why ([`PolicyWhy`]); its publish time is learnt as a
/// client's request of it would learn it (fetched through the cache when
/// not held).
pub const POLICY_WHY_PATH: &str = "/pkgproxy/v1/policy/why";
/// `GET` on the proxy listener: its TLS certificate, PEM, for clients to pin.
pub const CERTIFICATE_PATH: &str = "/pkgproxy/v1/certificate.pem";
/// `GET` on the proxy listener: what its status page shows ([`Status`]).
pub const STATUS_PATH: &str = "/pkgproxy/v1/status";
/// `GET` on the proxy listener: the page listing what the cache holds
/// (`?q=` narrows it to names holding the text).
pub const BROWSE_PATH: &str = "/cache/";
/// `GET` on the proxy listener: the cache's page as JSON ([`Browse`];
/// `?q=` as the page's).
pub const BROWSE_JSON_PATH: &str = "/pkgproxy/v1/cache";
/// `GET` on the proxy listener: `200` when pkgproxy can serve, `503` with
/// the reason when it cannot; the offline mode in either body.
pub const HEALTH_PATH: &str = "/pkgproxy/v1/health";
/// `GET`: the daemon's version, cache, counters and state ([`Info`]).
pub const INFO_PATH: &str = "/pkgproxy/v1/info";
/// `GET` the offline mode, `PUT` a new one (admin socket): [`OfflineReport`].
pub const OFFLINE_PATH: &str = "/pkgproxy/v1/offline";
/// `GET`: the counters of [`INFO_PATH`] in Prometheus' text format.
pub const METRICS_PATH: &str = "/metrics";
/// The cache's entries: `GET` lists them (`?side=S&pattern=P`), `DELETE`
/// removes those matching `?pattern=P` (admin socket).
pub const CACHE_ENTRIES_PATH: &str = "/pkgproxy/v1/cache/entries";
/// `POST`: evict now, down to the low-water mark (admin socket).
pub const CACHE_GC_PATH: &str = "/pkgproxy/v1/cache/gc";
/// `POST`: read every blob back and repair what is wrong (admin socket);
/// `GET`: how far the one running is ([`VerifyProgress`], either socket).
pub const CACHE_VERIFY_PATH: &str = "/pkgproxy/v1/cache/verify";
/// What the body of a `PUT` to [`OFFLINE_PATH`] from the snap's configure
/// hook says in `from`.
pub const FROM_CONFIGURE_HOOK: &str = "configure-hook";
