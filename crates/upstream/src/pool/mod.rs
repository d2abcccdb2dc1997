//! The instances of one upstream (the mirrors of an apt archive, a list of
//! module proxies) and which to ask next: a state machine with the time and
//! the randomness passed in, so its rules are tested without clocks.
//!
//! The rules (the connection-management seed):
//! - **Spread.** Among the healthy instances, power of two choices on a
//!   "peak EWMA" score: the latency (time to first byte) averaged with a
//!   decay, times the requests in flight plus one. Downloads of very
//!   unequal length make "least requests" alone a poor guide, and latency
//!   alone herds everyone onto the fastest mirror; the product favours the
//!   faster instance without starving the other, and two random choices keep
//!   every healthy instance in use.
//! - **Penalty.** A failed attempt takes its instance out of the pool for a
//!   penalty that doubles with each consecutive failure, from `penalty_base`
//!   up to `penalty_max`, with jitter. One outage raises it once: a failure
//!   of an attempt that started before the instance's current penalty began
//!   says nothing new. A success ends it and resets the count.
//! - **Order.** No instance is tried twice for one request before every
//!   other has been tried; penalised instances come only when no healthy
//!   one is left untried (the "failing" state), soonest-recovered first.
//!
//! Interplay with store-overloaded mode: a host whose breaker is open counts
//! as penalised here (the caller marks it so when the switch refuses), and
//! penalties never open a breaker.

use std::time::Duration;

use tokio::time::Instant;

/// Penalty and scoring settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolConfig {
    /// The first penalty.
    pub penalty_base: Duration,
    /// The longest penalty.
    pub penalty_max: Duration,
    /// Relative jitter of a penalty, 0.0 to 1.0 (0.2: ±20 %).
    pub jitter: f64,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig { penalty_base: Duration::from_secs(1), penalty_max: Duration::from_secs(300), jitter: 0.2 }
    }
}

/// One instance's state.
#[derive(Debug, Clone)]
struct Instance {
    /// Consecutive failures.
    failures: u32,
    /// Out of the pool until then.
    penalised_until: Option<Instant>,
    /// When the current penalty began (attempts started before say nothing).
    penalised_since: Option<Instant>,
    /// Requests in flight.
    in_flight: u32,
    /// Decaying average of the time to first byte, in seconds.
    latency: f64,
}

impl Default for Instance {
    fn default() -> Self {
        Instance { failures: 0, penalised_until: None, penalised_since: None, in_flight: 0, latency: INITIAL_LATENCY }
    }
}

/// The latency assumed of an instance never measured (seconds): low, so a
/// new instance gets tried.
const INITIAL_LATENCY: f64 = 0.05;
/// Weight of a new latency sample in the average.
const EWMA_WEIGHT: f64 = 0.3;

/// Which instance to try next for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// A healthy instance.
    Healthy(usize),
    /// Every untried instance is penalised: this one recovers soonest
    /// (disaster recovery: use the less aggressive timeouts).
    Failing(usize),
    /// Every instance has been tried for this request.
    Exhausted,
}

/// An attempt in progress, to report with [`Pool::succeeded`],
/// [`Pool::failed`] or [`Pool::abandoned`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// The instance.
    pub instance: usize,
    started: Instant,
}

/// What `/pkgproxy/v1/info` shows of an instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceReport {
    /// Penalised until this long from now (`None`: healthy).
    pub penalised_for: Option<Duration>,
    /// Consecutive failures.
    pub failures: u32,
    /// Requests in flight.
    pub in_flight: u32,
}

/// The instances of one upstream.
#[derive(Debug, Clone)]
pub struct Pool {
    config: PoolConfig,
    instances: Vec<Instance>,
}

impl Pool {
    /// A pool of `count` instances, all healthy.
    pub fn new(count: usize, config: PoolConfig) -> Self {
        Pool { config, instances: vec![Instance::default(); count] }
    }

    /// How many instances.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    /// True for a pool without instances.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    fn healthy(&self, index: usize, now: Instant) -> bool {
        self.instances[index].penalised_until.is_none_or(|until| now >= until)
    }

    /// The next instance for a request that has tried those marked in
    /// `tried` (as long as the pool); `random` is two random numbers.
    pub fn choose(&self, now: Instant, tried: &[bool], random: (u64, u64)) -> Choice {
        let untried: Vec<usize> =
            (0..self.instances.len()).filter(|&i| !tried.get(i).copied().unwrap_or(false)).collect();
        if untried.is_empty() {
            return Choice::Exhausted;
        }
        let healthy: Vec<usize> = untried.iter().copied().filter(|&i| self.healthy(i, now)).collect();
        if healthy.is_empty() {
            let soonest = untried.iter().copied().min_by_key(|&i| self.instances[i].penalised_until);
            return soonest.map_or(Choice::Exhausted, Choice::Failing);
        }
        let first = healthy[(random.0 % healthy.len() as u64) as usize];
        let second = healthy[(random.1 % healthy.len() as u64) as usize];
        let pick = if self.score(second) < self.score(first) { second } else { first };
        Choice::Healthy(pick)
    }

    fn score(&self, index: usize) -> f64 {
        let instance = &self.instances[index];
        instance.latency * f64::from(instance.in_flight + 1)
    }

    /// An attempt on `instance` starts at `now`.
    pub fn start(&mut self, instance: usize, now: Instant) -> Attempt {
        self.instances[instance].in_flight += 1;
        Attempt { instance, started: now }
    }

    fn finish(&mut self, attempt: Attempt) -> &mut Instance {
        let instance = &mut self.instances[attempt.instance];
        instance.in_flight = instance.in_flight.saturating_sub(1);
        instance
    }

    /// The attempt got its answer head after `latency`.
    pub fn succeeded(&mut self, attempt: Attempt, latency: Duration) {
        let instance = self.finish(attempt);
        instance.failures = 0;
        instance.penalised_until = None;
        instance.penalised_since = None;
        instance.latency = instance.latency * (1.0 - EWMA_WEIGHT) + latency.as_secs_f64() * EWMA_WEIGHT;
    }

    /// The attempt failed at `now`; `jitter` is a number in [-1, 1] scaling
    /// the configured jitter. Returns the penalty imposed, if this failure
    /// raised one.
    pub fn failed(&mut self, attempt: Attempt, now: Instant, jitter: f64) -> Option<Duration> {
        let config = self.config;
        let instance = self.finish(attempt);
        if instance.penalised_since.is_some_and(|since| attempt.started < since) {
            return None;
        }
        instance.failures = instance.failures.saturating_add(1);
        let doublings = instance.failures.saturating_sub(1).min(30);
        let penalty = config.penalty_base.saturating_mul(1 << doublings).min(config.penalty_max);
        let factor = 1.0 + config.jitter.clamp(0.0, 1.0) * jitter.clamp(-1.0, 1.0);
        let penalty = penalty.mul_f64(factor).min(config.penalty_max);
        instance.penalised_until = Some(now + penalty);
        instance.penalised_since = Some(now);
        Some(penalty)
    }

    /// The attempt ended without news of the instance (the client left).
    pub fn abandoned(&mut self, attempt: Attempt) {
        self.finish(attempt);
    }

    /// Each instance's state at `now`.
    pub fn report(&self, now: Instant) -> Vec<InstanceReport> {
        self.instances
            .iter()
            .map(|i| InstanceReport {
                penalised_for: i.penalised_until.filter(|until| *until > now).map(|until| until - now),
                failures: i.failures,
                in_flight: i.in_flight,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
