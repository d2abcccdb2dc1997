//! Every counter and timing pkgproxy keeps, each defined once: a variant
//! of a [`MetricSet`] with its name and help. The atomics that count
//! ([`Counters`]), the copy read at one moment ([`Snapshot`], which is what
//! `/pkgproxy/v1/info` sends as a JSON object of name and value and what
//! `pkgproxyctl` reads back), and the Prometheus text all come from that
//! one definition, so they cannot disagree: a renamed counter is renamed
//! everywhere, and a reader that expects a counter the answer lacks fails
//! instead of showing a zero.
//!
//! Counting costs one relaxed atomic add, timing two ([`Histogram`]): no
//! lock, no allocation, no map lookup on the hit path.

#![forbid(unsafe_code)]

mod histogram;
mod sets;
mod snapshot;

use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

pub use histogram::{Histogram, HistogramSnapshot, Histograms, HistogramsSnapshot, Timing, BOUNDS_SECONDS};
pub use sets::{AccessLogCounter, CacheGauge, ClientCounter, ShadowCounter, SideCounter, UpstreamCounter};
pub use snapshot::Snapshot;

/// Whether a metric only grows or goes up and down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (Prometheus names it `..._total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations counted in buckets ([`Histograms`]): Prometheus adds
    /// `_bucket`, `_sum` and `_count` to its name.
    Histogram,
}

/// What a metric is called and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Definition {
    /// Its name in the info JSON (`hits`); Prometheus adds the set's prefix
    /// and, for a counter, `_total`.
    pub name: &'static str,
    /// One sentence for people (the metrics' `HELP`).
    pub help: &'static str,
}

/// A closed set of metrics kept together (the counters of one side, say).
pub trait MetricSet: Copy + Eq + Debug + Send + Sync + 'static {
    /// Every metric of the set, in the order they are shown.
    const ALL: &'static [Self];
    /// Whether the set's metrics are counters, gauges or histograms.
    const KIND: Kind;
    /// What comes before each name in the metrics (`upstream_` for
    /// `pkgproxy_upstream_requests_total`).
    const PROMETHEUS_PREFIX: &'static str;

    /// Its name and help.
    fn definition(self) -> Definition;

    /// Its place in [`MetricSet::ALL`].
    fn index(self) -> usize;

    /// Its full Prometheus name, `pkgproxy_` included.
    fn prometheus_name(self) -> String {
        let suffix = match Self::KIND {
            Kind::Counter => "_total",
            Kind::Gauge | Kind::Histogram => "",
        };
        format!("pkgproxy_{}{}{suffix}", Self::PROMETHEUS_PREFIX, self.definition().name)
    }
}

/// Live counters of one set.
#[derive(Debug)]
pub struct Counters<S: MetricSet> {
    values: Box<[AtomicU64]>,
    set: PhantomData<S>,
}

impl<S: MetricSet> Default for Counters<S> {
    fn default() -> Self {
        Counters { values: S::ALL.iter().map(|_| AtomicU64::new(0)).collect(), set: PhantomData }
    }
}

impl<S: MetricSet> Counters<S> {
    /// Adds `n` to `counter`; returns its new value.
    pub fn add(&self, counter: S, n: u64) -> u64 {
        self.values[counter.index()].fetch_add(n, Ordering::Relaxed) + n
    }

    /// Adds one to `counter`; returns its new value.
    pub fn increment(&self, counter: S) -> u64 {
        self.add(counter, 1)
    }

    /// The value of `counter` now.
    pub fn get(&self, counter: S) -> u64 {
        self.values[counter.index()].load(Ordering::Relaxed)
    }

    /// Every counter now.
    pub fn snapshot(&self) -> Snapshot<S> {
        Snapshot::from_fn(|counter| self.get(counter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_set_lists_each_variant_at_its_index_once() {
        fn check<S: MetricSet>() {
            for (position, metric) in S::ALL.iter().enumerate() {
                assert_eq!(metric.index(), position, "{metric:?}");
            }
            let mut names: Vec<&str> = S::ALL.iter().map(|m| m.definition().name).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), S::ALL.len(), "names are unique");
        }
        check::<SideCounter>();
        check::<UpstreamCounter>();
        check::<ShadowCounter>();
        check::<CacheGauge>();
        check::<ClientCounter>();
        check::<Timing>();
    }

    #[test]
    fn counters_count_and_prometheus_names_follow_the_kind() {
        let counters = Counters::<SideCounter>::default();
        counters.increment(SideCounter::Hits);
        counters.add(SideCounter::BytesFromCache, 4096);
        let snapshot = counters.snapshot();
        assert_eq!(snapshot.get(SideCounter::Hits), 1);
        assert_eq!(snapshot.get(SideCounter::BytesFromCache), 4096);
        assert_eq!(snapshot.get(SideCounter::Misses), 0);
        assert_eq!(SideCounter::Hits.prometheus_name(), "pkgproxy_hits_total");
        assert_eq!(UpstreamCounter::Requests.prometheus_name(), "pkgproxy_upstream_requests_total");
        assert_eq!(CacheGauge::Entries.prometheus_name(), "pkgproxy_cache_entries");
        assert_eq!(Timing::Request.prometheus_name(), "pkgproxy_request_duration_seconds");
    }
}
