//! Loads OSV sources as pkgproxy does and measures what they cost: the
//! time to read them, the index's bytes, the process's resident memory,
//! and a lookup's time for names that are and are not in it.
//!
//! `cargo run --release -p pkgproxy-policy --example osv_lookup -- SOURCE...`

use std::path::Path;
use std::time::{Instant, SystemTime};

use pkgproxy_policy::{Ecosystem, Malicious, Release};

fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).unwrap_or(0)
}

fn main() {
    let sources: Vec<String> = std::env::args().skip(1).collect();
    let paths: Vec<&Path> = sources.iter().map(Path::new).collect();
    let before = resident_kib();
    let started = Instant::now();
    let malicious = match Malicious::read(&paths) {
        Ok(malicious) => malicious,
        Err(error) => {
            eprintln!("osv_lookup: {error}");
            std::process::exit(1);
        }
    };
    let loaded = started.elapsed();
    let stats = malicious.stats();
    println!(
        "records {} packages {} index {:.1} MiB load {:.2} s resident +{:.1} MiB",
        stats.records,
        stats.packages,
        stats.bytes as f64 / 1048576.0,
        loaded.as_secs_f64(),
        resident_kib().saturating_sub(before) as f64 / 1024.0
    );
    let seed = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(7, |d| d.subsec_nanos() as u64);
    let lookups = 1_000_000u64;
    let mut found = 0u64;
    let started = Instant::now();
    for i in 0..lookups {
        // Names the generator writes (`mal-pkg-N`) half the time, others
        // the rest.
        let n = (i.wrapping_mul(2654435761).wrapping_add(seed)) % 420_000;
        let name = format!("mal-pkg-{n}");
        let release = Release { ecosystem: Ecosystem::Npm, name: &name, version: "1.0.0" };
        found += u64::from(malicious.naming(&release).is_some());
    }
    let per = started.elapsed().as_nanos() as f64 / lookups as f64;
    println!("lookups {lookups} found {found} per lookup {per:.0} ns (name formatting included)");
}
