//! A sparse index's files: their paths (`1/a`, `2/ab`, `3/a/abc`,
//! `ab/cd/abcd…`, lower case), the versions each lists (one JSON line per
//! version, never changed but for `yanked`), and the check that keeps an
//! older file (a lagging mirror's) from replacing a newer one.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::Read;

use pkgproxy_cache::{BodyHashes, BodyReader, Verifier};

use super::upstream_config::index_prefix;

/// The longest crate name a registry takes.
const NAME_LIMIT: usize = 64;

/// The largest index file taken (crates.io's largest are a few MB).
pub const INDEX_LIMIT: u64 = 64 * 1024 * 1024;

/// Whether `name` may be a crate's name: ASCII letters, digits, `-` and
/// `_`, at most 64 of them.
pub fn is_crate_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_LIMIT
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `version` may be a version: SemVer's characters.
pub fn is_version(version: &str) -> bool {
    !version.is_empty()
        && version.len() <= 128
        && version.bytes().all(|b| b.is_ascii_alphanumeric() || b".+-".contains(&b))
        && version.as_bytes()[0].is_ascii_digit()
}

/// The path of crate `name`'s index file, lower-cased as cargo asks for
/// it.
pub fn file_path(name: &str) -> String {
    let name = name.to_ascii_lowercase();
    format!("{}/{name}", index_prefix(&name))
}

/// The crate whose file `path` (below the index, lower-cased) is, when it
/// is an index file's path.
pub fn crate_of(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next()?;
    (is_crate_name(name) && file_path(name) == path).then_some(name)
}

/// The versions an index file lists.
pub fn versions(body: &[u8]) -> BTreeSet<String> {
    lines(body).filter_map(|line| line.ok()).map(|line| line.vers.into_owned()).collect()
}

/// Whether an index file lists `version`. Only the lines holding the
/// version in quotes are parsed: a crate's file can hold a thousand lines.
pub fn lists(body: &[u8], version: &str) -> bool {
    let quoted = format!("\"{version}\"");
    let finder = memchr::memmem::Finder::new(quoted.as_bytes());
    body.split(|b| *b == b'\n')
        .filter(|line| finder.find(line).is_some())
        .filter_map(|line| Line::parse(line)?.ok())
        .any(|line| line.vers == version)
}

/// The SHA-256 of `version`'s `.crate` (lower-case hex), as an index file
/// gives it.
pub fn checksum(body: &[u8], version: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Summed<'a> {
        #[serde(borrow)]
        vers: Cow<'a, str>,
        cksum: String,
    }
    let quoted = format!("\"{version}\"");
    let finder = memchr::memmem::Finder::new(quoted.as_bytes());
    body.split(|b| *b == b'\n')
        .filter(|line| finder.find(line).is_some())
        .filter_map(|line| serde_json::from_slice::<Summed<'_>>(line.trim_ascii()).ok())
        .find(|line| line.vers == version)
        .map(|line| line.cksum.to_ascii_lowercase())
        .filter(|sum| sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What the checks read of an index file's line; the rest (dependencies,
/// features) is skipped, not kept.
#[derive(serde::Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    vers: Cow<'a, str>,
}

impl<'a> Line<'a> {
    /// The line's fields; `None` for a blank line.
    fn parse(line: &'a [u8]) -> Option<Result<Self, serde_json::Error>> {
        let line = line.trim_ascii();
        (!line.is_empty()).then(|| serde_json::from_slice(line))
    }
}

/// The lines of an index file, blank ones left out.
fn lines(body: &[u8]) -> impl Iterator<Item = Result<Line<'_>, serde_json::Error>> {
    body.split(|b| *b == b'\n').filter_map(Line::parse)
}

/// How many of an index file's newest releases name the dependencies
/// fetched ahead: a lockfile may hold one a little older than the newest.
const NEWEST_FOLLOWED: usize = 3;

/// The most dependencies of one index file fetched ahead.
const FOLLOWED_LIMIT: usize = 64;

/// What [`dependencies`] reads of an index file's line.
#[derive(serde::Deserialize)]
struct Release<'a> {
    #[serde(borrow)]
    vers: Cow<'a, str>,
    #[serde(default)]
    yanked: bool,
    #[serde(default, borrow)]
    deps: Vec<Dependency<'a>>,
}

/// A dependency as an index file's line lists it.
#[derive(serde::Deserialize)]
struct Dependency<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    optional: bool,
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    registry: Option<Cow<'a, str>>,
    /// The crate's own name, when the dependency renames it.
    #[serde(default, borrow)]
    package: Option<Cow<'a, str>>,
}

