//! What the PyPI side's keys name, for the page listing the cache: a file
//! is a project's version (read from its name, as installers read it), a
//! project's pages and a wheel's core metadata are the project's metadata.
//! The side sends no client's credentials upstream: nothing it holds is
//! private.

use super::files::FilePath;
use super::Pypi;
use crate::role::reporting::{Named, Reporting};

impl Reporting for Pypi {
    fn noun(&self) -> &'static str {
        "projects"
    }

    fn names(&self, key: &str) -> Named {
        let config = self.config();
        let Some(index) = config.index_of_key(key) else { return Named::Other };
        let Some(below) = key.strip_prefix(&index.key("")) else { return Named::Other };
        named_below(below)
    }
}

/// What a key names below its index: `packages/AA/BB/REST/FILE` or
/// `simple/PROJECT/FORM`.
fn named_below(below: &str) -> Named {
    if let Some(page) = below.strip_prefix("simple/") {
        return match page.split('/').next() {
            Some(project) if !project.is_empty() => Named::Metadata { package: normalized(project) },
            _ => Named::Other,
        };
    }
    let Some(file) = below.strip_prefix("packages/").and_then(FilePath::parse) else { return Named::Other };
    match (project_and_version(&file.filename), file.metadata) {
        (Some((project, _)), true) => Named::Metadata { package: project },
        (Some((package, version)), false) => Named::File { package, version },
        (None, _) => Named::Other,
    }
}

/// The project and version a distribution's file name gives: a wheel's
/// first two fields, an sdist's name up to its last `-`.
fn project_and_version(filename: &str) -> Option<(String, String)> {
    if let Some(stem) = filename.strip_suffix(".whl") {
        let mut fields = stem.split('-');
        let (project, version) = (fields.next()?, fields.next()?);
        return Some((normalized(project), version.to_owned()));
    }
    let stem = [".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz", ".egg"]
        .iter()
        .find_map(|suffix| filename.strip_suffix(suffix))?;
    let (project, version) = stem.rsplit_once('-')?;
    Some((normalized(project), version.to_owned()))
}

/// A project's name as PEP 503 compares them: lower case, each run of
/// `-`, `_` and `.` one `-`.
fn normalized(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '-' | '_' | '.' if out.ends_with('-') => {}
            '-' | '_' | '.' => out.push('-'),
            c => out.push(c.to_ascii_lowercase()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_names_its_project_and_version_and_pages_their_project() {
        let digest = format!("ab/cd/{}", "e".repeat(60));
        let file = |package: &str, version: &str| Named::File { package: package.into(), version: version.into() };
        let wheel = format!("packages/{digest}/Charset_Normalizer-3.4.0-py3-none-any.whl");
        assert_eq!(named_below(&wheel), file("charset-normalizer", "3.4.0"));
        assert_eq!(named_below(&format!("packages/{digest}/zope.interface-6.1.tar.gz")), file("zope-interface", "6.1"));
        let metadata = format!("{wheel}.metadata");
        assert_eq!(named_below(&metadata), Named::Metadata { package: "charset-normalizer".into() });
        assert_eq!(named_below("simple/six/json"), Named::Metadata { package: "six".into() });
        assert_eq!(named_below("packages/not/a/file"), Named::Other);
    }
}
