//! Timings kept as histograms: how long something took, counted in fixed
//! buckets, for percentiles an alert or a dashboard can read
//! (`histogram_quantile`). The buckets are one set for every timing, chosen
//! for a cache: from a tenth of a millisecond (a hit's head on a local
//! disk) to a minute (an upstream at the end of its patience).
//!
//! Observing costs two relaxed atomic adds (the bucket and the sum) and a
//! search of a fixed array: no lock, no allocation, so a hit can be timed.
//! The count is the buckets' sum, read when a snapshot is taken, so a
//! snapshot's buckets and count always agree.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Definition, Kind, MetricSet};

/// The buckets' upper bounds, in seconds (Prometheus' `le`); above the last
/// is the `+Inf` bucket.
pub const BOUNDS_SECONDS: [f64; 18] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// The same bounds in nanoseconds, as observations are compared with them.
const BOUNDS_NANOS: [u64; 18] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
    60_000_000_000,
];

/// What pkgproxy times, per side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// A client's request that a side served (the ones
    /// `pkgproxy_requests_total` counts), from its head's arrival to its
    /// answer's head.
    Request,
    /// An upstream request a side sent, from its sending to the head of
    /// the answer it ended with (retries on other instances, a token asked
    /// for and redirects followed included); requests that got no answer
    /// are not timed.
    Upstream,
}

impl MetricSet for Timing {
    const ALL: &'static [Self] = &[Timing::Request, Timing::Upstream];
    const KIND: Kind = Kind::Histogram;
    const PROMETHEUS_PREFIX: &'static str = "";

    fn definition(self) -> Definition {
        let (name, help) = match self {
            Timing::Request => (
                "request_duration_seconds",
                "Seconds from a client's request arriving to its answer's head, for the requests a side served.",
            ),
            Timing::Upstream => (
                "upstream_duration_seconds",
                "Seconds from a side's upstream request being sent to its answer's head (retries and redirects included).",
            ),
        };
        Definition { name, help }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One live histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last is `+Inf`'s.
    buckets: [AtomicU64; BOUNDS_NANOS.len() + 1],
    /// The observations' sum, in nanoseconds (584 years before it wraps).
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Counts one observation of `took`.
    pub fn observe(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Its values now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = Vec::with_capacity(self.buckets.len());
        let mut total = 0;
        for bucket in &self.buckets {
            total += bucket.load(Ordering::Relaxed);
            cumulative.push(total);
        }
        let sum_seconds = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        HistogramSnapshot { bounds_seconds: BOUNDS_SECONDS.to_vec(), cumulative, sum_seconds }
    }
}

/// A histogram's values at one moment, as the info JSON carries them:
/// each bucket's bound and cumulative count, as Prometheus has them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Raw", into = "HistogramSnapshotJson")]
pub struct HistogramSnapshot {
    bounds_seconds: Vec<f64>,
    /// One more than the bounds: the last is `+Inf`'s, the count.
    cumulative: Vec<u64>,
    sum_seconds: f64,
}

/// The JSON form, checked when read back.
#[derive(Serialize)]
struct HistogramSnapshotJson {
    bounds_seconds: Vec<f64>,
    cumulative: Vec<u64>,
    sum_seconds: f64,
    count: u64,
}

impl From<HistogramSnapshot> for HistogramSnapshotJson {
    fn from(snapshot: HistogramSnapshot) -> Self {
        let count = snapshot.count();
        HistogramSnapshotJson {
            bounds_seconds: snapshot.bounds_seconds,
            cumulative: snapshot.cumulative,
            sum_seconds: snapshot.sum_seconds,
            count,
        }
    }
}

impl HistogramSnapshot {
    /// The number of observations.
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    /// The observations' sum, in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_seconds
    }

    /// Each bucket's upper bound (`None`: `+Inf`) and the observations at
    /// or under it, in rising order.
    pub fn buckets(&self) -> impl Iterator<Item = (Option<f64>, u64)> + '_ {
        let bounds = self.bounds_seconds.iter().copied().map(Some).chain([None]);
        bounds.zip(self.cumulative.iter().copied())
    }
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        Histogram::default().snapshot()
    }
}

/// Read back from JSON: a bucket per bound and one more, never falling.
#[derive(Deserialize)]
struct Raw {
    bounds_seconds: Vec<f64>,
    cumulative: Vec<u64>,
    sum_seconds: f64,
}

impl TryFrom<Raw> for HistogramSnapshot {
    type Error = String;

    fn try_from(raw: Raw) -> Result<Self, String> {
        if raw.cumulative.len() != raw.bounds_seconds.len() + 1 {
            return Err(format!(
                "a histogram of {} bounds has {} buckets, not one more",
                raw.bounds_seconds.len(),
                raw.cumulative.len()
            ));
        }
        if raw.cumulative.windows(2).any(|pair| pair[0] > pair[1]) {
            return Err("a histogram's cumulative counts fall".to_string());
        }
        Ok(HistogramSnapshot {
            bounds_seconds: raw.bounds_seconds,
            cumulative: raw.cumulative,
            sum_seconds: raw.sum_seconds,
        })
    }
}

