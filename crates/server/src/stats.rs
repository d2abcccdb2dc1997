//! Each side's counters (the counters themselves are defined once, in
//! `pkgproxy-metrics`). A hit costs a few relaxed atomic adds: no lock, no
//! allocation.

use pkgproxy_metrics::{Counters, SideCounter};
use pkgproxy_sides::SideId;

/// The counters of every side.
#[derive(Debug, Default)]
pub struct Stats {
    sides: [Counters<SideCounter>; SideId::ALL.len()],
}

impl Stats {
    /// One side's counters.
    pub fn side(&self, side: SideId) -> &Counters<SideCounter> {
        &self.sides[side.index()]
    }
}
