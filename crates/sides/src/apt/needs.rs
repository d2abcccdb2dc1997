//! What an apt install needs, for `pkgproxyctl check apt`: the packages an
//! `apt-get install --print-uris` run names, one line each: `'URL' FILE
//! SIZE SHA256:HEX` (the URL as apt asks pkgproxy for it, its forward
//! proxy); or apt's sources (one-line `sources.list` or deb822 `.sources`)
//! and package names, whose dependencies the daemon follows in the indexes
//! it holds: each suite's `InRelease`, the `Packages` indexes it lists,
//! then the packages.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use pkgproxy_cache::BodyReader;
use serde::{Deserialize, Serialize};

use super::closure::Catalogue;
use super::packages::Compression;
use super::release::{self, FileSum};
use super::Apt;
use crate::needs::{self, Asked, HeldBodies, NeededItem, Needs, NeedsError, NeedsReader};

/// The largest `InRelease` read to find a suite's indexes.
const RELEASE_LIMIT: u64 = 64 * 1024 * 1024;

/// How far ahead a Release's `Valid-Until` is warned of.
const VALIDITY_WARNED_WITHIN: Duration = pkgproxy_control::VALIDITY_WARNED_WITHIN;

/// What `check apt` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// apt's sources: a sources.list (one-line) or a deb822 .sources.
    /// Default: what apt reads, as `apt-config` names it: sources.list
    /// when there is one and every *.list and *.sources in sources.list.d.
    #[arg(long, value_name = "FILE", requires = "packages")]
    sources: Option<PathBuf>,
    /// The packages to install.
    #[arg(required_unless_present = "uris")]
    packages: Vec<String>,
    /// The machine's architecture (default: dpkg's).
    #[arg(long, value_name = "ARCH")]
    arch: Option<String>,
    /// Instead: a file of `apt-get --print-uris` lines (`'URL' FILE SIZE
    /// SHA256:...`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["sources", "packages"])]
    uris: Option<PathBuf>,
}

/// One line of apt's sources (`deb URI SUITE COMPONENT...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct AptSource {
    /// The archive's URI (`http://deb.debian.org/debian`).
    uri: String,
    /// The suite (`bookworm`).
    suite: String,
    /// Its components (`main`, `contrib`).
    components: Vec<String>,
}

/// What an `apt-get install` of `packages` from `sources` needs: what the
/// daemon follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Install {
    sources: Vec<AptSource>,
    packages: Vec<String>,
    /// The machine's architecture (`amd64`).
    architecture: String,
}

/// apt's reader of a build's files.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "apt: the packages an install of PACKAGE... from apt's sources (or --sources) downloads \
                     (they and their dependencies, as the indexes pkgproxy holds say), with the indexes `apt-get \
                     update` reads; or the packages of an `apt-get install --print-uris` run";
        <Arguments as clap::Args>::augment_args(clap::Command::new("apt")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        if let Some(uris) = &arguments.uris {
            return Ok(Asked::Known(Needs::of(print_uris(&needs::read_file(uris)?)?)));
        }
        let sources = match &arguments.sources {
            Some(file) => sources_of(&needs::read_file(file)?)?,
            None => apt_s_own_sources()?,
        };
        needs::resolve(&Install {
            sources,
            packages: arguments.packages,
            architecture: arguments.arch.unwrap_or_else(needs::machine_architecture),
        })
    }
}

/// The requests the `--print-uris` lines in `text` make.
fn print_uris(text: &str) -> Result<Vec<NeededItem>, NeedsError> {
    let mut items = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let Some(rest) = line.trim().strip_prefix('\'') else { continue };
        let Some((url, rest)) = rest.split_once('\'') else {
            return Err(NeedsError::new(format!("line {}: the URL is not closed", number + 1)));
        };
        if !url.starts_with("http://") {
            let why = format!("line {}: {url}: only http:// sources go through pkgproxy's cache", number + 1);
            return Err(NeedsError::new(why));
        }
        let file = rest.split_whitespace().next().unwrap_or(url).to_owned();
        items.push(NeededItem { url: url.to_owned(), label: file });
    }
    match items.is_empty() {
        true => Err(NeedsError::new("no 'URL' FILE SIZE HASH lines: is this apt-get's --print-uris output?")),
        false => Ok(items),
    }
}

