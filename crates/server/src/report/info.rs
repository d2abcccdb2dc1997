//! `GET /pkgproxy/v1/info`: what the daemon is and how it is doing, read
//! now into the control protocol's [`Info`].

use std::collections::BTreeMap;

use pkgproxy_control::{Info, OfflineInfo};
use pkgproxy_metrics::{CacheGauge, Snapshot};

use crate::state::State;

/// Reads everything now.
pub fn gather(state: &State) -> Info {
    let (entries, size) = state.cache.totals();
    let usage = state.cache.usage();
    let quota = state.cache.quota();
    Info {
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: option_env!("PKGPROXY_COMMIT").unwrap_or("unknown").to_string(),
        uptime_seconds: state.started.elapsed().as_secs(),
        listen_address: state.listen.to_string(),
        cache_dir: state.cache.dir().display().to_string(),
        cache: Snapshot::from_fn(|gauge| match gauge {
            CacheGauge::Entries => entries as u64,
            CacheGauge::SizeBytes => size,
            CacheGauge::FetchesInProgress => state.cache.fetches_in_progress() as u64,
            CacheGauge::DiskBytes => usage.bytes,
            CacheGauge::MaxSizeBytes => quota.max_size.unwrap_or(0),
            CacheGauge::FreeBytes => usage.free,
            CacheGauge::DiskPressure => u64::from(usage.free < quota.min_free.bytes(usage.total)),
        }),
        sides: state.sides.iter().map(|side| (side.id().to_string(), state.stats.side(side.id()).snapshot())).collect(),
        own_requests: state
            .sides
            .iter()
            .map(|side| (side.id().to_string(), state.stats.own(side.id()).snapshot()))
            .collect(),
        timings: state
            .sides
            .iter()
            .map(|side| (side.id().to_string(), state.stats.timings(side.id()).snapshot()))
            .collect(),
        upstream: state.upstream.counters.snapshot(),
        pools: state.upstream.transport.report().into_iter().map(super::pool_info).collect(),
        mirrors: state.shadows.load().report(),
        offline: OfflineInfo {
            mode: state.upstream.switch.mode().as_str().to_string(),
            upstreams: super::upstreams(state),
        },
        lxd_remotes: super::lxd_remotes(state),
        certificate_pem: state.tls.certificate_pem.clone(),
        access_log: state.access_log.snapshot(),
        clients: state.admission.counters.snapshot(),
        connections_open: state.admission.open() as u64,
        cluster: state.cluster.as_ref().map(|cluster| cluster.info()),
        apt_valid_until: super::apt_valid_until(state),
        policy_blocked: state.gate.blocked_counts(),
        learned: learned(&state.sides),
    }
}

/// What the sides have learnt, by group and name.
fn learned(sides: &pkgproxy_sides::Sides) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut groups: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for count in sides.playing(|roles| roles.informing).flat_map(|(_, informing)| informing.learned()) {
        groups.entry(count.group.to_string()).or_default().insert(count.name.to_string(), count.value);
    }
    groups
}
