//! Offline mode and store-overloaded breakers (`docs/offline-mode.md`): the
//! switch the one way out consults before any name is resolved or socket
//! opened. Everything that reaches the network goes through it, so every
//! side has offline mode and breakers without doing anything.

pub mod auto;
mod breaker;
mod mode;
mod switch;

pub use breaker::{BreakerState, Outcome, FAILURES_TO_OPEN, FIRST_OPEN, MAX_OPEN};
pub use mode::{Mode, UnknownMode};
pub use switch::{outcome_of, BreakerWatcher, Refusal, Switch, Ticket, UpstreamState};
