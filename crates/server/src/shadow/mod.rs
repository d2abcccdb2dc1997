//! Traffic mirroring: each configured `[mirror.NAME]` is a shadow that
//! gets a copy of a side's requests (sent to its target, a new pkgproxy
//! version say, its answer thrown away), so the target is tried with real
//! traffic. The client never waits for a copy. The rules are in
//! `docs/traffic-mirroring.md`. In short:
//! - The copy of an apt request (pkgproxy is apt's forward proxy) is sent
//!   to the target as a proxy request, with the absolute URI apt asked for,
//!   so the target can be another pkgproxy; a target's path prefix applies
//!   to the reverse-proxy sides only.
//! - `step = "request"` copies every request of the shadow's sides as it
//!   arrives; `step = "upstream"` copies the requests pkgproxy sends
//!   upstream (misses and revalidations) as it sends them, conditional
//!   headers included, not the hits.
//! - A request body of a method a shadow copies is read through a tee and
//!   copied once complete, up to `max_body_size`.
//! - The marker is `X-Pkgproxy-Mirror: 1`; a request carrying it is never
//!   copied again.
//! - While offline mode is in effect nothing is copied (counted as skipped).

mod copy;
mod tap;
mod throttle;

use std::sync::Arc;

use parking_lot::Mutex;

use tokio::sync::Semaphore;

pub use copy::is_copy;
pub use tap::{Original, Tapped, TeeBody};

use pkgproxy_control::ShadowInfo;
use pkgproxy_metrics::{Counters, ShadowCounter};
use pkgproxy_upstream::shadow::{ShadowClient, ShadowTarget};

use crate::config::ShadowConfig;
use pkgproxy_upstream::UpstreamError;
use throttle::LineThrottle;

/// One configured mirror.
#[derive(Debug)]
pub struct Shadow {
    config: ShadowConfig,
    target: ShadowTarget,
    /// One permit per copy under way.
    inflight: Arc<Semaphore>,
    counters: Counters<ShadowCounter>,
    random: Mutex<fastrand::Rng>,
    compare_log: Mutex<LineThrottle>,
}

impl Shadow {
    fn new(config: ShadowConfig, shadows: &ShadowClient) -> Result<Self, UpstreamError> {
        let target = shadows.target(&config.target)?;
        let random = Mutex::new(config.seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed));
        Ok(Shadow {
            inflight: Arc::new(Semaphore::new(config.max_inflight)),
            config,
            target,
            counters: Counters::default(),
            random,
            compare_log: Mutex::default(),
        })
    }

    /// True for the share of requests `percentage` asks for.
    fn sampled(&self) -> bool {
        let mut random = self.random.lock();
        random.u32(0..100) < self.config.percentage
    }

    fn report(&self) -> ShadowInfo {
        let in_flight = self.config.max_inflight - self.inflight.available_permits().min(self.config.max_inflight);
        ShadowInfo {
            name: self.config.name.clone(),
            target: self.target.url(),
            counters: self.counters.snapshot(),
            in_flight: in_flight as u64,
        }
    }
}

/// Every configured mirror.
#[derive(Debug, Default)]
pub struct Shadows {
    all: Vec<Arc<Shadow>>,
}

impl Shadows {
    /// The mirrors of `configs`, sending through `shadows`.
    pub fn new(configs: &[ShadowConfig], shadows: &ShadowClient) -> Result<Self, UpstreamError> {
        let all = configs
            .iter()
            .map(|config| Shadow::new(config.clone(), shadows).map(Arc::new))
            .collect::<Result<_, _>>()?;
        Ok(Shadows { all })
    }

    /// The mirrors of `configs` (a reload): a mirror configured as before is
    /// kept as it is, with its counters and its copies under way.
    pub fn reconfigured(&self, configs: &[ShadowConfig], shadows: &ShadowClient) -> Result<Self, UpstreamError> {
        let kept = |config: &ShadowConfig| self.all.iter().find(|shadow| shadow.config == *config).cloned();
        let all = configs
            .iter()
            .map(|config| match kept(config) {
                Some(shadow) => Ok(shadow),
                None => Shadow::new(config.clone(), shadows).map(Arc::new),
            })
            .collect::<Result<_, _>>()?;
        Ok(Shadows { all })
    }

    /// True when no mirror is configured (the request path skips the tap).
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Each shadow's counters.
    pub fn report(&self) -> Vec<ShadowInfo> {
        self.all.iter().map(|m| m.report()).collect()
    }
}

#[cfg(test)]
mod tests;
