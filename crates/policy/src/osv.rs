//! Malicious-package records (OSV records whose id starts `MAL-`: the
//! `ossf/malicious-packages` set, OSV's per-ecosystem `all.zip`), read
//! from folders of JSON files, `all.zip` files, and the index pkgproxy
//! writes itself into signed bundles.
//!
//! npm alone has over 200,000 such records, so what is kept is compact:
//! one line of text per affected package of a record (`ecosystem`, `name`,
//! `id`, the versions), sorted, in one string, found by binary search. The
//! rest of each record is read and dropped.

use std::cmp::Ordering;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;

use crate::version::compare;
use crate::{Ecosystem, Release};

/// The first line of the index pkgproxy writes (`malicious.tsv`).
pub const INDEX_HEADER: &str = "# pkgproxy malicious-package index 1";

/// The malicious-package records in force, indexed by ecosystem and name.
#[derive(Debug, Default)]
pub struct Malicious {
    /// Lines `ecosystem \t name \t id \t versions`, sorted.
    text: String,
    /// Where each line starts in `text`.
    starts: Vec<u32>,
    stats: OsvStats,
}

/// How much was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsvStats {
    /// Records (distinct ids).
    pub records: usize,
    /// Packages they name.
    pub packages: usize,
    /// Bytes the index holds in memory.
    pub bytes: usize,
}

/// An OSV source that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum OsvError {
    /// A file or folder cannot be read.
    #[error("{path} cannot be read: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
    /// A zip file cannot be read.
    #[error("{path} is not a zip file pkgproxy can read: {error}")]
    Zip {
        /// The file.
        path: PathBuf,
        /// What failed.
        error: zip::result::ZipError,
    },
    /// A record is not OSV JSON.
    #[error("{path}: {name} is not an OSV record: {error}")]
    Record {
        /// The file (a zip's, or the record's own).
        path: PathBuf,
        /// The record's name (in the zip, or the file's).
        name: String,
        /// What failed.
        error: serde_json::Error,
    },
    /// The records run past what one index holds (4 GiB).
    #[error("the malicious-package records run past 4 GiB of index")]
    TooLarge,
}

#[derive(serde::Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    #[serde(default)]
    withdrawn: Option<IgnoredAny>,
    #[serde(default, borrow)]
    affected: Vec<Affected<'a>>,
}

#[derive(serde::Deserialize)]
struct Affected<'a> {
    #[serde(default, borrow)]
    package: Option<Package<'a>>,
    #[serde(default, borrow)]
    versions: Vec<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    ranges: Vec<Range<'a>>,
}

#[derive(serde::Deserialize)]
struct Package<'a> {
    #[serde(borrow)]
    ecosystem: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
}

#[derive(serde::Deserialize)]
struct Range<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    events: Vec<Event<'a>>,
}

#[derive(serde::Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    introduced: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    fixed: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    last_affected: Option<std::borrow::Cow<'a, str>>,
}

/// The lines read so far, in one string (a line each, in the order read),
/// so that reading 200,000 records leaves no heap of small strings behind.
#[derive(Default)]
struct Lines {
    text: String,
    starts: Vec<usize>,
}

impl Lines {
    fn push(&mut self, line: std::fmt::Arguments<'_>) {
        use std::fmt::Write;
        self.starts.push(self.text.len());
        // Writing to a String cannot fail.
        let _ = self.text.write_fmt(line);
        self.text.push('\n');
    }

    fn line(&self, index: usize) -> &str {
        let end = self.starts.get(index + 1).map_or(self.text.len(), |next| *next);
        &self.text[self.starts[index]..end - 1]
    }

