//! The messages of the control sockets.

use std::collections::BTreeMap;

use pkgproxy_metrics::{
    AccessLogCounter, CacheGauge, ClientCounter, HistogramsSnapshot, ShadowCounter, SideCounter, Snapshot, Timing,
    UpstreamCounter,
};
use serde::{Deserialize, Serialize};

/// The answer of `GET /pkgproxy/v1/info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// pkgproxy's version.
    pub version: String,
    /// The commit pkgproxy was built from, when its build was told
    /// (`PKGPROXY_COMMIT`); `unknown` otherwise.
    #[serde(default)]
    pub commit: String,
    /// Seconds since the daemon started.
    pub uptime_seconds: u64,
    /// The proxy listener's address.
    pub listen_address: String,
    /// The cache directory.
    pub cache_dir: String,
    /// What the cache holds.
    pub cache: Snapshot<CacheGauge>,
    /// Each side's counters of its clients' requests, by side name.
    pub sides: BTreeMap<String, Snapshot<SideCounter>>,
    /// Each side's counters of the requests pkgproxy made of its own cache
    /// (`check`, `warm`, fetch-ahead, prerequisites, bundles), by side name:
    /// apart, so that the clients' hits and bytes are theirs alone.
    #[serde(default)]
    pub own_requests: BTreeMap<String, Snapshot<SideCounter>>,
    /// Each side's timings (its clients' requests, its upstream requests),
    /// by side name.
    #[serde(default)]
    pub timings: BTreeMap<String, HistogramsSnapshot<Timing>>,
    /// What went out through the one way out.
    pub upstream: Snapshot<UpstreamCounter>,
    /// The upstream pools used so far and their instances' state.
    pub pools: Vec<PoolInfo>,
    /// The shadows (`[mirror.NAME]`: copies of the traffic) and what they
    /// did.
    pub mirrors: Vec<ShadowInfo>,
    /// The offline mode and the upstreams whose breaker is not closed.
    pub offline: OfflineInfo,
    /// The LXD side's remotes, each served at `/lxd/NAME/`.
    #[serde(default)]
    pub lxd_remotes: Vec<String>,
    /// The proxy listener's TLS certificate (PEM), for clients to pin.
    #[serde(default)]
    pub certificate_pem: String,
    /// What the sides have learnt, by group (`apt_index`) and count
    /// (`pool_files`), each group a key of its own at the top level.
    /// The access log's lines written and dropped.
    #[serde(default)]
    pub access_log: Snapshot<AccessLogCounter>,
    /// The proxy listener's client connections: admitted, refused, timed out.
    #[serde(default)]
    pub clients: Snapshot<ClientCounter>,
    /// Client connections open now.
    #[serde(default)]
    pub connections_open: u64,
    /// This node's part in a cluster, when it is in one.
    #[serde(default)]
    pub cluster: Option<ClusterInfo>,
    /// apt suites whose Release expires within a day, or has.
    #[serde(default)]
    pub apt_valid_until: Vec<SuiteValidity>,
    /// Requests the fleet's policy refused, by side and rule.
    #[serde(default)]
    pub policy_blocked: Vec<crate::BlockedCount>,
    #[serde(flatten)]
    pub learned: BTreeMap<String, BTreeMap<String, u64>>,
}

/// One cached entry, as `pkgproxyctl cache ls` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// Its cache key.
    pub key: String,
    /// The side that keeps it (the key's first part).
    pub side: String,
    /// Its body's size.
    pub size: u64,
    /// When it was last used or fetched (seconds since the Unix epoch).
    pub last_use: u64,
    /// How it ages: `immutable` or `revalidated`.
    pub class: String,
}

/// What `pkgproxyctl cache verify` found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CacheVerified {
    /// Blobs read back.
    pub checked: usize,
    /// Blobs missing or not matching their name.
    pub bad: usize,
    /// Entries dropped because their blob was bad (fetched again when asked).
    pub entries_removed: usize,
    /// Blobs no entry named, deleted.
    pub orphans_removed: usize,
    /// Stale temporary files deleted.
    pub temps_removed: usize,
    /// Bytes freed on disk.
    pub bytes_freed: u64,
}

/// How far the verify in progress is (`GET` on the verify endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VerifyProgress {
    /// Whether a verify is running.
    pub running: bool,
    /// Blobs read back so far.
    pub checked: usize,
    /// Bytes read back so far.
    pub bytes_read: u64,
    /// Bytes of every blob named when it started.
    pub bytes_total: u64,
}

/// What a removal or an eviction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Removed {
    /// Entries removed.
    pub entries: usize,
    /// Bytes freed on disk.
    pub bytes: u64,
}

