//! Each side's traffic over the last hour, minute by minute, for the status
//! page's charts: the counters are looked at every few seconds (and when
//! the page asks), the first look in each minute kept; a minute's traffic
//! is what the counters moved since the look before it. Minutes nobody
//! looked in (the daemon was busy, or just started) count nothing.

use std::collections::VecDeque;
use std::sync::Mutex;

use pkgproxy_control::MinuteTraffic;
use pkgproxy_metrics::{SideCounter, Snapshot};
use pkgproxy_sides::SideId;

/// The minutes shown.
pub const MINUTES: u64 = 60;

/// Each side's counters as first seen in each of the last minutes.
#[derive(Debug, Default)]
pub struct History {
    looks: Mutex<VecDeque<(u64, Vec<Snapshot<SideCounter>>)>>,
}

impl History {
    /// Keeps `sides` (each side's counters, in [`SideId::ALL`]'s order) as
    /// seen at `unix_secs`, unless this minute was seen already.
    pub fn look(&self, unix_secs: u64, sides: Vec<Snapshot<SideCounter>>) {
        let minute = unix_secs / 60;
        let mut looks = self.looks.lock().unwrap_or_else(|p| p.into_inner());
        if looks.back().is_some_and(|(seen, _)| *seen >= minute) {
            return;
        }
        looks.push_back((minute, sides));
        while looks.front().is_some_and(|(seen, _)| *seen + MINUTES + 1 < minute) {
            looks.pop_front();
        }
    }

    /// `side`'s traffic in each of the [`MINUTES`] minutes before
    /// `unix_secs`'s, oldest first.
    pub fn last_hour(&self, side: SideId, unix_secs: u64) -> Vec<MinuteTraffic> {
        let now = unix_secs / 60;
        let looks = self.looks.lock().unwrap_or_else(|p| p.into_inner());
        let mut minutes = vec![MinuteTraffic::default(); MINUTES as usize];
        for pair in looks.iter().collect::<Vec<_>>().windows(2) {
            let ((_, before), (minute, after)) = (pair[0], pair[1]);
            // What moved between two looks belongs to the minute before the
            // later one: the first look in a minute closes the last.
            let Some(age) = now.checked_sub(minute.saturating_sub(1)) else { continue };
            if age == 0 || age > MINUTES {
                continue;
            }
            let (before, after) = (&before[side.index()], &after[side.index()]);
            let moved = |counter| after.get(counter).saturating_sub(before.get(counter));
            minutes[(MINUTES - age) as usize] = MinuteTraffic {
                requests: moved(SideCounter::Requests),
                hits: moved(SideCounter::Hits),
                misses: moved(SideCounter::Misses),
                failed: moved(SideCounter::Failed),
                bytes: moved(SideCounter::BytesFromCache) + moved(SideCounter::BytesFromUpstream),
            };
        }
        minutes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkgproxy_metrics::Counters;

    #[test]
    fn each_minute_counts_what_moved_since_the_look_before() {
        let history = History::default();
        let counters: Vec<Counters<SideCounter>> = SideId::ALL.iter().map(|_| Counters::default()).collect();
        let look = |at: u64| history.look(at, counters.iter().map(Counters::snapshot).collect());
        let apt = SideId::Apt;
        let start = 1_800_000_000 / 60 * 60;
        look(start);
        counters[apt.index()].add(SideCounter::Requests, 5);
        counters[apt.index()].add(SideCounter::Hits, 4);
        look(start + 30); // the same minute: not kept
        look(start + 60);
        counters[apt.index()].add(SideCounter::Requests, 2);
        look(start + 180); // two minutes nobody looked in
        let hour = history.last_hour(apt, start + 240);
        assert_eq!(hour.len(), 60);
        let requests: Vec<u64> = hour.iter().map(|minute| minute.requests).collect();
        assert_eq!(&requests[56..], [5, 0, 2, 0], "{requests:?}");
        assert_eq!(hour[56].hits, 4);
        assert!(history.last_hour(SideId::Go, start + 240).iter().all(|minute| minute.requests == 0));
        assert!(history.last_hour(apt, start + 240 + 3600).iter().all(|minute| minute.requests == 0), "an hour on");
    }
}
