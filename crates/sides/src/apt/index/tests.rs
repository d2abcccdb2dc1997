//! The apt index on its own: Releases by date, pool sums, persistence,
//! bounded memory while learning.

use std::time::{Duration, UNIX_EPOCH};

use super::*;
use crate::apt::release::FileSum;

/// The time Releases are offered at in these tests: after all their dates.
fn now() -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000)
}

fn release(date_secs: u64, files: &[(&str, u8)]) -> Release {
    Release {
        date: Some(UNIX_EPOCH + Duration::from_secs(date_secs)),
        acquire_by_hash: true,
        files: files.iter().map(|(p, b)| (p.to_string(), FileSum { size: *b as u64, sha256: [*b; 32] })).collect(),
        ..Release::default()
    }
}

#[test]
fn a_newer_release_replaces_an_older_one_and_not_the_reverse() {
    let dir = tempfile::tempdir().unwrap();
    let index = AptIndex::open(&dir.path().join("apt.redb")).unwrap();
    let suite = "debian/dists/stable";
    assert_eq!(
        index.offer_release(suite, release(100, &[("main/binary-amd64/Packages", 1)]), now()).unwrap(),
        Offer::Accepted
    );
    assert_eq!(
        index.offer_release(suite, release(200, &[("main/binary-amd64/Packages", 2)]), now()).unwrap(),
        Offer::Accepted
    );
    let older = index.offer_release(suite, release(150, &[("main/binary-amd64/Packages", 3)]), now()).unwrap();
    assert!(matches!(older, Offer::Older { .. }));
    let future = release(1_000_000 + 3600, &[("main/binary-amd64/Packages", 4)]);
    assert!(matches!(index.offer_release(suite, future, now()).unwrap(), Offer::Future { .. }), "kept out");
    let skewed = release(1_000_000 + 30, &[("main/binary-amd64/Packages", 5)]);
    assert_eq!(index.offer_release(suite, skewed, now()).unwrap(), Offer::Accepted, "a clock a little ahead");
    let sum = index.index_file("debian", "dists/stable/main/binary-amd64/Packages").unwrap();
    assert_eq!(sum.sha256, [5; 32]);
    assert!(index.index_file("debian", "dists/stable/main/binary-i386/Packages").is_none());
    assert!(index.index_file("ubuntu", "dists/stable/main/binary-amd64/Packages").is_none());
}

#[test]
fn a_release_forgotten_lets_the_next_one_in_whatever_its_date_and_stays_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("apt.redb");
    let suite = "debian/dists/stable";
    {
        let index = AptIndex::open(&path).unwrap();
        index.offer_release(suite, release(500, &[]), now()).unwrap();
        assert!(index.forget_release(suite).unwrap());
        assert!(!index.forget_release(suite).unwrap(), "nothing left to forget");
        assert!(index.release(suite).is_none());
    }
    let index = AptIndex::open(&path).unwrap();
    assert!(index.release(suite).is_none(), "forgotten across a restart");
    assert_eq!(index.offer_release(suite, release(100, &[]), now()).unwrap(), Offer::Accepted);
}

#[test]
fn by_hash_files_are_named_from_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let index = AptIndex::open(&dir.path().join("apt.redb")).unwrap();
    let files = [("main/binary-amd64/Packages.xz", 7), ("main/binary-i386/Packages.xz", 8)];
    index.offer_release("debian/dists/stable", release(1, &files), now()).unwrap();
    let name = index.name_by_hash("debian", "dists/stable/main/binary-amd64", &[7; 32]);
    assert_eq!(name.as_deref(), Some("dists/stable/main/binary-amd64/Packages.xz"));
    assert_eq!(index.name_by_hash("debian", "dists/stable/main/binary-amd64", &[8; 32]), None);
}

#[test]
fn what_was_learnt_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("apt.redb");
    let packages = "Package: a\nFilename: pool/main/a/a_1_all.deb\nSize: 3\nSHA256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n";
    {
        let index = AptIndex::open(&path).unwrap();
        index.offer_release("debian/dists/stable", release(5, &[("main/binary-all/Packages", 9)]), now()).unwrap();
        assert_eq!(index.learn_packages("debian", packages.as_bytes()).unwrap(), 1);
    }
    let index = AptIndex::open(&path).unwrap();
    assert_eq!(index.release("debian/dists/stable").unwrap().files.len(), 1);
    let sum = index.pool_file("debian", "pool/main/a/a_1_all.deb").unwrap();
    assert_eq!(sum.size, 3);
    assert_eq!(sum.sha256[0], 0xe3);
    assert!(index.pool_file("debian", "pool/main/b/b.deb").is_none());
}