/// The offline part of [`Info`] (read-only here; the admin socket changes
/// it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfflineInfo {
    /// The mode in effect: `never`, `offline` or `store-overloaded`.
    pub mode: String,
    /// The hosts whose breaker is not closed.
    pub upstreams: Vec<UpstreamReport>,
}

/// One upstream pool in [`Info`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolInfo {
    /// The pool's name (an apt archive, `go`).
    pub name: String,
    /// Its instances, in the configured order.
    pub instances: Vec<InstanceInfo>,
}

/// One instance of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceInfo {
    /// Its base URL.
    pub url: String,
    /// `healthy` or `penalised`.
    pub state: String,
    /// For a penalised instance, milliseconds until it is tried again.
    pub penalised_for_ms: Option<u64>,
    /// Failures in a row.
    pub failures: u32,
    /// Requests in flight (bodies streaming included).
    pub in_flight: u32,
}

/// One shadow in [`Info`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowInfo {
    /// Its name, `NAME` of `[mirror.NAME]`.
    pub name: String,
    /// Where its copies go.
    pub target: String,
    /// What it did.
    #[serde(flatten)]
    pub counters: Snapshot<ShadowCounter>,
    /// Copies under way now.
    pub in_flight: u64,
}

impl ShadowInfo {
    /// The value of one of its counters.
    pub fn get(&self, counter: ShadowCounter) -> u64 {
        self.counters.get(counter)
    }
}

/// A host whose breaker is not closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamReport {
    /// The host (breakers are per host, whatever the port).
    pub host: String,
    /// `open` or `probing`.
    pub state: String,
    /// Seconds until the probe, while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

/// The answer of `/pkgproxy/v1/offline`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfflineReport {
    /// The mode in effect.
    pub mode: String,
    /// The hosts whose breaker is not closed.
    pub upstreams: Vec<UpstreamReport>,
    /// The mode pkgproxy will start in after a restart.
    pub restart_mode: String,
    /// True when a run-time switch survives a restart.
    pub persistent: bool,
    /// What puts offline mode in effect automatically, spelt as the flag.
    pub auto_offline: String,
    /// While auto-offline is in effect: the configured mode it overrides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configured_mode: Option<String>,
    /// While auto-offline is in effect: why (`no-network`, `airplane-mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why saving the mode failed (the mode applies anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist_error: Option<String>,
}

/// The body of a `PUT /pkgproxy/v1/offline`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeRequest {
    /// `never`, `offline` or `store-overloaded`.
    pub mode: String,
    /// [`crate::FROM_CONFIGURE_HOOK`] when the snap's configure hook
    /// re-applies the setting: an auto-offline override then stays in
    /// effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Set it for every node of the cluster (kept in the cluster's store,
    /// which every node reads).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster: bool,
}

/// The body of every control answer that is not a success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorAnswer {
    /// Why, in one sentence.
    pub error: String,
}

/// What the status page shows, and only that (`GET /pkgproxy/v1/status` on
/// the proxy listener, open to every client of the proxy): no credentials,
/// no paths of the machine, nothing only the admin socket tells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// pkgproxy's version.
    pub version: String,
    /// Seconds since start.
    pub uptime_seconds: u64,
    /// The offline mode in effect, and why when auto-offline set it.
    pub offline: StatusOffline,
    /// Each side's traffic, in the route table's order.
    pub sides: Vec<SideStatus>,
    /// The cache against its limits.
    pub cache: CacheStatus,
    /// Each upstream pool's instances (their URLs without user information).
    pub pools: Vec<PoolInfo>,
    /// The traffic mirrors: name, target (without user information) and counters.
    pub mirrors: Vec<ShadowInfo>,
    /// How each client is pointed at this pkgproxy, by the host and port
    /// the request for this status named.
    pub setup: Vec<ClientSetup>,
    /// The names of the LXD remotes (`/lxd/NAME/`).
    #[serde(default)]
    pub lxd_remotes: Vec<String>,
    /// This node's part in a cluster, when it is in one.
    #[serde(default)]
    pub cluster: Option<ClusterInfo>,
    /// apt suites whose Release expires within a day, or has.
    #[serde(default)]
    pub apt_valid_until: Vec<SuiteValidity>,
    /// The last refusals and failed answers, newest first.
    #[serde(default)]
    pub recent_trouble: Vec<RecentTrouble>,
    /// The fleet's policy, when one is in force: its rules and the last
    /// releases it refused.
    #[serde(default)]
    pub policy: Option<crate::StatusPolicy>,
}

