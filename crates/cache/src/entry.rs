//! What the index knows about one cached body.
//!
//! An [`Entry`] is the unit the cache serves: a complete, verified body in the
//! blob store plus the few response headers worth replaying and the validators
//! needed to revalidate it. It never describes a partial download.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How an entry ages. The side decides the class when it classifies a request;
/// the window of a revalidated entry comes from configuration at lookup time,
/// so changing the window applies to entries cached before the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Content that never changes under its name (`pool/**`, by-hash paths):
    /// cached forever once complete, never revalidated.
    Immutable,
    /// Content that changes under its name (`InRelease`, index files by name):
    /// revalidated with a conditional request once its window has passed.
    Revalidated,
}

impl Class {
    /// The name used in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Immutable => "immutable",
            Class::Revalidated => "revalidated",
        }
    }
}

/// The validators an upstream gave for a representation, replayed in a
/// conditional request when the entry is revalidated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validators {
    /// The upstream's `ETag`, verbatim (quotes included).
    pub etag: Option<String>,
    /// The upstream's `Last-Modified`, verbatim.
    pub last_modified: Option<String>,
}

impl Validators {
    /// True when there is nothing to make a conditional request with.
    pub fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }
}

/// One complete cached body and its metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "EntryRecord")]
pub struct Entry {
    /// Lower-case hex SHA-256 of the body: the blob's name in the store.
    pub sha256: String,
    /// Body length in bytes.
    pub size: u64,
    /// Response headers worth replaying to clients (`Content-Type`, ...), in
    /// the order the upstream sent them. Validators are kept apart.
    pub headers: Vec<(String, String)>,
    /// Validators for revalidation and for answering conditional requests.
    pub validators: Validators,
    /// When the body was last confirmed current by the upstream (a fetch or a
    /// `304`), in seconds since the Unix epoch.
    pub fetched_at: u64,
    /// How this entry ages.
    pub class: Class,
    /// When it was last served to a client or written, as last written: a
    /// use stamp ([`crate::recency::UseClock`]), nanoseconds since the Unix
    /// epoch, each later than the one before, so uses within one second
    /// keep their order (`0`: none recorded). Uses are written in batches
    /// ([`crate::recency`]): a crash loses a little recency, never an
    /// entry.
    #[serde(rename = "used_ns")]
    pub last_used_ns: u64,
}

/// Nanoseconds in a second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

impl Entry {
    /// Its place in the order of use, as written: its last use stamp, or
    /// when none was recorded, when it was fetched. Eviction takes the
    /// lowest first.
    pub fn use_order(&self) -> u64 {
        self.last_used_ns.max(self.fetched_at.saturating_mul(NANOS_PER_SEC))
    }

    /// The time the upstream last confirmed this entry.
    pub fn fetched_at_time(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.fetched_at)
    }
}

/// An entry as an index record holds it: of this version, or of one that
/// wrote its last use in whole seconds (`last_used`), read as the stamp of
/// that second's start.
#[derive(Deserialize)]
struct EntryRecord {
    sha256: String,
    size: u64,
    headers: Vec<(String, String)>,
    validators: Validators,
    fetched_at: u64,
    class: Class,
    #[serde(default)]
    used_ns: Option<u64>,
    #[serde(default)]
    last_used: u64,
}

impl From<EntryRecord> for Entry {
    fn from(record: EntryRecord) -> Entry {
        Entry {
            sha256: record.sha256,
            size: record.size,
            headers: record.headers,
            validators: record.validators,
            fetched_at: record.fetched_at,
            class: record.class,
            last_used_ns: record.used_ns.unwrap_or(record.last_used.saturating_mul(NANOS_PER_SEC)),
        }
    }
}

/// Seconds since the Unix epoch for `t`, saturating at the epoch.
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