impl Apt {
    /// What an install asked by its reader needs: each suite's `InRelease`
    /// and `Packages` indexes, and the packages the install downloads,
    /// found in the indexes the cache holds. Blocking: it reads and
    /// decompresses them.
    pub(super) fn install_needs(&self, asked: serde_json::Value, held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        let asked: Install = needs::parse(asked)?;
        let mut found = Needs::default();
        let mut catalogue = Catalogue::default();
        let mut bases = Vec::new();
        let index = |url: &str| NeededItem { url: url.to_owned(), label: index_label(url) };
        for source in &asked.sources {
            let base = source.uri.trim_end_matches('/');
            let release_url = format!("{base}/dists/{}/InRelease", source.suite);
            found.items.push(index(&release_url));
            let release = held.body(&release_url, RELEASE_LIMIT).and_then(|bytes| release::parse(&bytes).ok());
            let Some(release) = release else {
                found.unknown.push(format!("{release_url} is not cached"));
                continue;
            };
            for component in &source.components {
                for arch in [asked.architecture.as_str(), "all"] {
                    let Some((path, sum)) = packages_index(&release, &format!("{component}/binary-{arch}")) else {
                        continue;
                    };
                    let url = format!("{base}/dists/{}/{path}", source.suite);
                    found.items.push(index(&url));
                    let read = open_sum(held, &sum).map(|file| {
                        let compression = Compression::of_packages(&path).unwrap_or(Compression::None);
                        // Positional reads: the open file may be shared with others.
                        catalogue.add_index(compression.reader(BodyReader::new(&file)))
                    });
                    match read {
                        Some(Ok(_)) => bases.push(base.to_owned()),
                        Some(Err(error)) => found.unknown.push(format!("{url} cannot be read: {error}")),
                        None => found.unknown.push(format!("{url} is not cached")),
                    }
                }
            }
        }
        let closure = catalogue.closure(&asked.packages);
        let packages = closure.packages.iter().map(|package| NeededItem {
            url: format!("{}/{}", bases[package.index], package.filename),
            label: package.name.clone(),
        });
        found.items.extend(packages);
        let missing = closure.missing.iter().map(|name| format!("{name}: no index pkgproxy holds offers it"));
        let mut unknown: Vec<String> = missing.collect();
        unknown.append(&mut found.unknown);
        found.unknown = unknown;
        self.warn_of_validity(&asked, held.now(), &mut found);
        Ok(found)
    }

    /// The asked suites whose Release expires within a day (a warning: it
    /// works now), or has (not ready: apt refuses it).
    fn warn_of_validity(&self, asked: &Install, now: SystemTime, found: &mut Needs) {
        let asked_suite =
            |suite: &str| asked.sources.iter().any(|source| suite.ends_with(&format!("/dists/{}", source.suite)));
        for (suite, until) in self.index().valid_until_before(now + VALIDITY_WARNED_WITHIN) {
            if !asked_suite(&suite) {
                continue;
            }
            let validity = pkgproxy_control::SuiteValidity::new(suite, until, now);
            let warning = validity.warning_utc();
            match validity.expired {
                true => found.unknown.push(warning),
                false => found.warnings.push(warning),
            }
        }
    }
}

/// An index's URL as people read it: from `dists/` on.
fn index_label(url: &str) -> String {
    url.split("/dists/").nth(1).map_or_else(|| url.to_owned(), |rest| format!("dists/{rest}"))
}

/// The `Packages` index a Release lists in `dir`, the most compressed
/// first, with its sum.
fn packages_index(release: &release::Release, dir: &str) -> Option<(String, FileSum)> {
    ["Packages.xz", "Packages.gz", "Packages"].iter().find_map(|name| {
        let path = format!("{dir}/{name}");
        release.files.get(&path).map(|sum| (path, *sum))
    })
}

/// The stored bytes with `sum`, whatever name they were fetched under.
fn open_sum(held: &dyn HeldBodies, sum: &FileSum) -> Option<std::sync::Arc<std::fs::File>> {
    held.open_sha256(&hex::encode(sum.sha256), sum.size)
}

/// The binary sources of a `sources.list` (`deb [options] URI SUITE
/// COMPONENT...`) or a deb822 `.sources` file (`Types: deb`, `URIs:`,
/// `Suites:`, `Components:`).
fn sources_of(text: &str) -> Result<Vec<AptSource>, NeedsError> {
    let deb822 = text.lines().any(|line| line.trim_start().to_ascii_lowercase().starts_with("types:"));
    let found = if deb822 { deb822_sources(text) } else { one_line_sources(text) };
    match found.is_empty() {
        true => Err(NeedsError::new("no deb sources found")),
        false => Ok(found),
    }
}

/// The sources apt itself reads: its sources.list, when there is one (a
/// stock Debian 12 or Ubuntu 24.04 has none), then every `*.list` and
/// `*.sources` file of its sources.list.d, in apt's order.
fn apt_s_own_sources() -> Result<Vec<AptSource>, NeedsError> {
    let (list, parts) = apt_s_source_places();
    let mut files: Vec<PathBuf> = list.is_file().then(|| list.clone()).into_iter().collect();
    let mut parted: Vec<PathBuf> = std::fs::read_dir(&parts)
        .into_iter()
        .flatten()
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.file_name().and_then(|name| name.to_str()).is_some_and(read_by_apt))
        .collect();
    parted.sort();
    files.extend(parted);
    let mut found = Vec::new();
    for file in &files {
        let text = needs::read_file(file)?;
        match file.extension().is_some_and(|extension| extension == "sources") {
            true => found.extend(deb822_sources(&text)),
            false => found.extend(one_line_sources(&text)),
        }
    }
    match found.is_empty() {
        true => Err(NeedsError::new(format!(
            "no deb sources in {} or in {}*.list and *.sources (apt's own): name a file with --sources",
            list.display(),
            parts.display(),
        ))),
        false => Ok(found),
    }
}