/// A refusal or a failed answer, as the status page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentTrouble {
    /// When (Unix seconds).
    pub at: u64,
    /// The side that answered, if one did.
    pub side: Option<String>,
    /// The answer's status.
    pub status: u16,
    /// What was asked, where that names nothing private.
    pub path: Option<String>,
    /// Why (the answer's `X-Pkgproxy-Reason`).
    pub reason: String,
}

/// One side's traffic in one stretch of time (a minute, a quarter hour).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traffic {
    /// Requests.
    pub requests: u64,
    /// Answered from the cache.
    pub hits: u64,
    /// Answered from an upstream.
    pub misses: u64,
    /// Refused (by policy, or because pkgproxy was offline).
    #[serde(default)]
    pub refused: u64,
    /// Answered with a `5xx`.
    pub failed: u64,
    /// Body bytes sent from the cache.
    #[serde(default)]
    pub bytes_from_cache: u64,
    /// Body bytes received from upstreams.
    #[serde(default)]
    pub bytes_from_upstream: u64,
}

/// One side's traffic over a span, in equal stretches, oldest first: the
/// last one is the stretch under way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficSeries {
    /// When the first stretch began (Unix seconds).
    pub start: u64,
    /// How long each stretch is, in seconds.
    pub step_seconds: u64,
    /// Each stretch's traffic.
    pub stretches: Vec<Traffic>,
}

/// A node of a cluster and its shared tier (`[cluster]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// This node's name.
    pub node: String,
    /// The store's endpoint.
    pub endpoint: String,
    /// The bucket the nodes share.
    pub bucket: String,
    /// `connected`, or `degraded` while the node works alone (the store
    /// is unreachable or failed its last operation).
    pub state: String,
    /// Fetches answered from the shared tier.
    pub shared_hits: u64,
    /// Bodies this node published.
    pub published: u64,
    /// Bodies read from the store that did not match their hash (removed).
    pub corrupt: u64,
    /// Operations the store failed.
    pub errors: u64,
}

/// The offline mode as the status page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusOffline {
    /// `online`, `offline` or `local`.
    pub mode: String,
    /// Why auto-offline put the mode in effect, when it did.
    pub reason: Option<String>,
    /// When the mode was put in effect (Unix seconds), if it changed
    /// since the start.
    #[serde(default)]
    pub since: Option<u64>,
    /// The upstream hosts whose breaker is not closed.
    pub upstreams: Vec<UpstreamReport>,
}

/// One side's traffic since start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideStatus {
    /// The side's name (`apt`, `go`, ...).
    pub name: String,
    /// Requests it served through the cache or forwarded.
    pub requests: u64,
    /// Answered from the cache.
    pub hits: u64,
    /// Answered from an upstream.
    pub misses: u64,
    /// Hits over hits and misses; none before the first of either.
    pub hit_ratio: Option<f64>,
    /// Body bytes sent from the cache: what the upstreams did not send.
    pub bytes_saved: u64,
    /// Body bytes received from upstreams.
    pub bytes_fetched: u64,
    /// Requests refused by the side's policy.
    #[serde(default)]
    pub refused: u64,
    /// Requests answered with a `5xx` (the upstream failed, nothing cached
    /// would do).
    #[serde(default)]
    pub failed: u64,
    /// The last hour, minute by minute.
    #[serde(default)]
    pub last_hour: TrafficSeries,
    /// The last day, by quarter hours, kept across restarts.
    #[serde(default)]
    pub last_day: TrafficSeries,
}

/// The cache against its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStatus {
    /// Entries held.
    pub entries: u64,
    /// Bytes of their bodies.
    pub size_bytes: u64,
    /// The configured `max_size`, if any.
    pub max_size_bytes: Option<u64>,
    /// Free space on the cache's file system.
    pub free_bytes: u64,
    /// Bytes the cache takes on disk (its bodies, each blob once, and its
    /// index), as `info` and `/metrics` count them.
    pub disk_bytes: u64,
    /// The size of the cache's file system.
    #[serde(default)]
    pub filesystem_bytes: u64,
}

