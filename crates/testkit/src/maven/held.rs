//! A version the fake repository holds, and the minute it was published:
//! what its files, its metadata and its dates are made from.

use std::time::{Duration, SystemTime};

use super::MavenArtifact;

/// A version held, and when it was published.
#[derive(Clone)]
pub(super) struct Held {
    pub(super) artifact: MavenArtifact,
    /// Minutes after 2026-01-01 00:00 UTC.
    pub(super) minute: u64,
}

/// 2026-01-01 00:00 UTC, in seconds since the epoch: the minutes of
/// publishing count from it.
pub(super) const EPOCH: u64 = 1_767_225_600;

pub(super) fn instant(minute: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH + 60 * minute)
}

/// `minute` as `<lastUpdated>` writes one, `YYYYMMDDHHMMSS` (UTC).
pub(super) fn last_updated(minute: u64) -> String {
    chrono::DateTime::<chrono::Utc>::from(instant(minute)).format("%Y%m%d%H%M%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_updated_is_utc_digits() {
        assert_eq!(last_updated(60), "20260101010000");
    }
}