    /// Keeps what `json`, one record, says, if it is a malicious-package
    /// record in force.
    fn record(&mut self, json: &[u8], path: &Path, name: &str) -> Result<(), OsvError> {
        let record: Record<'_> = serde_json::from_slice(json).map_err(|error| OsvError::Record {
            path: path.to_owned(),
            name: name.to_owned(),
            error,
        })?;
        if !record.id.starts_with("MAL-") || record.withdrawn.is_some() || record.id.contains(['\t', '\n']) {
            return Ok(());
        }
        for affected in &record.affected {
            let Some(package) = &affected.package else { continue };
            let Some(ecosystem) = Ecosystem::of_osv(&package.ecosystem) else { continue };
            let name = ecosystem.normal_name(&package.name);
            if name.is_empty() || name.contains(['\t', '\n']) {
                continue;
            }
            let versions = versions(ecosystem, affected);
            self.push(format_args!("{}\t{name}\t{}\t{versions}", ecosystem.as_str(), record.id));
        }
        Ok(())
    }

    /// Keeps the lines of an index pkgproxy wrote.
    fn index(&mut self, text: &str) {
        let lines = text.lines().filter(|line| !line.starts_with('#') && line.split('\t').count() == 4);
        for line in lines {
            self.push(format_args!("{line}"));
        }
    }
}

/// What an affected entry names, written `*` (every version), or `|`-joined
/// items: `=V` one version, `[A,B)` from A up to B, `[A,B]` from A to B,
/// `[A,` from A on.
fn versions(ecosystem: Ecosystem, affected: &Affected<'_>) -> String {
    let mut items: Vec<String> = Vec::new();
    let clean = |v: &str| v.replace(['|', '\t', '\n', ',', '[', ']', ')'], "");
    for version in &affected.versions {
        items.push(format!("={}", clean(ecosystem.normal_version(version))));
    }
    for range in affected.ranges.iter().filter(|range| range.kind != "GIT") {
        let mut from: Option<String> = None;
        for event in &range.events {
            if let Some(introduced) = &event.introduced {
                if introduced == "0" && range.events.len() == 1 {
                    return "*".to_owned();
                }
                from = Some(clean(ecosystem.normal_version(introduced)));
            } else if let (Some(fixed), Some(start)) = (&event.fixed, from.take()) {
                items.push(format!("[{start},{})", clean(ecosystem.normal_version(fixed))));
            } else if let (Some(last), Some(start)) = (&event.last_affected, from.take()) {
                items.push(format!("[{start},{}]", clean(ecosystem.normal_version(last))));
            }
        }
        if let Some(start) = from {
            if start == "0" {
                return "*".to_owned();
            }
            items.push(format!("[{start},"));
        }
    }
    // A record naming a package and no version names all of it.
    match items.is_empty() {
        true => "*".to_owned(),
        false => items.join("|"),
    }
}

/// Whether `version` is among `spec`'s.
fn among(ecosystem: Ecosystem, spec: &str, version: &str) -> bool {
    if spec == "*" {
        return true;
    }
    let version = ecosystem.normal_version(version);
    spec.split('|').any(|item| {
        if let Some(exact) = item.strip_prefix('=') {
            return exact == version || compare(ecosystem, exact, version) == Some(Ordering::Equal);
        }
        let Some(range) = item.strip_prefix('[') else { return false };
        let Some((start, end)) = range.split_once(',') else { return false };
        let from = start == "0" || compare(ecosystem, start, version).is_some_and(|o| o != Ordering::Greater);
        let to = match (end.strip_suffix(')'), end.strip_suffix(']')) {
            _ if end.is_empty() => true,
            (Some(fixed), _) => compare(ecosystem, version, fixed) == Some(Ordering::Less),
            (_, Some(last)) => compare(ecosystem, version, last).is_some_and(|o| o != Ordering::Greater),
            _ => false,
        };
        from && to
    })
}

impl Malicious {
    /// The records of every source: a folder (its `.json` records and
    /// `.zip` files, all the way down), an `all.zip`, a record, or an
    /// index pkgproxy wrote (`.tsv`).
    pub fn read(sources: &[&Path]) -> Result<Malicious, OsvError> {
        let mut lines = Lines::default();
        for source in sources {
            read_source(source, &mut lines)?;
        }
        Malicious::of_lines(&lines)
    }

