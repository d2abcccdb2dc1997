//! The circuit breaker of one upstream host in store-overloaded mode, as an
//! explicit state machine with the time passed in (tests drive it with
//! instants of their choosing; nothing here reads a clock).
//!
//! The rules (`docs/offline-mode.md`):
//! - It opens after [`FAILURES_TO_OPEN`] consecutive failures, or at once on
//!   a failure that carries a `Retry-After` (honoured up to [`MAX_OPEN`]).
//! - It stays open [`FIRST_OPEN`], twice as long each time it opens again
//!   without an answer in between, up to [`MAX_OPEN`]; an answer resets that.
//! - Once the time is up exactly one request passes, as the probe (it holds
//!   the token); its answer alone closes the breaker, its failure reopens it.
//!   A probe abandoned by its client frees the slot for the next request.
//! - A request admitted before the breaker last opened (still in flight
//!   then) says nothing when it ends, success or failure.

use std::time::Duration;

use tokio::time::Instant;

/// Consecutive failures that open a closed breaker.
pub const FAILURES_TO_OPEN: u32 = 3;
/// How long a breaker first stays open.
pub const FIRST_OPEN: Duration = Duration::from_secs(30);
/// The longest it stays open (doubling and `Retry-After` stop here).
pub const MAX_OPEN: Duration = Duration::from_secs(600);

/// What an upstream request told about its host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The host answered (any status but 429, 502, 503, 504).
    Answer,
    /// A transport error, a timeout, a failed dial, or 429/502/503/504,
    /// with the `Retry-After` it carried, if any (429 and 503 only).
    Failure {
        /// How long the host asked to be left alone.
        retry_after: Option<Duration>,
    },
}

/// A request's permission to go upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// The breaker's generation when the pass was given (it changes at every
    /// opening; a pass of an older one says nothing).
    generation: u64,
    /// The probe token, for the one request let through after an opening.
    probe: Option<u64>,
}

impl Pass {
    /// True for the probe.
    #[cfg(test)]
    pub fn is_probe(&self) -> bool {
        self.probe.is_some()
    }
}

/// The breaker's answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead, and report how it went.
    Pass(Pass),
    /// Refused; the host may be tried again after this long.
    Refused {
        /// Time left until the probe (at least a second while one is out).
        retry_after: Duration,
    },
}

/// A change worth logging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Nothing changed state.
    None,
    /// It opened for this long.
    Opened(Duration),
    /// It closed: the host answered the probe.
    Closed,
}

/// Where a breaker stands, for the admin socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Requests pass.
    Closed,
    /// Requests are refused for this long yet.
    Open(Duration),
    /// The probe is out.
    Probing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    Probing { token: u64 },
}

/// One host's breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    state: State,
    /// How long it was last open, while no answer came since; `None` after
    /// an answer (the next opening is then [`FIRST_OPEN`]).
    last_open: Option<Duration>,
    generation: u64,
    next_token: u64,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker { state: State::Closed { failures: 0 }, last_open: None, generation: 0, next_token: 0 }
    }
}

impl Breaker {
    /// May a request go to the host at `now`?
    pub fn admit(&mut self, now: Instant) -> Admission {
        match self.state {
            State::Closed { .. } => Admission::Pass(Pass { generation: self.generation, probe: None }),
            State::Open { until } if now < until => Admission::Refused { retry_after: until - now },
            State::Open { .. } => {
                let token = self.next_token;
                self.next_token += 1;
                self.state = State::Probing { token };
                Admission::Pass(Pass { generation: self.generation, probe: Some(token) })
            }
            State::Probing { .. } => Admission::Refused { retry_after: Duration::from_secs(1) },
        }
    }

    /// Reports how a request admitted with `pass` ended.
    pub fn record(&mut self, now: Instant, pass: Pass, outcome: Outcome) -> Transition {
        if pass.generation != self.generation {
            return Transition::None;
        }
        match (self.state, outcome) {
            (State::Closed { .. }, Outcome::Answer) => {
                self.state = State::Closed { failures: 0 };
                self.last_open = None;
                Transition::None
            }
            (State::Closed { .. }, Outcome::Failure { retry_after: Some(asked) }) => {
                self.open(now, asked.min(MAX_OPEN))
            }
            (State::Closed { failures }, Outcome::Failure { retry_after: None }) => {
                if failures + 1 >= FAILURES_TO_OPEN {
                    self.open(now, self.next_open())
                } else {
                    self.state = State::Closed { failures: failures + 1 };
                    Transition::None
                }
            }
            (State::Probing { token }, outcome) if pass.probe == Some(token) => match outcome {
                Outcome::Answer => {
                    self.state = State::Closed { failures: 0 };
                    self.last_open = None;
                    Transition::Closed
                }
                Outcome::Failure { retry_after } => {
                    let duration = retry_after.map_or_else(|| self.next_open(), |asked| asked.min(MAX_OPEN));
                    self.open(now, duration)
                }
            },
            _ => Transition::None,
        }
    }

    /// Reports a request that ended without telling anything of the host
    /// (its client left, or it was a tunnel whose connect succeeded): a
    /// probe's slot goes to the next request.
    pub fn abandon(&mut self, now: Instant, pass: Pass) {
        if pass.generation == self.generation
            && matches!(self.state, State::Probing { token } if pass.probe == Some(token))
        {
            self.state = State::Open { until: now };
        }
    }

    /// Opens it until `until`, as another node of a cluster saw the host
    /// ask (requests under way report nothing after this); `false` when it
    /// was open that long already.
    pub fn impose(&mut self, now: Instant, until: Instant) -> bool {
        match self.state {
            State::Open { until: open_until } if open_until >= until => false,
            _ if until <= now => false,
            _ => {
                self.state = State::Open { until };
                self.generation += 1;
                true
            }
        }
    }

    /// Closes it, as the cluster saw the host answer again.
    pub fn lift(&mut self) {
        if !matches!(self.state, State::Closed { .. }) {
            self.state = State::Closed { failures: 0 };
            self.last_open = None;
            self.generation += 1;
        }
    }

    /// Where it stands at `now`.
    pub fn state(&self, now: Instant) -> BreakerState {
        match self.state {
            State::Closed { .. } => BreakerState::Closed,
            State::Open { until } => BreakerState::Open(until.saturating_duration_since(now)),
            State::Probing { .. } => BreakerState::Probing,
        }
    }

    fn next_open(&self) -> Duration {
        self.last_open.map_or(FIRST_OPEN, |last| (last * 2).min(MAX_OPEN))
    }

    fn open(&mut self, now: Instant, duration: Duration) -> Transition {
        self.state = State::Open { until: now + duration };
        self.last_open = Some(duration);
        self.generation += 1;
        Transition::Opened(duration)
    }
}

#[cfg(test)]
mod tests;