/// The crates (lower-cased) the newest releases an index file lists need
/// to build: not for their tests, not optionally, not from another
/// registry. cargo asks for their index files next when it picks one of
/// those releases; yanked releases and pre-releases it picks only when
/// told to.
pub fn dependencies(body: &[u8]) -> BTreeSet<String> {
    let releases = body
        .rsplit(|b| *b == b'\n')
        .map(<[u8]>::trim_ascii)
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice::<Release<'_>>(line).ok())
        .filter(|release| !release.yanked && !release.vers.contains('-'))
        .take(NEWEST_FOLLOWED);
    let mut names = BTreeSet::new();
    for release in releases {
        for dependency in release.deps {
            let needed = dependency.kind.as_deref() != Some("dev") && !dependency.optional;
            let name = dependency.package.unwrap_or(dependency.name);
            if needed && dependency.registry.is_none() && is_crate_name(&name) && names.len() < FOLLOWED_LIMIT {
                names.insert(name.to_ascii_lowercase());
            }
        }
    }
    names
}

/// The checks of an index file fetched for crate `name`: every line a
/// version of that crate, and, when a copy is held, not an older file
/// than it (every version it lists held, none of the held ones' missing:
/// a lagging mirror of the pool).
#[derive(Debug)]
pub struct IndexVerifier {
    /// The crate.
    pub name: String,
    /// The versions the held copy lists, if one is held.
    pub held: Option<BTreeSet<String>>,
}

impl Verifier for IndexVerifier {
    /// Small files, and a lagging mirror's must not reach anyone.
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        let mut content = Vec::new();
        body.take(INDEX_LIMIT + 1).read_to_end(&mut content).map_err(|error| error.to_string())?;
        if content.len() as u64 > INDEX_LIMIT {
            return Err(format!("an index file over {INDEX_LIMIT} bytes"));
        }
        let mut fetched = BTreeSet::new();
        for line in lines(&content) {
            let line =
                line.map_err(|_| "an index file with a line that is not JSON with a name and a version".to_owned())?;
            if !line.name.eq_ignore_ascii_case(&self.name) {
                return Err(format!("the index file of {} lists {:?}", self.name, line.name));
            }
            fetched.insert(line.vers.into_owned());
        }
        match &self.held {
            Some(held) if fetched.is_subset(held) && fetched.len() < held.len() => Err(format!(
                "an older index file of {} than the one held ({} of its {} versions): a lagging mirror",
                self.name,
                fetched.len(),
                held.len()
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_paths_have_their_four_shapes_in_lower_case() {
        assert_eq!(file_path("a"), "1/a");
        assert_eq!(file_path("ab"), "2/ab");
        assert_eq!(file_path("Syn"), "3/s/syn");
        assert_eq!(file_path("Serde_json"), "se/rd/serde_json");
        assert_eq!(crate_of("se/rd/serde_json"), Some("serde_json"));
        assert_eq!(crate_of("3/s/syn"), Some("syn"));
        for bad in ["se/rd/other", "3/x/syn", "1/ab", "se/rd", "../etc/passwd", "se/rd/Serde", "se/rd/se rd"] {
            assert_eq!(crate_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn names_and_versions_are_checked() {
        assert!(is_crate_name("serde_json-2") && !is_crate_name("") && !is_crate_name("a/b"));
        assert!(!is_crate_name(&"a".repeat(65)));
        assert!(is_version("1.0.0") && is_version("0.1.0-alpha.1+build") && !is_version("v1") && !is_version("1/2"));
    }

    #[test]
    fn the_dependencies_followed_are_those_the_newest_releases_build_with() {
        let line = |vers: &str, yanked: bool, deps: &str| {
            format!("{{\"name\":\"x\",\"vers\":\"{vers}\",\"yanked\":{yanked},\"deps\":[{deps}]}}\n")
        };
        let dep = |name: &str, more: &str| format!("{{\"name\":\"{name}\",\"req\":\"^1\"{more}}}");
        let body = [
            line("0.1.0", false, &dep("oldest", "")),
            line("1.0.0", false, &[dep("Serde", ""), dep("tests_only", ",\"kind\":\"dev\"")].join(",")),
            line("1.1.0", false, &[dep("cc", ",\"kind\":\"build\""), dep("maybe", ",\"optional\":true")].join(",")),
            line(
                "1.2.0",
                false,
                &[
                    dep("renamed", ",\"package\":\"real-name\""),
                    dep("elsewhere", ",\"registry\":\"https://other.example/index\""),
                ]
                .join(","),
            ),
            line("1.3.0", true, &dep("yanked_only", "")),
            line("2.0.0-rc.1", false, &dep("pre_only", "")),
        ]
        .concat();
        let followed: Vec<String> = dependencies(body.as_bytes()).into_iter().collect();
        assert_eq!(
            followed,
            ["cc", "real-name", "serde"],
            "the three newest releases that are neither yanked nor pre-releases"
        );
        assert!(dependencies(b"not json\n").is_empty());
    }

    #[test]
    fn the_versions_of_a_file_are_read_line_by_line() {
        let body = b"{\"name\":\"a\",\"vers\":\"0.1.0\",\"yanked\":false}\n{\"name\":\"a\",\"vers\":\"0.2.0\",\"yanked\":true}\n";
        assert_eq!(versions(body), ["0.1.0".to_owned(), "0.2.0".to_owned()].into());
        assert!(lists(body, "0.2.0") && !lists(body, "0.3.0"));
    }
}
