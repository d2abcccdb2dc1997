//! Version order, for OSV ranges: SemVer for npm, crates and Go, PEP 440's
//! release segments for PyPI. A version that does not read in its
//! ecosystem's form is in no range (only in an exact list, or in "every
//! version").

use std::cmp::Ordering;

use crate::Ecosystem;

/// `a` against `b`, both versions of `ecosystem`; `None` when either does
/// not read.
pub fn compare(ecosystem: Ecosystem, a: &str, b: &str) -> Option<Ordering> {
    match ecosystem {
        Ecosystem::Pypi => Some(pep440(a)?.cmp(&pep440(b)?)),
        _ => {
            let a = semver::Version::parse(ecosystem.normal_version(a)).ok()?;
            let b = semver::Version::parse(ecosystem.normal_version(b)).ok()?;
            Some(a.cmp(&b))
        }
    }
}

/// A PEP 440 version as it orders: epoch, release segments, then a
/// pre-release (`a`, `b`, `rc`) before the release, a post-release after,
/// a dev release before all of them. Local labels are left out.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pep440 {
    epoch: u64,
    release: Vec<u64>,
    /// (phase, number): dev `0`, pre `1..=3`, final `4`, post `5`.
    stage: (u8, u64),
}

fn pep440(text: &str) -> Option<Pep440> {
    let text = text.trim().to_ascii_lowercase();
    let text = text.strip_prefix('v').unwrap_or(&text);
    let text = text.split('+').next()?;
    let (epoch, rest) = match text.split_once('!') {
        Some((epoch, rest)) => (epoch.parse().ok()?, rest),
        None => (0, text),
    };
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (numbers, suffix) = rest.split_at(end);
    let mut release: Vec<u64> =
        numbers.trim_end_matches('.').split('.').map(|n| n.parse().ok()).collect::<Option<_>>()?;
    while release.len() > 1 && release.last() == Some(&0) {
        release.pop();
    }
    let suffix = suffix.trim_start_matches(['.', '-', '_']);
    let number = |tail: &str| tail.trim_start_matches(['.', '-', '_']).parse::<u64>().unwrap_or(0);
    let stage = if suffix.is_empty() {
        (4, 0)
    } else if let Some(tail) = suffix.strip_prefix("dev") {
        (0, number(tail))
    } else if let Some(tail) = suffix.strip_prefix("rc").or_else(|| suffix.strip_prefix('c')) {
        (3, number(tail))
    } else if let Some(tail) = suffix.strip_prefix("alpha").or_else(|| suffix.strip_prefix('a')) {
        (1, number(tail))
    } else if let Some(tail) = suffix.strip_prefix("beta").or_else(|| suffix.strip_prefix('b')) {
        (2, number(tail))
    } else if let Some(tail) = suffix.strip_prefix("post").or_else(|| suffix.strip_prefix('r')) {
        (5, number(tail))
    } else {
        return None;
    };
    Some(Pep440 { epoch, release, stage })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_as_their_ecosystems_say() {
        let less = |ecosystem, a, b| compare(ecosystem, a, b) == Some(Ordering::Less);
        assert!(less(Ecosystem::Npm, "1.2.3-beta.1", "1.2.3"));
        assert!(less(Ecosystem::Go, "v1.9.0", "v1.10.0"));
        assert!(less(Ecosystem::Cargo, "0.9.9", "1.0.0"));
        assert!(less(Ecosystem::Pypi, "1.0rc1", "1.0"));
        assert!(less(Ecosystem::Pypi, "1.0.dev1", "1.0a1"));
        assert!(less(Ecosystem::Pypi, "1.0", "1.0.post1"));
        assert!(less(Ecosystem::Pypi, "1.9", "1.10"));
        assert_eq!(compare(Ecosystem::Pypi, "1.0", "1.0.0"), Some(Ordering::Equal));
        assert_eq!(compare(Ecosystem::Npm, "not", "1.0.0"), None);
    }
}
