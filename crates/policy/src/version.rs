//! Version order, for OSV ranges: SemVer for npm, crates and Go, PEP 440's
//! release segments for PyPI, Maven's own order for Maven. A version that does not read in its
//! ecosystem's form is in no range (only in an exact list, or in "every
//! version").

use std::cmp::Ordering;

use crate::Ecosystem;

/// `a` against `b`, both versions of `ecosystem`; `None` when either does
/// not read.
pub fn compare(ecosystem: Ecosystem, a: &str, b: &str) -> Option<Ordering> {
    match ecosystem {
        Ecosystem::Pypi => Some(pep440(a)?.cmp(&pep440(b)?)),
        Ecosystem::Maven => Some(maven_order(a, b)),
        Ecosystem::Rpm => Some(rpm_order(a, b)),
        _ => {
            let a = semver::Version::parse(ecosystem.normal_version(a)).ok()?;
            let b = semver::Version::parse(ecosystem.normal_version(b)).ok()?;
            Some(a.cmp(&b))
        }
    }
}

/// RPM's order of `[EPOCH:]VERSION[-RELEASE]`: the epoch as a number
/// (none is 0), then the version, then the release, each by rpmvercmp.
pub fn rpm_order(a: &str, b: &str) -> Ordering {
    let split = |evr: &str| -> (u64, String, Option<String>) {
        let (epoch, rest) = match evr.split_once(':') {
            Some((epoch, rest)) if epoch.bytes().all(|b| b.is_ascii_digit()) => (epoch.parse().unwrap_or(0), rest),
            _ => (0, evr),
        };
        match rest.rsplit_once('-') {
            Some((version, release)) => (epoch, version.to_owned(), Some(release.to_owned())),
            None => (epoch, rest.to_owned(), None),
        }
    };
    let ((epoch_a, version_a, release_a), (epoch_b, version_b, release_b)) = (split(a), split(b));
    epoch_a.cmp(&epoch_b).then_with(|| rpmvercmp(&version_a, &version_b)).then_with(|| match (release_a, release_b) {
        (Some(a), Some(b)) => rpmvercmp(&a, &b),
        _ => Ordering::Equal,
    })
}

