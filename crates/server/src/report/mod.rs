//! What the daemon says of its state, read alike by the control sockets
//! (`info`, `metrics`), the listener's `/metrics` and the status page: its
//! pools, breakers, LXD remotes, and apt suites about to expire.

#[cfg(test)]
mod exported;
pub mod info;
pub mod metrics;

use std::time::Duration;

use pkgproxy_control::{InstanceInfo, PoolInfo, SuiteValidity, UpstreamReport, VALIDITY_WARNED_WITHIN};
use pkgproxy_upstream::offline::{BreakerState, UpstreamState};
use pkgproxy_upstream::pool::InstanceReport;
use pkgproxy_upstream::PoolReport;
use tokio::time::Instant;

use crate::state::State;

/// The upstreams as reported.
pub fn upstreams(state: &State) -> Vec<UpstreamReport> {
    state.upstream.switch.upstreams(Instant::now()).into_iter().map(report).collect()
}

fn report(upstream: UpstreamState) -> UpstreamReport {
    let (state, left) = match upstream.state {
        BreakerState::Open(left) => ("open", Some(left)),
        BreakerState::Probing => ("probing", None),
        BreakerState::Closed => ("closed", None),
    };
    let ceil = |d: Duration| d.as_secs() + u64::from(d.subsec_nanos() > 0);
    UpstreamReport { host: upstream.host, state: state.to_string(), retry_after_seconds: left.map(ceil) }
}

/// The names clients add pkgproxy under (LXD's remotes).
pub(crate) fn lxd_remotes(state: &State) -> Vec<String> {
    state.sides.playing(|roles| roles.informing).flat_map(|(_, informing)| informing.remote_names()).collect()
}

pub(crate) fn pool_info(report: PoolReport) -> PoolInfo {
    let instance = |(url, state): (String, InstanceReport)| InstanceInfo {
        url,
        state: if state.penalised_for.is_some() { "penalised" } else { "healthy" }.to_string(),
        penalised_for_ms: state.penalised_for.map(|left| left.as_millis().try_into().unwrap_or(u64::MAX)),
        failures: state.failures,
        in_flight: state.in_flight,
    };
    PoolInfo { name: report.name, instances: report.instances.into_iter().map(instance).collect() }
}

/// What is served offline only until a time within a day, or no longer
/// (an apt suite whose Release expires).
pub(crate) fn apt_valid_until(state: &State) -> Vec<SuiteValidity> {
    let now = state.clock.now();
    let informing = state.sides.playing(|roles| roles.informing);
    let expiring = informing.flat_map(|(_, informing)| informing.expiring(now + VALIDITY_WARNED_WITHIN));
    expiring.map(|(suite, until)| SuiteValidity::new(suite, until, now)).collect()
}
