//! Each side's traffic over the last hour, minute by minute, and over the
//! last day, by quarter hours, for the status page's charts; and the file
//! in the state directory that keeps them across a restart.
//!
//! The counters are looked at every few seconds (and when the page asks):
//! what they moved since the look before is added to the stretches under
//! way at the look, so the stretch of now is shown as it fills. Counters
//! start at zero with the process; the stretches kept from before a
//! restart are added to, never replaced.
//!
//! Only what the counters say is kept ([`SideCounter`] snapshots, as
//! `crate::stats` keeps them): whatever counts a request one way or
//! another decides what the charts show, not this module. It names no
//! path, client or package.

mod file;

use parking_lot::Mutex;
use std::collections::BTreeMap;

use pkgproxy_control::{Traffic, TrafficSeries};
use pkgproxy_metrics::{SideCounter, Snapshot};
use pkgproxy_sides::SideId;

#[cfg(test)]
use file::FILE_NAME;
pub use file::{load, save};

/// The hour's stretches: a minute each, sixty of them.
pub const HOUR: Span = Span { step: 60, count: 60 };
/// The day's stretches: a quarter hour each, ninety-six of them.
pub const DAY: Span = Span { step: 900, count: 96 };

/// A chart's time axis: `count` stretches of `step` seconds, the last one
/// under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Seconds in one stretch.
    pub step: u64,
    /// Stretches shown.
    pub count: u64,
}

impl Span {
    /// The number of the stretch `unix_secs` falls in.
    fn stretch(self, unix_secs: u64) -> u64 {
        unix_secs / self.step
    }

    /// Whether stretch `number` is still shown at `unix_secs`.
    fn shows(self, number: u64, unix_secs: u64) -> bool {
        number + self.count > self.stretch(unix_secs)
    }
}

/// Each side's traffic, by stretch number, for one span.
type Stretches = BTreeMap<u64, Vec<Traffic>>;

/// Each side's traffic over the last hour and day.
#[derive(Debug, Default)]
pub struct History {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Each side's counters at the last look, in [`SideId::ALL`]'s order
    /// (none yet: every counter was zero, as at the start).
    seen: Vec<Snapshot<SideCounter>>,
    /// The hour's minutes that saw traffic.
    minutes: Stretches,
    /// The day's quarter hours that saw traffic.
    quarters: Stretches,
}

impl History {
    /// A history that goes on from `kept`'s (read back at a start), as
    /// seen at `unix_secs`: what is older than a day is let go.
    pub fn with(kept: Kept, unix_secs: u64) -> History {
        let mut inner = Inner { seen: Vec::new(), minutes: kept.minutes, quarters: kept.quarters };
        inner.let_go(unix_secs);
        History { inner: Mutex::new(inner) }
    }

    /// Adds what each side's counters (`sides`, in [`SideId::ALL`]'s
    /// order) moved since the last look to the stretches of `unix_secs`.
    pub fn look(&self, unix_secs: u64, sides: Vec<Snapshot<SideCounter>>) {
        let mut guard = self.inner.lock();
        let inner: &mut Inner = &mut guard;
        for (index, now) in sides.iter().enumerate() {
            let moved = moved(inner.seen.get(index), now);
            if moved == Traffic::default() {
                continue;
            }
            for (span, stretches) in [(HOUR, &mut inner.minutes), (DAY, &mut inner.quarters)] {
                let stretch =
                    stretches.entry(span.stretch(unix_secs)).or_insert_with(|| vec![Traffic::default(); sides.len()]);
                if let Some(traffic) = stretch.get_mut(index) {
                    add(traffic, &moved);
                }
            }
        }
        inner.seen = sides;
        inner.let_go(unix_secs);
    }

    /// `side`'s traffic over `span`, up to the stretch of `unix_secs`.
    pub fn series(&self, side: SideId, span: Span, unix_secs: u64) -> TrafficSeries {
        let inner = self.inner.lock();
        let stretches = if span == HOUR { &inner.minutes } else { &inner.quarters };
        let last = span.stretch(unix_secs);
        let first = last.saturating_sub(span.count - 1);
        let shown = (first..=last).map(|number| {
            stretches.get(&number).and_then(|sides| sides.get(side.index())).copied().unwrap_or_default()
        });
        TrafficSeries { start: first * span.step, step_seconds: span.step, stretches: shown.collect() }
    }

    /// What is kept across a restart: the stretches of the hour and day.
    pub fn kept(&self) -> Kept {
        let inner = self.inner.lock();
        Kept { minutes: inner.minutes.clone(), quarters: inner.quarters.clone() }
    }
}

impl Inner {
    /// Lets go of the stretches no chart shows at `unix_secs`.
    fn let_go(&mut self, unix_secs: u64) {
        self.minutes.retain(|number, _| HOUR.shows(*number, unix_secs));
        self.quarters.retain(|number, _| DAY.shows(*number, unix_secs));
    }
}

/// The stretches kept across a restart, each side's in [`SideId::ALL`]'s
/// order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    /// The hour's minutes that saw traffic, by number since the epoch.
    pub minutes: BTreeMap<u64, Vec<Traffic>>,
    /// The day's quarter hours that saw traffic, by number since the epoch.
    pub quarters: BTreeMap<u64, Vec<Traffic>>,
}

/// What the counters moved from `before` (none: all zero) to `now`.
fn moved(before: Option<&Snapshot<SideCounter>>, now: &Snapshot<SideCounter>) -> Traffic {
    let moved = |counter| now.get(counter).saturating_sub(before.map_or(0, |before| before.get(counter)));
    Traffic {
        requests: moved(SideCounter::Requests),
        hits: moved(SideCounter::Hits),
        misses: moved(SideCounter::Misses),
        refused: moved(SideCounter::Refused),
        failed: moved(SideCounter::Failed),
        bytes_from_cache: moved(SideCounter::BytesFromCache),
        bytes_from_upstream: moved(SideCounter::BytesFromUpstream),
    }
}

/// Adds `more` to `traffic`.
fn add(traffic: &mut Traffic, more: &Traffic) {
    traffic.requests += more.requests;
    traffic.hits += more.hits;
    traffic.misses += more.misses;
    traffic.refused += more.refused;
    traffic.failed += more.failed;
    traffic.bytes_from_cache += more.bytes_from_cache;
    traffic.bytes_from_upstream += more.bytes_from_upstream;
}

#[cfg(test)]
mod tests;
