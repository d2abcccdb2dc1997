//! Publish times as registries write them: RFC 3339, with any offset and
//! any fraction (`2011-10-21T20:42:56.318Z`, `2025-11-20T12:34:56+00:00`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The instant `text` names, if it is an RFC 3339 time.
pub fn parse_time(text: &str) -> Option<SystemTime> {
    let parsed = chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?;
    let seconds = parsed.timestamp();
    let nanos = parsed.timestamp_subsec_nanos();
    match u64::try_from(seconds) {
        Ok(seconds) => UNIX_EPOCH.checked_add(Duration::new(seconds, nanos)),
        // Before 1970: earlier than any release, kept as the epoch.
        Err(_) => Some(UNIX_EPOCH),
    }
}

/// `at` to the minute, in UTC: `2026-12-06T10:00Z`.
pub fn format_minute(at: SystemTime) -> String {
    let datetime: chrono::DateTime<chrono::Utc> = at.into();
    datetime.format("%Y-%m-%dT%H:%MZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_times_parse_with_any_offset_and_fraction() {
        let z = parse_time("2011-10-21T20:42:56.318Z").unwrap();
        let offset = parse_time("2011-10-21T22:42:56.318+02:00").unwrap();
        assert_eq!(z, offset);
        assert_eq!(format_minute(z), "2011-10-21T20:42Z");
        assert!(parse_time("2025-11-20T12:34:56.123456Z").is_some());
        assert!(parse_time("yesterday").is_none());
        assert!(parse_time("").is_none());
    }
}
