//! A set's values at one moment, as the info JSON carries them: an object
//! of each metric's name and value, in the set's order. Reading one back
//! needs every metric of the set: a missing one is an error, never a zero.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::MetricSet;

/// The values of a set's metrics at one moment.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot<S: MetricSet> {
    values: Vec<u64>,
    set: PhantomData<S>,
}

impl<S: MetricSet> Snapshot<S> {
    /// A snapshot whose values `value` gives.
    pub fn from_fn(mut value: impl FnMut(S) -> u64) -> Self {
        Snapshot { values: S::ALL.iter().map(|&metric| value(metric)).collect(), set: PhantomData }
    }

    /// The value of `metric`.
    pub fn get(&self, metric: S) -> u64 {
        self.values[metric.index()]
    }

    /// Each metric and its value, in the set's order.
    pub fn iter(&self) -> impl Iterator<Item = (S, u64)> + '_ {
        S::ALL.iter().map(|&metric| (metric, self.get(metric)))
    }
}

impl<S: MetricSet> Default for Snapshot<S> {
    fn default() -> Self {
        Snapshot::from_fn(|_| 0)
    }
}

impl<S: MetricSet> fmt::Debug for Snapshot<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter().map(|(metric, value)| (metric.definition().name, value))).finish()
    }
}

impl<S: MetricSet> Serialize for Snapshot<S> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let mut map = serializer.serialize_map(Some(S::ALL.len()))?;
        for (metric, value) in self.iter() {
            map.serialize_entry(metric.definition().name, &value)?;
        }
        map.end()
    }
}

impl<'de, S: MetricSet> Deserialize<'de> for Snapshot<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(SnapshotVisitor(PhantomData))
    }
}

struct SnapshotVisitor<S>(PhantomData<S>);

impl<'de, S: MetricSet> Visitor<'de> for SnapshotVisitor<S> {
    type Value = Snapshot<S>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of metric names and values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values: Vec<Option<u64>> = vec![None; S::ALL.len()];
        while let Some(name) = map.next_key::<String>()? {
            match S::ALL.iter().find(|metric| metric.definition().name == name) {
                Some(metric) => values[metric.index()] = Some(map.next_value()?),
                // A newer daemon may count more than this reader knows.
                None => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let mut snapshot = Snapshot::<S>::default();
        for (metric, value) in S::ALL.iter().zip(values) {
            snapshot.values[metric.index()] =
                value.ok_or_else(|| de::Error::missing_field(metric.definition().name))?;
        }
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Counters, SideCounter};

    use super::*;

    #[test]
    fn a_snapshot_goes_through_json_and_back() {
        let counters = Counters::<SideCounter>::default();
        counters.add(SideCounter::Requests, 3);
        counters.add(SideCounter::StaleServed, 1);
        let json = serde_json::to_value(counters.snapshot()).unwrap();
        assert_eq!(json["requests"], 3);
        assert_eq!(json["stale_served"], 1);
        let back: Snapshot<SideCounter> = serde_json::from_value(json).unwrap();
        assert_eq!(back, counters.snapshot());
    }

    #[test]
    fn a_missing_counter_is_an_error_and_an_unknown_one_is_ignored() {
        let mut json = serde_json::to_value(Snapshot::<SideCounter>::default()).unwrap();
        json["counted_by_a_newer_daemon"] = 5.into();
        assert!(serde_json::from_value::<Snapshot<SideCounter>>(json.clone()).is_ok());
        json.as_object_mut().unwrap().remove("hits");
        let error = serde_json::from_value::<Snapshot<SideCounter>>(json).unwrap_err().to_string();
        assert!(error.contains("hits"), "{error}");
    }
}