/// Live histograms of one set (a side's timings).
#[derive(Debug)]
pub struct Histograms<S: MetricSet> {
    values: Box<[Histogram]>,
    set: PhantomData<S>,
}

impl<S: MetricSet> Default for Histograms<S> {
    fn default() -> Self {
        Histograms { values: S::ALL.iter().map(|_| Histogram::default()).collect(), set: PhantomData }
    }
}

impl<S: MetricSet> Histograms<S> {
    /// Counts one observation of `took` in `timing`'s histogram.
    pub fn observe(&self, timing: S, took: Duration) {
        self.values[timing.index()].observe(took);
    }

    /// Every histogram now, by name.
    pub fn snapshot(&self) -> HistogramsSnapshot<S> {
        HistogramsSnapshot { values: self.values.iter().map(Histogram::snapshot).collect(), set: PhantomData }
    }
}

/// A set's histograms at one moment: in the info JSON, an object of each
/// one's name and values. Reading one back needs every histogram of the set.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramsSnapshot<S: MetricSet> {
    values: Vec<HistogramSnapshot>,
    set: PhantomData<S>,
}

impl<S: MetricSet> HistogramsSnapshot<S> {
    /// `timing`'s histogram.
    pub fn get(&self, timing: S) -> &HistogramSnapshot {
        &self.values[timing.index()]
    }

    /// Each histogram, in the set's order.
    pub fn iter(&self) -> impl Iterator<Item = (S, &HistogramSnapshot)> + '_ {
        S::ALL.iter().map(|&timing| (timing, self.get(timing)))
    }
}

impl<S: MetricSet> Default for HistogramsSnapshot<S> {
    fn default() -> Self {
        Histograms::<S>::default().snapshot()
    }
}

impl<S: MetricSet> Serialize for HistogramsSnapshot<S> {
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(S::ALL.len()))?;
        for (timing, histogram) in self.iter() {
            map.serialize_entry(timing.definition().name, histogram)?;
        }
        map.end()
    }
}

impl<'de, S: MetricSet> Deserialize<'de> for HistogramsSnapshot<S> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // A newer daemon may time more than this reader knows.
        let mut by_name = std::collections::BTreeMap::<String, HistogramSnapshot>::deserialize(deserializer)?;
        let values = S::ALL
            .iter()
            .map(|timing| {
                let name = timing.definition().name;
                by_name.remove(name).ok_or_else(|| D::Error::missing_field(name))
            })
            .collect::<Result<_, _>>()?;
        Ok(HistogramsSnapshot { values, set: PhantomData })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_in_seconds_and_nanoseconds_agree_and_rise() {
        for (seconds, nanos) in BOUNDS_SECONDS.iter().zip(BOUNDS_NANOS) {
            assert_eq!((seconds * 1e9).round() as u64, nanos);
        }
        assert!(BOUNDS_NANOS.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn an_observation_on_a_bound_is_in_that_bucket_and_a_minute_and_more_is_in_inf() {
        let histogram = Histogram::default();
        histogram.observe(Duration::from_micros(100));
        histogram.observe(Duration::from_micros(101));
        histogram.observe(Duration::from_millis(3));
        histogram.observe(Duration::from_secs(61));
        let snapshot = histogram.snapshot();
        let buckets: Vec<(Option<f64>, u64)> = snapshot.buckets().collect();
        assert_eq!(buckets[0], (Some(0.0001), 1), "on the bound");
        assert_eq!(buckets[1], (Some(0.00025), 2));
        assert_eq!(buckets[4], (Some(0.0025), 2));
        assert_eq!(buckets[5], (Some(0.005), 3));
        assert_eq!(buckets[17], (Some(60.0), 3));
        assert_eq!(buckets[18], (None, 4), "+Inf holds every observation");
        assert_eq!(snapshot.count(), 4);
        assert!((snapshot.sum_seconds() - 61.003201).abs() < 1e-9, "{}", snapshot.sum_seconds());
    }

    #[test]
    fn timings_go_through_json_and_back_and_a_missing_one_is_an_error() {
        let live = Histograms::<Timing>::default();
        live.observe(Timing::Upstream, Duration::from_millis(20));
        let json = serde_json::to_value(live.snapshot()).unwrap();
        assert_eq!(json["upstream_duration_seconds"]["count"], 1);
        assert_eq!(json["request_duration_seconds"]["count"], 0);
        let back: HistogramsSnapshot<Timing> = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, live.snapshot());

        let mut falling = json.clone();
        falling["upstream_duration_seconds"]["cumulative"][18] = 0.into();
        assert!(serde_json::from_value::<HistogramsSnapshot<Timing>>(falling).is_err());
        let mut missing = json;
        missing.as_object_mut().unwrap().remove("request_duration_seconds");
        let error = serde_json::from_value::<HistogramsSnapshot<Timing>>(missing).unwrap_err().to_string();
        assert!(error.contains("request_duration_seconds"), "{error}");
    }
}