/// rpm's `rpmvercmp`: the strings compared segment by segment, a segment
/// a run of digits or of letters, other characters separating them; `~`
/// sorts before anything (even the end), `^` after the end but before
/// anything else; digits compare as numbers and beat letters.
pub fn rpmvercmp(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    let separator = |c: &u8| !c.is_ascii_alphanumeric() && *c != b'~' && *c != b'^';
    loop {
        while a.first().is_some_and(separator) {
            a = &a[1..];
        }
        while b.first().is_some_and(separator) {
            b = &b[1..];
        }
        match (a.first(), b.first()) {
            (Some(b'~'), Some(b'~')) => {
                (a, b) = (&a[1..], &b[1..]);
                continue;
            }
            (Some(b'~'), _) => return Ordering::Less,
            (_, Some(b'~')) => return Ordering::Greater,
            (Some(b'^'), Some(b'^')) => {
                (a, b) = (&a[1..], &b[1..]);
                continue;
            }
            (Some(b'^'), None) => return Ordering::Greater,
            (None, Some(b'^')) => return Ordering::Less,
            (Some(b'^'), _) => return Ordering::Less,
            (_, Some(b'^')) => return Ordering::Greater,
            (None, None) => return Ordering::Equal,
            (None, _) => return Ordering::Less,
            (_, None) => return Ordering::Greater,
            _ => {}
        }
        let numeric = a[0].is_ascii_digit();
        let run = |s: &[u8]| {
            s.iter().take_while(|c| if numeric { c.is_ascii_digit() } else { c.is_ascii_alphabetic() }).count()
        };
        let (length_a, length_b) = (run(a), run(b));
        if length_b == 0 {
            // A number against letters: the number is newer.
            return if numeric { Ordering::Greater } else { Ordering::Less };
        }
        let (segment_a, segment_b) = (&a[..length_a], &b[..length_b]);
        let order = match numeric {
            true => {
                let trim = |s: &[u8]| -> Vec<u8> { s.iter().skip_while(|c| **c == b'0').copied().collect() };
                let (trimmed_a, trimmed_b) = (trim(segment_a), trim(segment_b));
                trimmed_a.len().cmp(&trimmed_b.len()).then_with(|| trimmed_a.cmp(&trimmed_b))
            }
            false => segment_a.cmp(segment_b),
        };
        if order != Ordering::Equal {
            return order;
        }
        (a, b) = (&a[length_a..], &b[length_b..]);
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

/// Maven's order of versions (its `ComparableVersion`, in the common
/// cases): the version is read as items split at `.`, `-` and where digits
/// meet letters; numbers compare as numbers, trailing zeros and empty
/// items aside; a qualifier orders `alpha` < `beta` < `milestone` < `rc`
/// (`cr`) < `snapshot` < the release (`""`, `ga`, `final`, `release`) <
/// `sp`, and any other word after them all, by its letters; a number is
/// after any qualifier.
fn maven_order(a: &str, b: &str) -> Ordering {
    let (a, b) = (maven_items(a), maven_items(b));
    for index in 0..a.len().max(b.len()) {
        let ordering = match (a.get(index), b.get(index)) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(x), None) => x.cmp(&x.missing()),
            (None, Some(y)) => y.missing().cmp(y),
            (None, None) => Ordering::Equal,
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

/// One item of a Maven version, in its order: every qualifier before any
/// number, known qualifiers by their rank, others after them by letters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum MavenItem {
    /// A known qualifier's rank, or (7) another word's, with the word.
    Qualifier(u8, String),
    /// A number.
    Number(u64),
}

/// The rank of the release among qualifiers (`""`, `ga`, `final`).
const RELEASE_RANK: u8 = 5;

impl MavenItem {
    /// What a missing item stands for against this one: `0` against a
    /// number (`1.0` is `1.0.0`), the release against a qualifier (`1.0`
    /// is `1.0-ga`, after `1.0-rc1`, before `1.0-sp1`).
    fn missing(&self) -> MavenItem {
        match self {
            MavenItem::Number(_) => MavenItem::Number(0),
            MavenItem::Qualifier(..) => MavenItem::Qualifier(RELEASE_RANK, String::new()),
        }
    }

    fn is_release(&self) -> bool {
        *self == MavenItem::Number(0) || *self == MavenItem::Qualifier(RELEASE_RANK, String::new())
    }

    fn word(word: &str) -> MavenItem {
        let word = word.to_ascii_lowercase();
        let rank = match word.as_str() {
            "alpha" | "a" => 0,
            "beta" | "b" => 1,
            "milestone" | "m" => 2,
            "rc" | "cr" => 3,
            "snapshot" => 4,
            "" | "ga" | "final" | "release" => RELEASE_RANK,
            "sp" => 6,
            _ => return MavenItem::Qualifier(7, word),
        };
        MavenItem::Qualifier(rank, String::new())
    }
}

/// The items of `version`, trailing releases (`0`, `ga`) left out.
fn maven_items(version: &str) -> Vec<MavenItem> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut digits = false;
    let flush = |current: &mut String, digits: bool, items: &mut Vec<MavenItem>| {
        if current.is_empty() {
            return;
        }
        items.push(match digits {
            true => current.parse().map(MavenItem::Number).unwrap_or(MavenItem::Number(u64::MAX)),
            false => MavenItem::word(current),
        });
        current.clear();
    };
    for c in version.trim().chars() {
        if c == '.' || c == '-' || c == '_' {
            flush(&mut current, digits, &mut items);
            continue;
        }
        let is_digit = c.is_ascii_digit();
        if !current.is_empty() && is_digit != digits {
            flush(&mut current, digits, &mut items);
        }
        digits = is_digit;
        current.push(c);
    }
    flush(&mut current, digits, &mut items);
    while items.last().is_some_and(MavenItem::is_release) {
        items.pop();
    }
    items
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
        for (older, newer) in [
            ("1.0-alpha-1", "1.0-beta"),
            ("1.0-beta", "1.0-RC1"),
            ("1.0-RC1", "1.0-SNAPSHOT"),
            ("1.0-SNAPSHOT", "1.0"),
            ("1.0", "1.0-sp1"),
            ("1.9", "1.10"),
            ("2.11.0", "2.12.0"),
            ("31.1-android", "31.1-jre"),
            ("1.0", "1.0.1"),
            ("1.0.Final", "1.0.1.Final"),
        ] {
            assert!(less(Ecosystem::Maven, older, newer), "{older} < {newer}");
        }
        for (one, same) in [("1.0", "1.0.0"), ("1.0-ga", "1"), ("1.0.Final", "1.0")] {
            assert_eq!(compare(Ecosystem::Maven, one, same), Some(Ordering::Equal), "{one} = {same}");
        }
    }
}

#[cfg(test)]
mod rpm_tests {
    use super::*;

    /// Pairs `rpm --eval '%{lua: print(rpm.vercmp(A, B))}'` orders as
    /// shown (rpm 4.18).
    const ORDERED: &[(&str, &str, i8)] = &[
        ("1.0", "1.0", 0),
        ("1.0", "2.0", -1),
        ("2.0.1", "2.0", 1),
        ("1.0a", "1.0", 1),
        ("1.0", "1.0a", -1),
        ("10", "9", 1),
        ("1.010", "1.9", 1),
        ("1.05", "1.5", 0),
        ("a", "1", -1),
        ("1.0~rc1", "1.0", -1),
        ("1.0~rc1", "1.0~rc2", -1),
        ("1.0^git1", "1.0", 1),
        ("1.0^git1", "1.0.1", -1),
        ("1.0^", "1.0", 1),
        ("1_0", "1.0", 0),
        ("abc", "abd", -1),
        ("fc41", "fc40", 1),
    ];

    #[test]
    fn versions_order_as_rpm_orders_them() {
        for (a, b, expected) in ORDERED {
            let expected = expected.cmp(&0);
            assert_eq!(rpmvercmp(a, b), expected, "{a} vs {b}");
            assert_eq!(rpmvercmp(b, a), expected.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn the_epoch_comes_first_then_the_version_then_the_release() {
        assert_eq!(rpm_order("1:1.0-1", "2.0-1"), Ordering::Greater);
        assert_eq!(rpm_order("1.0-2", "1.0-10"), Ordering::Less);
        assert_eq!(rpm_order("1.0-1.fc41", "1.0-1.fc40"), Ordering::Greater);
        assert_eq!(rpm_order("0:1.0-1", "1.0-1"), Ordering::Equal);
    }
}