#[test]
fn suites_split_at_every_folder() {
    let splits: Vec<_> = suite_splits("dists/bookworm/main/binary-amd64/Packages").collect();
    assert_eq!(splits[0], ("dists/bookworm", "main/binary-amd64/Packages"));
    assert_eq!(splits[1], ("dists/bookworm/main", "binary-amd64/Packages"));
    assert_eq!(suite_splits("dists/x").count(), 0);
}

/// Learns a synthetic `Packages` index of one million entries and prints the
/// growth of the process's resident memory. Run by hand:
/// `cargo test -p pkgproxy-sides --release -- --ignored --nocapture million`.
#[test]
#[ignore = "a measurement, run by hand"]
fn memory_for_a_million_pool_entries() {
    let rss = || {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().to_string();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let index = AptIndex::open(&dir.path().join("apt.redb")).unwrap();
    let before = rss();
    let started = std::time::Instant::now();
    let entries = (0..1_000_000u32).map(|i| {
        format!(
            "Package: pkg{i}\nVersion: 1.0-{i}\nFilename: pool/main/p/pkg{i}/pkg{i}_1.0-{i}_amd64.deb\nSize: {i}\nSHA256: {:064x}\n\n",
            i
        )
    });
    let text: String = entries.collect();
    let text_kib = text.len() as u64 / 1024;
    let learnt = index.learn_packages("debian", text.as_bytes()).unwrap();
    drop(text);
    let after = rss();
    println!(
        "learnt {learnt} entries in {:.1} s; resident memory grew by {} KiB (the index text itself was {} KiB and is freed)",
        started.elapsed().as_secs_f64(),
        after.saturating_sub(before),
        text_kib
    );
    let file = std::fs::metadata(dir.path().join("apt.redb")).unwrap().len();
    println!("index file: {} MiB", file / (1024 * 1024));
    assert_eq!(learnt, 1_000_000);
    assert_eq!(index.pool_file("debian", "pool/main/p/pkg7/pkg7_1.0-7_amd64.deb").unwrap().size, 7);
}

mod records {
    use super::super::encoding::{decode_release, decode_sum, encode_release, encode_sum};
    use crate::apt::release::{FileSum, Release};
    use proptest::prelude::*;
    use std::time::{Duration, UNIX_EPOCH};

    proptest! {
        #[test]
        fn damaged_records_decode_to_nothing_or_something_not_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_release(&bytes);
            let _ = decode_sum(&bytes);
        }

        #[test]
        fn releases_round_trip(
            files in prop::collection::btree_map("[ -~]{0,40}", (any::<u64>(), any::<[u8; 32]>()), 0..20),
            date in prop::option::of(0u64..4_000_000_000),
            valid_until in prop::option::of(0u64..4_000_000_000),
            by_hash in any::<bool>(),
        ) {
            let release = Release {
                date: date.map(|s| UNIX_EPOCH + Duration::from_secs(s)),
                valid_until: valid_until.map(|s| UNIX_EPOCH + Duration::from_secs(s)),
                acquire_by_hash: by_hash,
                files: files.into_iter().map(|(p, (size, sha256))| (p, FileSum { size, sha256 })).collect(),
            };
            prop_assert_eq!(decode_release(&encode_release(&release)), Some(release));
        }
    }

    #[test]
    fn sums_round_trip_and_a_record_of_another_version_reads_as_absent() {
        let sum = FileSum { size: 4096, sha256: [7; 32] };
        let encoded = encode_sum(sum.size, &sum.sha256);
        assert_eq!(decode_sum(&encoded), Some(sum));
        assert_eq!(decode_sum(&encoded[1..]), None, "a record written before the version byte");
        let mut other = encoded;
        other[0] = 2;
        assert_eq!(decode_sum(&other), None, "a version this build does not know");
        let mut release = encode_release(&Release { acquire_by_hash: true, ..Release::default() });
        release[0] = 0;
        assert_eq!(decode_release(&release), None);
        // A record of the first layout, from before Valid-Until was kept.
        let mut first = vec![1u8];
        first.extend_from_slice(&100i64.to_le_bytes());
        first.push(1);
        first.extend_from_slice(&0u32.to_le_bytes());
        let read = decode_release(&first).expect("a first-layout record still reads");
        assert_eq!((read.date, read.valid_until), (Some(UNIX_EPOCH + Duration::from_secs(100)), None));
    }
}
