//! Each side's counters (the counters themselves are defined once, in
//! `pkgproxy-metrics`), kept apart for clients and for pkgproxy itself. A
//! hit costs a few relaxed atomic adds: no lock, no allocation.
//!
//! How a request ended is counted once, here ([`Stats::count`]), so that
//! the counters add up: every request a side served is one hit, miss,
//! refusal or failure. The same requests of clients are timed there too
//! ([`Timing::Request`]), so a side's histogram counts what its requests
//! counter counts. What pkgproxy asks of its own cache (`check`,
//! `warm`, fetch-ahead, a download's prerequisites, a bundle taken in) is
//! counted in a set of its own, so that the clients' hits and bytes from
//! the cache are theirs alone.

use std::time::Duration;

use pkgproxy_metrics::{Counters, Histograms, SideCounter, Timing};
use pkgproxy_sides::SideId;

/// Who asked for a request: a client of the listener, or pkgproxy itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requester {
    /// A client of the proxy listener.
    Client,
    /// pkgproxy itself: `check`, `warm`, fetch-ahead, prerequisites,
    /// bundles.
    Pkgproxy,
}

/// How a request a side served ended, for its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Answered from the cache (fresh, revalidated, stale or remembered).
    Hit,
    /// Answered with the upstream's own answer.
    Miss,
    /// Refused by pkgproxy with a `4xx`: the side's policy, or an upstream
    /// it did not ask (offline mode, an open breaker, a rate limit).
    Refused,
    /// Answered with a `5xx`: the upstream failed, nothing cached would do.
    Failed,
}

/// The counters of every side, for clients and for pkgproxy itself.
#[derive(Debug, Default)]
pub struct Stats {
    clients: [Counters<SideCounter>; SideId::ALL.len()],
    own: [Counters<SideCounter>; SideId::ALL.len()],
    timings: [Histograms<Timing>; SideId::ALL.len()],
}

impl Stats {
    /// One side's counters of its clients' requests.
    pub fn side(&self, side: SideId) -> &Counters<SideCounter> {
        &self.clients[side.index()]
    }

    /// One side's counters of pkgproxy's own requests.
    pub fn own(&self, side: SideId) -> &Counters<SideCounter> {
        &self.own[side.index()]
    }

    /// One side's counters of `requester`'s requests.
    pub fn of(&self, side: SideId, requester: Requester) -> &Counters<SideCounter> {
        match requester {
            Requester::Client => self.side(side),
            Requester::Pkgproxy => self.own(side),
        }
    }

    /// One side's timings.
    pub fn timings(&self, side: SideId) -> &Histograms<Timing> {
        &self.timings[side.index()]
    }

    /// Notes that `timing` of `side` took `took`.
    pub fn time(&self, side: SideId, timing: Timing, took: Duration) {
        self.timings[side.index()].observe(timing, took);
    }

    /// Counts a request of `requester` that `side` served and that ended
    /// as `ending`; `None` (an answer the side made itself, with no cache
    /// or upstream in it) counts nothing.
    pub fn count(&self, side: SideId, requester: Requester, ending: Option<Ending>) {
        let Some(ending) = ending else { return };
        let counters = self.of(side, requester);
        counters.increment(SideCounter::Requests);
        counters.increment(match ending {
            Ending::Hit => SideCounter::Hits,
            Ending::Miss => SideCounter::Misses,
            Ending::Refused => SideCounter::Refused,
            Ending::Failed => SideCounter::Failed,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ending_is_one_request_of_its_requester() {
        let stats = Stats::default();
        for ending in [Ending::Hit, Ending::Miss, Ending::Refused, Ending::Failed, Ending::Refused] {
            stats.count(SideId::Npm, Requester::Client, Some(ending));
        }
        stats.count(SideId::Npm, Requester::Pkgproxy, Some(Ending::Hit));
        stats.count(SideId::Npm, Requester::Client, None);
        let clients = stats.side(SideId::Npm).snapshot();
        let counted = [SideCounter::Hits, SideCounter::Misses, SideCounter::Refused, SideCounter::Failed]
            .map(|counter| clients.get(counter));
        assert_eq!(counted, [1, 1, 2, 1]);
        assert_eq!(clients.get(SideCounter::Requests), counted.iter().sum::<u64>(), "they add up");
        let own = stats.own(SideId::Npm).snapshot();
        assert_eq!((own.get(SideCounter::Requests), own.get(SideCounter::Hits)), (1, 1));
    }
}
