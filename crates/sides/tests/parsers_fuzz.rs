//! Property tests ("fuzzing") of the parsers that read what upstreams send:
//! `Release`, `Packages`, archive dates, and the apt index's own records.
//! None may panic on any input, and what they read back must be what was
//! written. CI runs the default number of cases; for a longer run:
//! `PROPTEST_CASES=200000 cargo test --release -p pkgproxy-sides --test parsers_fuzz`.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use pkgproxy_sides::apt::packages::{self, Compression};
use pkgproxy_sides::apt::release::{self, FileSum};
use proptest::prelude::*;

/// Text that looks like deb822 often enough to reach deep into the parsers.
fn deb822ish() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        "[A-Za-z0-9-]{1,12}: [ -~]{0,40}",
        " [0-9a-f]{64} [0-9]{1,8} [a-z/._-]{1,30}",
        " [ -~]{0,60}",
        "",
        "-----BEGIN PGP SIGNED MESSAGE-----",
        "-----BEGIN PGP SIGNATURE-----",
        "Hash: SHA512",
        "SHA256:",
        "Filename: [ -~]{0,40}",
        "Size: [0-9a-z]{0,12}",
        "SHA256: [0-9a-fA-F]{0,70}",
        "Date: [ -~]{0,40}",
        "[\\x00-\\xff]{0,20}",
    ];
    prop::collection::vec(line, 0..40).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #[test]
    fn release_parsing_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = release::parse(&bytes);
    }

    #[test]
    fn release_parsing_never_panics_on_deb822ish_text(text in deb822ish()) {
        let _ = release::parse(text.as_bytes());
    }

    #[test]
    fn packages_parsing_never_panics(text in deb822ish(), bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = packages::for_each(text.as_bytes(), |_| {});
        let _ = packages::for_each(bytes.as_slice(), |_| {});
        for compression in [Compression::Gzip, Compression::Xz] {
            let _ = packages::for_each(compression.reader(bytes.as_slice()), |_| {});
        }
    }

    #[test]
    fn dates_never_panic(text in "[ -~]{0,60}") {
        let _ = release::parse_date(&text);
    }

    #[test]
    fn dates_read_back(secs in 0u64..253_402_300_799) {
        let time = UNIX_EPOCH + Duration::from_secs(secs);
        let written = httpdate_like(secs);
        prop_assert_eq!(release::parse_date(&written), Some(time), "{}", written);
    }

    #[test]
    fn a_written_release_reads_back(
        files in prop::collection::btree_map("[a-z0-9]{1,8}(/[a-z0-9.-]{1,12}){0,3}", (any::<u64>(), any::<[u8; 32]>()), 0..30),
        by_hash in any::<bool>(),
        signed in any::<bool>(),
    ) {
        let mut text = String::from("Origin: test\nDate: Sat, 10 Jun 2023 08:56:12 UTC\n");
        if by_hash {
            text.push_str("Acquire-By-Hash: yes\n");
        }
        text.push_str("SHA256:\n");
        for (path, (size, sha)) in &files {
            text.push_str(&format!(" {} {size} {path}\n", hex(sha)));
        }
        if signed {
            text = format!("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\n{text}-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n");
        }
        let parsed = release::parse(text.as_bytes()).unwrap();
        let want: BTreeMap<String, FileSum> =
            files.into_iter().map(|(p, (size, sha256))| (p, FileSum { size, sha256 })).collect();
        prop_assert_eq!(parsed.files, want);
        prop_assert_eq!(parsed.acquire_by_hash, by_hash);
        prop_assert!(parsed.date.is_some());
    }

    #[test]
    fn a_written_packages_index_reads_back(
        entries in prop::collection::vec(("pool/[a-z]/[a-z0-9+~._-]{1,20}\\.deb", any::<u64>(), any::<[u8; 32]>()), 0..40),
    ) {
        let mut text = String::new();
        for (i, (name, size, sha)) in entries.iter().enumerate() {
            text.push_str(&format!("Package: p{i}\nFilename: {name}\nSize: {size}\nSHA256: {}\nDescription: x\n long\n\n", hex(sha)));
        }
        let mut read = Vec::new();
        packages::for_each(text.as_bytes(), |f| read.push((f.filename.to_string(), f.size, f.sha256))).unwrap();
        prop_assert_eq!(read, entries);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `Sat, 10 Jun 2023 08:56:12 UTC` for a time, written independently of the
/// parser (civil-from-days).
fn httpdate_like(secs: u64) -> String {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{:02} {} {year} {:02}:{:02}:{:02} UTC",
        day,
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
