//! `GET /pkgproxy/v1/info`: what the daemon is and how it is doing.

use std::collections::BTreeMap;

use pkgproxy_sides::SideId;
use pkgproxy_upstream::pool::InstanceReport;
use pkgproxy_upstream::{CountersSnapshot, PoolReport};
use serde::{Deserialize, Serialize};

use crate::shadow::ShadowReport;
use crate::state::State;
use crate::stats::SideSnapshot;

/// The answer of `/pkgproxy/v1/info`.
#[derive(Debug, Serialize)]
pub struct Info {
    /// pkgproxy's version.
    pub version: &'static str,
    /// Seconds since start.
    pub uptime_seconds: u64,
    /// The proxy listener's address.
    pub listen_address: String,
    /// The cache directory.
    pub cache_dir: String,
    /// The cache's contents.
    pub cache: CacheInfo,
    /// Counters per side.
    pub sides: BTreeMap<&'static str, SideSnapshot>,
    /// What went out through the one way out.
    pub upstream: UpstreamInfo,
    /// The upstream pools used so far and their instances' state.
    pub pools: Vec<PoolInfo>,
    /// The mirrors (copies of the traffic) and what they did.
    pub mirrors: Vec<ShadowReport>,
    /// What the apt index has learnt.
    pub apt_index: AptIndexInfo,
    /// The offline mode and the upstreams whose breaker is not closed.
    pub offline: OfflineInfo,
}

/// The offline part of [`Info`] (read-only here; the admin socket changes it).
#[derive(Debug, Serialize)]
pub struct OfflineInfo {
    /// The mode in effect.
    pub mode: &'static str,
    /// The hosts whose breaker is not closed.
    pub upstreams: Vec<super::offline::UpstreamReport>,
}

/// One upstream pool in [`Info`].
#[derive(Debug, Serialize, Deserialize)]
pub struct PoolInfo {
    /// The pool's name.
    pub name: String,
    /// Its instances.
    pub instances: Vec<InstanceInfo>,
}

/// One instance of a pool.
#[derive(Debug, Serialize, Deserialize)]
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

impl From<PoolReport> for PoolInfo {
    fn from(report: PoolReport) -> Self {
        let instance = |(url, state): (String, InstanceReport)| InstanceInfo {
            url,
            state: if state.penalised_for.is_some() { "penalised" } else { "healthy" }.to_string(),
            penalised_for_ms: state.penalised_for.map(|left| left.as_millis().try_into().unwrap_or(u64::MAX)),
            failures: state.failures,
            in_flight: state.in_flight,
        };
        PoolInfo { name: report.name, instances: report.instances.into_iter().map(instance).collect() }
    }
}

/// The apt index part of [`Info`].
#[derive(Debug, Serialize, Deserialize)]
pub struct AptIndexInfo {
    /// Suites whose `Release` is known.
    pub suites: u64,
    /// Pool files whose size and SHA-256 a `Packages` index gave.
    pub pool_files: u64,
}

/// The cache part of [`Info`].
#[derive(Debug, Serialize, Deserialize)]
pub struct CacheInfo {
    /// Bytes of cached bodies.
    pub size_bytes: u64,
    /// Cached entries.
    pub entries: u64,
    /// Shared fetches in progress.
    pub fetches_in_progress: u64,
}

/// The upstream part of [`Info`].
#[derive(Debug, Serialize, Deserialize)]
pub struct UpstreamInfo {
    /// HTTP requests sent upstream.
    pub requests: u64,
    /// TCP connections opened upstream (requests and tunnels).
    pub connections: u64,
    /// CONNECT tunnels opened.
    pub tunnels: u64,
    /// Connections refused by the address policy.
    pub refused: u64,
    /// Copies sent to mirror targets (their own client, apart from the above).
    pub mirror_requests: u64,
    /// TCP connections opened to mirror targets.
    pub mirror_connections: u64,
}

impl UpstreamInfo {
    fn new(upstream: CountersSnapshot, mirrors: CountersSnapshot) -> Self {
        UpstreamInfo {
            requests: upstream.requests,
            connections: upstream.connections,
            tunnels: upstream.tunnels,
            refused: upstream.refused + mirrors.refused,
            mirror_requests: mirrors.requests,
            mirror_connections: mirrors.connections,
        }
    }
}

impl Info {
    /// Reads everything now.
    pub fn gather(state: &State) -> Self {
        let (entries, size) = state.cache.totals();
        Info {
            version: env!("CARGO_PKG_VERSION"),
            uptime_seconds: state.started.elapsed().as_secs(),
            listen_address: state.listen.to_string(),
            cache_dir: state.cache.dir().display().to_string(),
            cache: CacheInfo {
                size_bytes: size,
                entries: entries as u64,
                fetches_in_progress: state.cache.fetches_in_progress() as u64,
            },
            sides: SideId::ALL.iter().map(|&side| (side.as_str(), state.stats.side(side).snapshot())).collect(),
            upstream: UpstreamInfo::new(
                state.upstream.counters.snapshot(),
                state.upstream.shadow_client.counters.snapshot(),
            ),
            pools: state.upstream.transport.report().into_iter().map(PoolInfo::from).collect(),
            mirrors: state.shadows.report(),
            offline: OfflineInfo {
                mode: state.upstream.switch.mode().as_str(),
                upstreams: super::offline::upstreams(state),
            },
            apt_index: {
                let learned =
                    |name| state.sides.iter().flat_map(|s| s.learned()).find(|l| l.name == name).map_or(0, |l| l.value);
                AptIndexInfo { suites: learned("suites"), pool_files: learned("pool_files") }
            },
        }
    }
}
