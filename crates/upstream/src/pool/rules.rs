//! The pool's rules: which instance to ask next and how long a failed one
//! stays out. A state machine with the time and the randomness passed in,
//! so its rules are tested without clocks (see the parent module for the
//! rules themselves).

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

/// How long a failed instance stays out of the pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Penalties {
    /// The first penalty.
    pub penalty_base: Duration,
    /// The longest penalty.
    pub penalty_max: Duration,
    /// Relative jitter of a penalty, 0.0 to 1.0 (0.2: ±20 %).
    pub jitter: f64,
}

impl Default for Penalties {
    fn default() -> Self {
        Penalties { penalty_base: Duration::from_secs(1), penalty_max: Duration::from_secs(300), jitter: 0.2 }
    }
}

/// One instance's state.
#[derive(Debug, Clone, Default)]
struct Instance {
    /// Consecutive failures.
    failures: u32,
    /// Out of the pool until then.
    penalised_until: Option<Instant>,
    /// When the current penalty began (attempts started before say nothing).
    penalised_since: Option<Instant>,
    /// Requests in flight.
    in_flight: u32,
    /// Attempts still waiting for their answer head, by start.
    waiting: BTreeSet<(Instant, u64)>,
    /// A re-admitted instance is on probation: while one request tries it,
    /// the others keep away, so one request per penalty period pays for a
    /// still-dead instance.
    probing: bool,
    /// Decaying average of the time to first byte, in seconds.
    latency: Option<f64>,
}

/// The least latency an instance is scored with (seconds): below a
/// millisecond, times say nothing, and load must still count.
const LATENCY_FLOOR: f64 = 0.001;
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

/// An attempt in progress: reported with [`Rules::succeeded`] or
/// [`Rules::failed`], and ended with [`Rules::end`] once its body is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// Which instance of the pool (its index).
    pub instance: usize,
    started: Instant,
    /// The probe of a re-admitted instance.
    probe: bool,
    /// Tells attempts that started at the same instant apart.
    id: u64,
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

/// The state of the instances of one upstream.
#[derive(Debug, Clone)]
pub struct Rules {
    config: Penalties,
    instances: Vec<Instance>,
    next_id: u64,
}

impl Rules {
    /// A pool of `count` instances, all healthy.
    pub fn new(count: usize, config: Penalties) -> Self {
        Rules { config, instances: vec![Instance::default(); count], next_id: 0 }
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
        let instance = &self.instances[index];
        instance.penalised_until.is_none_or(|until| now >= until) && !instance.probing
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
        // Two distinct instances (one when there is one): the same one
        // twice would be no choice at all.
        let count = healthy.len() as u64;
        let first_at = random.0 % count;
        let second_at = match count {
            1 => first_at,
            _ => (first_at + 1 + random.1 % (count - 1)) % count,
        };
        let (first, second) = (healthy[first_at as usize], healthy[second_at as usize]);
        let pick = if self.score(second, now) < self.score(first, now) { second } else { first };
        Choice::Healthy(pick)
    }

    /// Lower is better: the expected time to first byte, times the load.
    /// An attempt still waiting longer than the average says the average
    /// is out of date ("peak"): an instance that stopped answering stops
    /// drawing requests as soon as its oldest wait outgrows the others'
    /// latency, not only once a timeout has penalised it.
    fn score(&self, index: usize, now: Instant) -> f64 {
        let instance = &self.instances[index];
        let oldest_wait = instance.waiting.first().map_or(0.0, |(started, _)| (now - *started).as_secs_f64());
        let latency = instance.latency.unwrap_or_else(|| self.best_latency());
        latency.max(oldest_wait).max(LATENCY_FLOOR) * f64::from(instance.in_flight + 1)
    }

    /// The lowest latency measured: what an instance never measured is
    /// assumed to have, so it gets tried as soon as the best one is busy
    /// (a pessimistic guess would starve an equal peer behind a fast one).
    fn best_latency(&self) -> f64 {
        self.instances
            .iter()
            .filter_map(|i| i.latency)
            .fold(None, |best: Option<f64>, l| Some(best.map_or(l, |b| b.min(l))))
            .unwrap_or(0.0)
    }

    /// An attempt on `instance` starts at `now`.
    pub fn start(&mut self, index: usize, now: Instant) -> Attempt {
        let id = self.next_id;
        self.next_id += 1;
        let instance = &mut self.instances[index];
        instance.in_flight += 1;
        instance.waiting.insert((now, id));
        let probe = instance.failures > 0 && !instance.probing;
        instance.probing |= probe;
        Attempt { instance: index, started: now, probe, id }
    }

    /// The attempt is over (its body ended, or it failed): it no longer
    /// counts as in flight. Called once per [`Rules::start`].
    pub fn end(&mut self, attempt: Attempt) {
        let instance = &mut self.instances[attempt.instance];
        instance.in_flight = instance.in_flight.saturating_sub(1);
        instance.waiting.remove(&(attempt.started, attempt.id));
        if attempt.probe {
            instance.probing = false;
        }
    }

    /// The attempt got its answer head after `latency`. It stays in flight
    /// while its body streams: a long download is load on its instance.
    pub fn succeeded(&mut self, attempt: Attempt, latency: Duration) {
        let instance = &mut self.instances[attempt.instance];
        instance.waiting.remove(&(attempt.started, attempt.id));
        instance.failures = 0;
        instance.probing = false;
        instance.penalised_until = None;
        instance.penalised_since = None;
        let sample = latency.as_secs_f64();
        instance.latency =
            Some(instance.latency.map_or(sample, |average| average * (1.0 - EWMA_WEIGHT) + sample * EWMA_WEIGHT));
    }

    /// The attempt failed at `now` (before its head, or later in its body);
    /// `jitter` is a number in [-1, 1] scaling
    /// the configured jitter. Returns the penalty imposed, if this failure
    /// raised one.
    pub fn failed(&mut self, attempt: Attempt, now: Instant, jitter: f64) -> Option<Duration> {
        let config = self.config;
        let instance = &mut self.instances[attempt.instance];
        instance.waiting.remove(&(attempt.started, attempt.id));
        if attempt.probe {
            instance.probing = false;
        }
        if instance.penalised_since.is_some_and(|since| attempt.started <= since) {
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
