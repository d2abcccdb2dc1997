//! `Release` and `InRelease`: what a suite's index files must be. Pure
//! parsing; the apt index keeps what it learns.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::deb822::{fields, signed_text, stanzas};

/// The size and SHA-256 a `Release` lists for one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSum {
    /// Size in bytes.
    pub size: u64,
    /// SHA-256.
    pub sha256: [u8; 32],
}

/// What a `Release` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Release {
    /// Its `Date:`, when present and readable.
    pub date: Option<SystemTime>,
    /// Its `Valid-Until:`: apt refuses the Release after it.
    pub valid_until: Option<SystemTime>,
    /// `Acquire-By-Hash: yes`.
    pub acquire_by_hash: bool,
    /// The files of its `SHA256:` list, by path relative to the suite
    /// (`main/binary-amd64/Packages.xz`).
    pub files: BTreeMap<String, FileSum>,
}

/// Text that is not a `Release`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// No field at all.
    #[error("not a Release file: no fields")]
    NoFields,
}

/// Parses a `Release` or a clear-signed `InRelease`.
pub fn parse(bytes: &[u8]) -> Result<Release, ReleaseError> {
    let text = String::from_utf8_lossy(bytes);
    let text = signed_text(&text);
    let stanza = stanzas(text).next().ok_or(ReleaseError::NoFields)?;
    let mut release = Release::default();
    let mut any = false;
    for field in fields(stanza) {
        any = true;
        match field.name {
            "Date" => release.date = parse_date(field.value),
            "Valid-Until" => release.valid_until = parse_date(field.value),
            "Acquire-By-Hash" => release.acquire_by_hash = field.value.eq_ignore_ascii_case("yes"),
            "SHA256" => {
                for line in field.value.lines() {
                    if let Some((path, sum)) = sum_line(line) {
                        release.files.insert(path.to_string(), sum);
                    }
                }
            }
            _ => {}
        }
    }
    if any {
        Ok(release)
    } else {
        Err(ReleaseError::NoFields)
    }
}

/// ` <sha256 hex> <size> <path>`.
fn sum_line(line: &str) -> Option<(&str, FileSum)> {
    let mut words = line.split_whitespace();
    let (hash, size, path) = (words.next()?, words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    Some((path, FileSum { size: size.parse().ok()?, sha256: hex32(hash)? }))
}

/// 64 hex digits as 32 bytes.
pub fn hex32(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// `date` to the minute, as people read it: `2026-12-01 12:03 UTC`.
pub fn minute_utc(date: SystemTime) -> String {
    let stamp = humantime::format_rfc3339_seconds(date).to_string();
    format!("{} {} UTC", &stamp[..10], &stamp[11..16])
}

/// Parses a Debian archive date, `Sat, 10 Jun 2023 08:56:12 UTC` (RFC 2822,
/// zone `UTC`, `GMT`, `Z` or `±HHMM`; the weekday optional).
pub fn parse_date(value: &str) -> Option<SystemTime> {
    let value = value.trim();
    let value = value.split_once(',').map_or(value, |(_, rest)| rest).trim();
    let mut words = value.split_whitespace();
    let day: u64 = words.next()?.parse().ok()?;
    let month = match words.next()?.to_ascii_lowercase().as_str() {
        "jan" => 1,
        "feb" => 2,
        "mar" => 3,
        "apr" => 4,
        "may" => 5,
        "jun" => 6,
        "jul" => 7,
        "aug" => 8,
        "sep" => 9,
        "oct" => 10,
        "nov" => 11,
        "dec" => 12,
        _ => return None,
    };
    let year: i64 = words.next()?.parse().ok()?;
    let mut clock = words.next()?.split(':');
    let hour: u64 = clock.next()?.parse().ok()?;
    let minute: u64 = clock.next()?.parse().ok()?;
    let second: u64 = clock.next().map_or(Some(0), |s| s.parse().ok())?;
    let offset = zone_offset(words.next().unwrap_or("UTC"))?;
    if !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 || !(1970..=9999).contains(&year) {
        return None;
    }
    let days = days_from_civil(year, month, day as i64);
    let secs = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset;
    u64::try_from(secs).ok().map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

fn zone_offset(zone: &str) -> Option<i64> {
    match zone {
        "UTC" | "GMT" | "Z" | "UT" => Some(0),
        _ => {
            let (sign, digits) = match zone.as_bytes().first()? {
                b'+' => (1, &zone[1..]),
                b'-' => (-1, &zone[1..]),
                _ => return None,
            };
            if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let hours: i64 = digits[..2].parse().ok()?;
            let minutes: i64 = digits[2..].parse().ok()?;
            Some(sign * (hours * 3600 + minutes * 60))
        }
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELEASE: &str = "-----BEGIN PGP SIGNED MESSAGE-----
Hash: SHA512

Origin: pkgproxy-test
Suite: testing
Date: Mon, 30 Nov 2026 04:37:38 UTC
Acquire-By-Hash: yes
MD5Sum:
 0123456789abcdef0123456789abcdef 100 main/binary-amd64/Packages
SHA256:
 b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9 11 main/binary-amd64/Packages
 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 0 main/binary-amd64/Packages.xz
 nothex 5 main/bad
-----BEGIN PGP SIGNATURE-----

iQ==
-----END PGP SIGNATURE-----
";

    #[test]
    fn in_release_gives_dates_flags_and_sums() {
        let release = parse(RELEASE.as_bytes()).unwrap();
        assert!(release.acquire_by_hash);
        assert_eq!(release.files.len(), 2);
        let packages = release.files["main/binary-amd64/Packages"];
        assert_eq!(packages.size, 11);
        assert_eq!(packages.sha256[0], 0xb9);
        assert_eq!(release.date, parse_date("Mon, 30 Nov 2026 04:37:38 GMT"));
        assert!(release.date.is_some());
    }

    #[test]
    fn dates() {
        let epoch = |s: &str| parse_date(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(epoch("Thu, 01 Jan 1970 00:00:00 UTC"), Some(0));
        assert_eq!(epoch("Sat, 10 Jun 2023 08:56:12 UTC"), Some(1_686_387_372));
        assert_eq!(epoch("10 Jun 2023 10:56:12 +0200"), Some(1_686_387_372));
        assert_eq!(epoch("Sat, 29 Feb 2024 00:00:00 Z"), Some(1_709_164_800));
        assert_eq!(epoch("yesterday"), None);
        assert_eq!(epoch("Sat, 10 Foo 2023 08:56:12 UTC"), None);
        assert_eq!(epoch("Sat, 10 Jun 2023 25:56:12 UTC"), None);
    }

    #[test]
    fn plain_release_and_garbage() {
        let plain = "Origin: x\nSHA256:\n e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 0 a\n";
        assert_eq!(parse(plain.as_bytes()).unwrap().files.len(), 1);
        assert_eq!(parse(b""), Err(ReleaseError::NoFields));
        assert_eq!(parse(b"\xff\xfe garbage without colon"), Err(ReleaseError::NoFields));
    }
}