/// Whether apt reads a file of sources.list.d by this name: `*.list` or
/// `*.sources`, named with letters, digits, `_`, `-` and `.` only.
fn read_by_apt(name: &str) -> bool {
    let shaped = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    shaped && (name.ends_with(".list") || name.ends_with(".sources"))
}

/// Where apt reads its sources, as `apt-config` says (so `APT_CONFIG` and
/// a `Dir` of its configuration count), else Debian's places.
fn apt_s_source_places() -> (PathBuf, PathBuf) {
    let debian = (PathBuf::from("/etc/apt/sources.list"), PathBuf::from("/etc/apt/sources.list.d/"));
    let asked = std::process::Command::new("apt-config")
        .args(["shell", "LIST", "Dir::Etc::sourcelist/f", "PARTS", "Dir::Etc::sourceparts/d"])
        .output();
    let Some(output) = asked.ok().filter(|output| output.status.success()) else { return debian };
    let said = String::from_utf8_lossy(&output.stdout);
    let value = |name: &str| {
        said.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
            .map(|value| PathBuf::from(value.trim_matches('\'')))
    };
    match (value("LIST"), value("PARTS")) {
        (Some(list), Some(parts)) => (list, parts),
        _ => debian,
    }
}

fn one_line_sources(text: &str) -> Vec<AptSource> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(rest) = line.strip_prefix("deb ") else { continue };
        // Options come in brackets: `[signed-by=/k.gpg arch=amd64]`.
        let rest = match rest.trim_start().strip_prefix('[') {
            Some(options) => options.split_once(']').map_or("", |(_, rest)| rest),
            None => rest,
        };
        let mut words = rest.split_whitespace();
        if let (Some(uri), Some(suite)) = (words.next(), words.next()) {
            let components = words.map(str::to_owned).collect();
            found.push(AptSource { uri: uri.to_owned(), suite: suite.to_owned(), components });
        }
    }
    found
}

fn deb822_sources(text: &str) -> Vec<AptSource> {
    let mut found = Vec::new();
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim().eq_ignore_ascii_case(name).then(|| value.split_whitespace().map(str::to_owned).collect())
            })
        };
        let (types, uris, suites): (Vec<String>, Vec<String>, Vec<String>) = (
            field("Types").unwrap_or_default(),
            field("URIs").unwrap_or_default(),
            field("Suites").unwrap_or_default(),
        );
        let components: Vec<String> = field("Components").unwrap_or_default();
        let enabled = field("Enabled").is_none_or(|value: Vec<String>| value.first().is_none_or(|v| v != "no"));
        if !types.iter().any(|t| t == "deb") || !enabled {
            continue;
        }
        for uri in &uris {
            for suite in &suites {
                found.push(AptSource { uri: uri.clone(), suite: suite.clone(), components: components.clone() });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sources_formats_give_uri_suite_and_components() {
        let one_line = "# comment\ndeb [signed-by=/k.gpg] http://deb.debian.org/debian bookworm main contrib\n\
                        deb-src http://deb.debian.org/debian bookworm main\n";
        let parsed = sources_of(one_line).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!((parsed[0].uri.as_str(), parsed[0].suite.as_str()), ("http://deb.debian.org/debian", "bookworm"));
        assert_eq!(parsed[0].components, ["main", "contrib"]);
        let deb822 = "Types: deb deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n\
                      Components: main\nSigned-By: /k.gpg\n\nTypes: deb\nURIs: http://x/y\nSuites: s\nComponents: c\nEnabled: no\n";
        let parsed = sources_of(deb822).unwrap();
        let suites: Vec<&str> = parsed.iter().map(|s| s.suite.as_str()).collect();
        assert_eq!(suites, ["bookworm", "bookworm-updates"]);
        assert!(sources_of("nothing\n").is_err());
    }

    #[test]
    fn apt_reads_list_and_sources_files_of_its_folder_and_nothing_else() {
        for name in ["debian.sources", "nodesource.list", "my_repo-2.list"] {
            assert!(read_by_apt(name), "{name}");
        }
        for name in ["nodesource.sources.disabled-by-farm", "debian.sources.save", "x~.list", "README"] {
            assert!(!read_by_apt(name), "{name}");
        }
    }

    #[test]
    fn print_uris_lines_give_their_urls_and_files() {
        let text = "Reading package lists...\n\
                    'http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb' hello_2.10-3_amd64.deb 53000 SHA256:ab\n";
        let items = print_uris(text).unwrap();
        assert_eq!(items[0].url, "http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb");
        assert_eq!(items[0].label, "hello_2.10-3_amd64.deb");
        assert!(print_uris("nothing here\n").is_err());
        assert!(print_uris("'https://x/y.deb' y.deb 1 SHA256:00\n").is_err());
    }
}
