//! `[server] revalidate_floor`: how recent a revalidation answers a client
//! asking for a fresh copy, read by every lookup and changed by a reload.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The default of `revalidate_floor`: apt asks every `InRelease` with
/// `max-age=0` on `update`, pip every project page (before pip 26, and
/// since with `--refresh-package`); a fleet of CI jobs would otherwise
/// make an upstream request each, for the same bytes.
/// Ten seconds is shorter than any publish-then-install a person does by
/// hand, and long enough that a burst of jobs shares one request.
pub const DEFAULT_REVALIDATE_FLOOR: Duration = Duration::from_secs(10);

/// `revalidate_floor` as in use: read by every lookup, changed by a reload.
#[derive(Debug)]
pub struct Floor(AtomicU64);

impl Floor {
    /// A floor of `floor` (kept to the millisecond).
    pub fn new(floor: Duration) -> Floor {
        Floor(AtomicU64::new(millis(floor)))
    }

    /// The floor in use.
    pub fn get(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed))
    }

    /// Puts `floor` in use for requests from now on.
    pub fn set(&self, floor: Duration) {
        self.0.store(millis(floor), Ordering::Relaxed);
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