    fn of_lines(read: &Lines) -> Result<Malicious, OsvError> {
        let mut order: Vec<usize> = (0..read.starts.len()).collect();
        order.sort_unstable_by(|a, b| read.line(*a).cmp(read.line(*b)));
        order.dedup_by(|a, b| read.line(*a) == read.line(*b));
        let lines: Vec<&str> = order.iter().map(|index| read.line(*index)).collect();
        let mut text = String::with_capacity(lines.iter().map(|line| line.len() + 1).sum());
        let mut starts = Vec::with_capacity(lines.len());
        let mut ids = std::collections::HashSet::new();
        let mut packages = 0;
        let mut previous: Option<&str> = None;
        for line in lines {
            starts.push(u32::try_from(text.len()).map_err(|_| OsvError::TooLarge)?);
            text.push_str(line);
            text.push('\n');
            let mut fields = line.split('\t');
            let package = line.len() - line.splitn(3, '\t').nth(2).map_or(0, str::len);
            if previous != Some(&line[..package]) {
                packages += 1;
                previous = Some(&line[..package]);
            }
            ids.insert(fields.nth(2).unwrap_or_default());
        }
        let records = ids.len();
        starts.shrink_to_fit();
        text.shrink_to_fit();
        let bytes = text.capacity() + starts.capacity() * 4;
        Ok(Malicious { text, starts, stats: OsvStats { records, packages, bytes } })
    }

    /// How many records and packages are held.
    pub fn stats(&self) -> OsvStats {
        self.stats
    }

    /// The line starting at `start`.
    fn line_at(&self, start: u32) -> &str {
        let rest = &self.text[start as usize..];
        rest.split('\n').next().unwrap_or(rest)
    }

    /// The id of a record naming `release`, if one does.
    pub fn naming(&self, release: &Release<'_>) -> Option<String> {
        let key = format!("{}\t{}\t", release.ecosystem.as_str(), release.name);
        let first = self.starts.partition_point(|start| self.line_at(*start) < key.as_str());
        self.starts[first..]
            .iter()
            .map(|start| self.line_at(*start))
            .take_while(|line| line.starts_with(&key))
            .find_map(|line| {
                let mut fields = line[key.len()..].split('\t');
                let (id, spec) = (fields.next()?, fields.next()?);
                among(release.ecosystem, spec, release.version).then(|| id.to_owned())
            })
    }

    /// The index as pkgproxy writes it into a bundle: read back by
    /// [`Malicious::read`] as it is.
    pub fn index_text(&self) -> String {
        format!("{INDEX_HEADER}\n{}", self.text)
    }
}

/// Reads one source into `lines`.
fn read_source(path: &Path, lines: &mut Lines) -> Result<(), OsvError> {
    let read_error = |error| OsvError::Read { path: path.to_owned(), error };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    if metadata.is_dir() {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(path).map_err(read_error)?.filter_map(|entry| Some(entry.ok()?.path())).collect();
        entries.sort();
        for entry in entries {
            let name = entry.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            if name.starts_with('.') {
                continue;
            }
            if entry.is_dir() || [".json", ".zip", ".tsv"].iter().any(|end| name.ends_with(end)) {
                read_source(&entry, lines)?;
            }
        }
        return Ok(());
    }
    let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default().to_owned();
    if name.ends_with(".zip") {
        return read_zip(path, lines);
    }
    let bytes = std::fs::read(path).map_err(read_error)?;
    if name.ends_with(".tsv") {
        lines.index(&String::from_utf8_lossy(&bytes));
        return Ok(());
    }
    lines.record(&bytes, path, &name)
}

