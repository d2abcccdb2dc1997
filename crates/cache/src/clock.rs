//! The wall clock the cache reads: when an entry was fetched, whether it is
//! still fresh, whether a `Last-Modified` is a strong validator. Injected
//! (rustls's `TimeProvider`), so a test moves time instead of waiting for
//! it. Timers and timeouts are tokio's business, not this clock's.

use parking_lot::Mutex;
use std::fmt::Debug;
use std::time::{Duration, SystemTime};

/// Tells the time.
pub trait Clock: Send + Sync + Debug {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that stands still until told to move.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    /// A clock showing `now`.
    pub fn new(now: SystemTime) -> Self {
        ManualClock { now: Mutex::new(now) }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        *self.now.lock() += by;
    }

    /// Shows `at` from now on (earlier than before, too: a test's "a day
    /// after it was published").
    pub fn set(&self, at: SystemTime) {
        *self.now.lock() = at;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock()
    }
}