/// How one side's clients are pointed at pkgproxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientSetup {
    /// The side (`apt`, `go`, ...).
    pub side: String,
    /// The clients, for people (`apt`, `Docker`, ...).
    pub clients: String,
    /// Lines to copy: a configuration line, an environment variable, a command.
    pub lines: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_for_people_are_to_the_minute_in_utc() {
        assert_eq!(utc_minute(1_800_000_000), "2027-01-15 08:00 UTC");
    }

    #[test]
    fn info_keeps_learned_groups_at_the_top_level_and_reads_back() {
        let mut learned = BTreeMap::new();
        learned.insert("apt_index".to_string(), BTreeMap::from([("pool_files".to_string(), 7)]));
        let info = Info {
            version: "1".into(),
            commit: "abc".into(),
            uptime_seconds: 2,
            listen_address: "[::]:3142".into(),
            cache_dir: "/c".into(),
            cache: Snapshot::default(),
            sides: BTreeMap::from([("apt".to_string(), Snapshot::default())]),
            own_requests: BTreeMap::new(),
            timings: BTreeMap::from([("apt".to_string(), HistogramsSnapshot::default())]),
            upstream: Snapshot::default(),
            pools: vec![],
            mirrors: vec![ShadowInfo {
                name: "m".into(),
                target: "http://t".into(),
                counters: Snapshot::default(),
                in_flight: 1,
            }],
            offline: OfflineInfo { mode: "never".into(), upstreams: vec![] },
            access_log: Snapshot::default(),
            clients: Snapshot::default(),
            connections_open: 0,
            cluster: None,
            apt_valid_until: Vec::new(),
            policy_blocked: Vec::new(),
            lxd_remotes: vec!["ubuntu".into()],
            certificate_pem: String::new(),
            learned,
        };
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["apt_index"]["pool_files"], 7);
        assert_eq!(json["sides"]["apt"]["hits"], 0);
        assert_eq!(json["mirrors"][0]["sent"], 0);
        assert_eq!(json["upstream"]["mirror_requests"], 0);
        assert_eq!(json["timings"]["apt"]["request_duration_seconds"]["count"], 0);
        let back: Info = serde_json::from_value(json).unwrap();
        assert_eq!(back, info);
    }
}

/// What pkgproxy would do for a `GET` of a URL now, and why: what the
/// answer's `X-Pkgproxy-Cache` and `X-Pkgproxy-Reason` would say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    /// The URL asked about: absolute for apt's forward proxy
    /// (`http://deb.debian.org/debian/...`), or a path of pkgproxy's own
    /// (`/go/...`).
    pub url: String,
    /// The side that serves it, if one does.
    pub side: Option<String>,
    /// pkgproxy's own path for it, when the URL asked about is an
    /// upstream's (`https://registry.npmjs.org/ms/-/ms-2.1.3.tgz`, as a
    /// lockfile names it: `/npm/ms/-/ms-2.1.3.tgz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_at: Option<String>,
    /// Its cache key, when it goes through the cache.
    pub key: Option<String>,
    /// What pkgproxy would do: `hit`, `fetch`, `revalidate`, `serve stale`,
    /// `forward`, `refuse`, `answer itself`; `unknown` for an upstream's
    /// URL whose path at pkgproxy only what it does not hold says (a
    /// crate's, without its index file).
    pub action: String,
    /// How the answer would say it was served (`X-Pkgproxy-Cache`), on the
    /// cache path: `hit`, `miss`, `stale`; `revalidated` or `miss` for a
    /// revalidation.
    pub cache: Option<String>,
    /// Why it is not a plain hit (`X-Pkgproxy-Reason`).
    pub reason: Option<String>,
    /// The upstream instances it would ask.
    pub upstream: Vec<String>,
    /// For a listing the fleet's policy filters: the releases it would be
    /// served without, each with its rule (`npm:x@1.0.1 blocked by
    /// min_age until ...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
}

/// Whether pkgproxy could serve one request with the network gone
/// (`check`), or after fetching it (`warm`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemReadiness {
    /// The request, as a client asks for it.
    pub url: String,
    /// Whether it would be served.
    pub ready: bool,
    /// Why not (`not cached`, `superseded by ...`, what the upstream said).
    pub reason: Option<String>,
    /// Its size, when known.
    pub size: Option<u64>,
    /// The fleet's policy refuses it to clients, cached or not: the rule
    /// (`blocked by min_age until ...`, `blocked by MAL-2025-1234`).
    /// Asked by `check` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

/// The requests to check or warm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadinessRequest {
    /// Each as a client asks for it: `http://deb.debian.org/debian/...`,
    /// `/go/...`.
    pub urls: Vec<String>,
    /// Headers the client sends with each, where they change what the
    /// upstream serves (a snap device's architecture); a warm sends them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

/// A suite whose `Release` apt accepts only until a time now past, or less
/// than a day away: apt refuses an expired Release, so a long spell offline
/// breaks `apt-get update` for it (the security archive's are valid a week).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteValidity {
    /// The suite, as the apt index names it (`ARCHIVE/dists/SUITE`).
    pub suite: String,
    /// Its `Valid-Until`, in seconds since the Unix epoch.
    pub valid_until: u64,
    /// Whether that time has passed.
    pub expired: bool,
}

