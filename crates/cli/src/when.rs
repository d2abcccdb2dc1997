//! Times as pkgproxyctl writes them for people.

use std::time::{Duration, UNIX_EPOCH};

/// Unix seconds to the minute: `2026-12-01 12:03 UTC`.
pub fn utc(secs: u64) -> String {
    let stamp = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string();
    format!("{} {} UTC", &stamp[..10], &stamp[11..16])
}

#[cfg(test)]
mod tests {
    #[test]
    fn to_the_minute_in_utc() {
        assert_eq!(super::utc(1_800_000_000), "2027-01-15 08:00 UTC");
    }
}
