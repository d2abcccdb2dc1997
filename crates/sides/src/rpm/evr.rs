//! RPM's version order, as `rpm` and dnf sort packages: the epoch first
//! (a number), then the version, then the release, each compared by
//! `rpmvercmp`'s rules (runs of digits as numbers, runs of letters as
//! text, a number newer than letters, `~` older than anything, `^` newer
//! than the end: the policy's [`rpmvercmp`], held here to rpm's own).
//! `check rpm` and `warm rpm` pick a name's newest package by it, as dnf
//! does.

use std::cmp::Ordering;

use pkgproxy_policy::rpmvercmp;

/// A package's epoch, version and release.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evr {
    /// The epoch (`0` when not given).
    pub epoch: u64,
    /// The version (`5.2.26`).
    pub version: String,
    /// The release (`3.fc41`).
    pub release: String,
}

impl Evr {
    /// `epoch` as primary metadata writes it (empty or missing is `0`),
    /// with `version` and `release`.
    pub fn new(epoch: &str, version: &str, release: &str) -> Evr {
        Evr { epoch: epoch.trim().parse().unwrap_or(0), version: version.to_owned(), release: release.to_owned() }
    }
}

impl Ord for Evr {
    fn cmp(&self, other: &Evr) -> Ordering {
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| rpmvercmp(&self.version, &other.version))
            .then_with(|| rpmvercmp(&self.release, &other.release))
    }
}

impl PartialOrd for Evr {
    fn partial_cmp(&self, other: &Evr) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs whose order is well known to trip comparisons up.
    const VERSIONS: &[(&str, &str)] = &[
        ("1.0", "1.0"),
        ("1.0", "2.0"),
        ("2.0.1", "2.0"),
        ("2.10", "2.9"),
        ("1.010", "1.9"),
        ("1.05", "1.5"),
        ("1.0a", "1.0"),
        ("1.0a", "1.0b"),
        ("1.0", "1.0.0"),
        ("1a", "1.0"),
        ("a", "1"),
        ("1.0~rc1", "1.0"),
        ("1.0~rc1", "1.0~rc2"),
        ("1.0~rc1~git1", "1.0~rc1"),
        ("1.0^", "1.0"),
        ("1.0^git1", "1.0"),
        ("1.0^git1", "1.0.1"),
        ("1.0^git1", "1.0^git2"),
        ("1.0^git1~pre", "1.0^git1"),
        ("1.0~rc1^git1", "1.0~rc1"),
        ("1_0", "1.0"),
        ("1+0", "1.0"),
        ("1.0", "1..0"),
        ("2.0.0.0", "2.0.0"),
        ("5.2.26", "5.2.37"),
        ("3.fc41", "3.fc40"),
        ("3.fc41", "10.fc41"),
        ("0.rc1.fc41", "1.fc41"),
        ("1.el9_4", "1.el9"),
        ("FC5", "fc4"),
        ("20240101", "9999"),
        ("00000000000000000000001", "1"),
        ("123456789012345678901234567890", "123456789012345678901234567889"),
        ("b", "a"),
        ("1.0.", "1.0"),
        ("1.0", "1.0.~"),
    ];

    /// Whole `EPOCH:VERSION-RELEASE`s.
    const EVRS: &[(&str, &str)] = &[
        ("1:1.0-1", "2.0-1"),
        ("0:1.0-1", "1.0-1"),
        ("1.0-2", "1.0-10"),
        ("2:0.1-1.fc41", "1:9.9-9.fc41"),
        ("5.2.26-3.fc41", "5.2.26-3.fc40"),
        ("1.0~rc1-1", "1.0-0"),
        ("10:1-1", "9:1-1"),
    ];

    /// `text` (`[EPOCH:]VERSION-RELEASE`) read as rpm reads it.
    fn evr(text: &str) -> Evr {
        let (epoch, rest) = text.split_once(':').unwrap_or(("0", text));
        let (version, release) = rest.rsplit_once('-').unwrap();
        Evr::new(epoch, version, release)
    }

    /// What rpm's own `rpm.vercmp` says of each pair (it reads each as
    /// `[EPOCH:]VERSION[-RELEASE]`): -1, 0 or 1.
    fn rpm_says(pairs: &[(&str, &str)]) -> Vec<i32> {
        let table: Vec<String> = pairs.iter().map(|(a, b)| format!("{{\"{a}\",\"{b}\"}}")).collect();
        let lua = format!(
            "%{{lua: local out = {{}} for _, p in ipairs({{{}}}) do out[#out + 1] = tostring(rpm.vercmp(p[1], p[2])) end print(table.concat(out, \" \")) }}",
            table.join(",")
        );
        let output =
            std::process::Command::new("rpm").args(["--eval", &lua]).output().expect("rpm runs (test.sh installs rpm)");
        assert!(output.status.success(), "rpm --eval: {}", String::from_utf8_lossy(&output.stderr));
        let said: Vec<i32> =
            String::from_utf8_lossy(&output.stdout).split_whitespace().map(|said| said.parse().unwrap()).collect();
        assert_eq!(said.len(), pairs.len(), "rpm answered for each pair");
        said
    }

    /// The pairs on which `ours` and rpm disagree, either way round.
    fn disagreements(pairs: &[(&str, &str)], ours: impl Fn(&str, &str) -> Ordering) -> Vec<String> {
        let mut differ = Vec::new();
        for ((a, b), rpm) in pairs.iter().zip(rpm_says(pairs)) {
            let (said, reversed) = (as_number(ours(a, b)), as_number(ours(b, a)));
            if said != rpm || reversed != -rpm {
                differ.push(format!("{a:?} vs {b:?}: rpm says {rpm}, pkgproxy {said} (reversed {reversed})"));
            }
        }
        differ
    }

    fn as_number(order: Ordering) -> i32 {
        match order {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }
    }

    #[test]
    fn versions_compare_as_rpm_compares_them() {
        let differ = disagreements(VERSIONS, rpmvercmp);
        assert!(differ.is_empty(), "{}", differ.join("\n"));
        let differ = disagreements(EVRS, |a, b| evr(a).cmp(&evr(b)));
        assert!(differ.is_empty(), "{}", differ.join("\n"));
    }

    #[test]
    fn the_epoch_comes_first_then_the_version_then_the_release() {
        assert!(evr("1:1.0-1") > evr("0:9.9-9"));
        assert!(Evr::new("", "1.0", "1") == evr("0:1.0-1"), "no epoch is epoch 0");
        assert!(evr("1.10-1") > evr("1.9-5"));
        assert!(evr("1.0-10.fc41") > evr("1.0-9.fc41"));
        let mut sorted = [evr("1.0-2"), evr("2:0.1-1"), evr("1.0~rc1-1"), evr("1.0-1")];
        sorted.sort();
        let versions: Vec<String> = sorted.iter().map(|e| format!("{}:{}-{}", e.epoch, e.version, e.release)).collect();
        assert_eq!(versions, ["0:1.0~rc1-1", "0:1.0-1", "0:1.0-2", "2:0.1-1"]);
    }
}