impl SuiteValidity {
    /// The suite valid until `until`, as seen at `now`.
    pub fn new(suite: String, until: std::time::SystemTime, now: std::time::SystemTime) -> Self {
        let valid_until = until.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        SuiteValidity { suite, valid_until, expired: until <= now }
    }

    /// [`SuiteValidity::warning`], the time to the minute in UTC.
    pub fn warning_utc(&self) -> String {
        self.warning(&utc_minute(self.valid_until))
    }

    /// What people are told, with the time written `when`: the suite, the
    /// date, and the client setting that accepts the Release anyway.
    pub fn warning(&self, when: &str) -> String {
        let tense = if self.expired { "was valid until" } else { "is valid only until" };
        format!(
            "{}: its Release {tense} {when}; apt refuses it after that (set Acquire::Check-Valid-Until=false, \
             or [check-valid-until=no] on its source line)",
            self.suite
        )
    }
}

/// Unix seconds to the minute, as people read a time: `2026-12-01 12:03 UTC`.
pub fn utc_minute(secs: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    let stamp = humantime::format_rfc3339_seconds(time).to_string();
    format!("{} {} UTC", &stamp[..10], &stamp[11..16])
}

/// How far ahead a Release's `Valid-Until` is warned of.
pub const VALIDITY_WARNED_WITHIN: std::time::Duration = std::time::Duration::from_secs(86_400);

/// What to put in a bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportRequest {
    /// The requests a build makes, in the order `check` lists them (what
    /// proves an item before the item).
    pub urls: Vec<String>,
    /// Everything the cache holds instead.
    #[serde(default)]
    pub all: bool,
    /// Recorded answers to carry besides, by key (a snap's store answer,
    /// which no request reads as it is).
    #[serde(default)]
    pub records: Vec<String>,
    /// The fleet's malicious-package records in force, carried besides
    /// (with `all`, they are carried whenever a policy is in force).
    #[serde(default)]
    pub policy: bool,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Imported {
    /// The bundle's items.
    pub items: usize,
    /// Items taken into the cache, each checked as a fetch is.
    pub imported: usize,
    /// Items the cache held already (the same bytes, or a newer copy of
    /// what changes under its name).
    pub held: usize,
    /// The bytes taken in.
    pub bytes: u64,
    /// Items refused (each checked as a fetch is, and found wanting); the
    /// others were taken all the same.
    #[serde(default)]
    pub refused: usize,
    /// Why, item by item, for the first hundred refused.
    #[serde(default)]
    pub refusals: Vec<String>,
    /// The public key that signed the bundle, when a trusted one did
    /// (none: taken unsigned, as the admin said).
    #[serde(default)]
    pub signed_by: Option<String>,
    /// The malicious-package records the bundle carried, taken in and in
    /// force: how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub malicious_records: Option<usize>,
}

/// What a build needs of one side, asked of the daemon: the side's own
/// reading of the build's files (its reader's output, which only that side
/// parses), resolved in what the cache holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeedsRequest {
    /// A warm (admin socket): the side may first ask its upstream what
    /// only an answer from there names (a snap's download).
    #[serde(default)]
    pub warm: bool,
    /// What the side's reader made of the build's files.
    pub asked: serde_json::Value,
}

/// One request a build makes, and what people call it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeededItem {
    /// As the client asks pkgproxy for it: `http://deb.debian.org/...`,
    /// `/go/...`.
    pub url: String,
    /// For people: `example.com/hello v1.0.0 .zip`, `hello_2.10_amd64.deb`.
    pub label: String,
}

/// What a build needs: the requests to ask about, in the order its clients
/// make them (what proves an item before the item), and what cannot even
/// be asked about yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Needs {
    /// The requests.
    pub items: Vec<NeededItem>,
    /// What is not known, and why (a package no index held offers, a
    /// manifest not held): not ready.
    #[serde(default)]
    pub unknown: Vec<String>,
    /// What works now but not after a while offline (a Release about to
    /// expire).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Recorded answers replayed offline, by key (a snap's store answer):
    /// a bundle carries them besides the requests.
    #[serde(default)]
    pub records: Vec<String>,
    /// The headers the client sends with its requests, where they change
    /// what the upstream serves (a snap device's): a warm sends them too.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// For people: what the count is of (a platform), and what the
    /// build's files name that its clients would not ask for there (other
    /// platforms' wheels): said, not counted.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Needs {
    /// Requests known without asking the daemon.
    pub fn of(items: Vec<NeededItem>) -> Needs {
        Needs { items, ..Needs::default() }
    }
}