/// Reads the records of a zip file (OSV's `all.zip`).
fn read_zip(path: &Path, lines: &mut Lines) -> Result<(), OsvError> {
    let file = std::fs::File::open(path).map_err(|error| OsvError::Read { path: path.to_owned(), error })?;
    let zip_error = |error| OsvError::Zip { path: path.to_owned(), error };
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(zip_error)?;
    let mut json = Vec::new();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(zip_error)?;
        let name = entry.name().map_err(zip_error)?.into_owned();
        if !entry.is_file() || !name.ends_with(".json") {
            continue;
        }
        json.clear();
        entry.read_to_end(&mut json).map_err(|error| OsvError::Read { path: path.join(&name), error })?;
        lines.record(&json, path, &name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, ecosystem: &str, name: &str, affected: &str) -> String {
        format!(
            r#"{{"id":"{id}","modified":"2025-01-01T00:00:00Z","affected":[{{"package":{{"ecosystem":"{ecosystem}","name":"{name}"}},{affected}}}]}}"#
        )
    }

    fn release<'a>(ecosystem: Ecosystem, name: &'a str, version: &'a str) -> Release<'a> {
        Release { ecosystem, name, version }
    }

    #[test]
    fn records_name_versions_ranges_and_whole_packages() {
        let dir = tempfile::tempdir().unwrap();
        let write = |file: &str, text: String| std::fs::write(dir.path().join(file), text).unwrap();
        write("a.json", record("MAL-2025-1", "npm", "left-pad", r#""versions":["1.3.1"]"#));
        write(
            "b.json",
            record(
                "MAL-2025-2",
                "PyPI",
                "Evil_Pkg",
                r#""ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"}]}]"#,
            ),
        );
        write(
            "c.json",
            record(
                "MAL-2025-3",
                "crates.io",
                "bad",
                r#""ranges":[{"type":"SEMVER","events":[{"introduced":"1.0.0"},{"fixed":"1.2.0"}]}]"#,
            ),
        );
        write("d.json", record("GHSA-xxxx", "npm", "left-pad", r#""versions":["1.3.0"]"#));
        write("e.json", record("MAL-2025-4", "Go", "example.com/m", r#""versions":["1.0.1"]"#));
        let malicious = Malicious::read(&[dir.path()]).unwrap();
        assert_eq!(malicious.stats().records, 4);
        let id = |e, n, v| malicious.naming(&release(e, n, v));
        assert_eq!(id(Ecosystem::Npm, "left-pad", "1.3.1").as_deref(), Some("MAL-2025-1"));
        assert_eq!(id(Ecosystem::Npm, "left-pad", "1.3.0"), None, "a GHSA is not a malicious-package record");
        assert_eq!(id(Ecosystem::Npm, "left-pa", "1.3.1"), None);
        assert_eq!(id(Ecosystem::Pypi, "evil-pkg", "0.0.1").as_deref(), Some("MAL-2025-2"));
        assert_eq!(id(Ecosystem::Cargo, "bad", "1.1.9").as_deref(), Some("MAL-2025-3"));
        assert_eq!(id(Ecosystem::Cargo, "bad", "1.2.0"), None);
        assert_eq!(id(Ecosystem::Cargo, "bad", "0.9.0"), None);
        assert_eq!(id(Ecosystem::Go, "example.com/m", "v1.0.1").as_deref(), Some("MAL-2025-4"));

        let index = dir.path().join("copy").join("malicious.tsv");
        std::fs::create_dir(index.parent().unwrap()).unwrap();
        std::fs::write(&index, malicious.index_text()).unwrap();
        let again = Malicious::read(&[index.as_path()]).unwrap();
        assert_eq!(again.stats(), malicious.stats());
        assert_eq!(again.naming(&release(Ecosystem::Npm, "left-pad", "1.3.1")).as_deref(), Some("MAL-2025-1"));
    }

    #[test]
    fn a_record_that_is_not_osv_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("broken.json"), "{").unwrap();
        let error = Malicious::read(&[dir.path()]).unwrap_err().to_string();
        assert!(error.contains("broken.json") && error.contains("not an OSV record"), "{error}");
    }
}
