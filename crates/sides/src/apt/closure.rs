//! What an `apt-get install` of some package names downloads: the named
//! packages and everything their `Depends` and `Pre-Depends` need, each
//! group satisfied by its first alternative the indexes have (by name, or
//! by a package that `Provides` it), read from `Packages` indexes. A
//! streaming reader over the decompressed index: constant memory per line.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{self, BufRead, Read};

/// The longest line kept; longer lines (a hostile index) are skipped.
const MAX_LINE: u64 = 64 * 1024;

/// A package an index offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its name.
    pub name: String,
    /// Its path below the archive root (`pool/main/h/hello/hello_2.10_amd64.deb`).
    pub filename: String,
    /// Which of the indexes added named it (the order they were added in).
    pub index: usize,
    /// Its dependencies: groups that must each be met, by any of their
    /// alternatives.
    needs: Vec<Vec<String>>,
}

/// The packages of the indexes read so far: the first stanza of a name
/// wins (an index added earlier is preferred).
#[derive(Debug, Default)]
pub struct Catalogue {
    by_name: HashMap<String, Candidate>,
    /// Virtual package name to the first package providing it.
    provided: HashMap<String, String>,
    indexes: usize,
}

/// The packages `apt-get install` of some names downloads.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Closure<'c> {
    /// The packages, the named ones first.
    pub packages: Vec<&'c Candidate>,
    /// Names asked for or depended on that no index offers.
    pub missing: Vec<String>,
}

impl Catalogue {
    /// Adds the packages of one `Packages` index, read from `reader`; its
    /// number is the count of indexes added before.
    pub fn add_index(&mut self, mut reader: impl BufRead) -> io::Result<usize> {
        let index = self.indexes;
        self.indexes += 1;
        let mut stanza = Stanza::default();
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line)?;
            if read == 0 {
                self.take(std::mem::take(&mut stanza), index);
                return Ok(index);
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end();
            if text.is_empty() {
                self.take(std::mem::take(&mut stanza), index);
                continue;
            }
            if text.starts_with([' ', '\t']) {
                continue;
            }
            if let Some((name, value)) = text.split_once(':') {
                stanza.field(name, value.trim());
            }
        }
    }

    fn take(&mut self, stanza: Stanza, index: usize) {
        let (Some(name), Some(filename)) = (stanza.package, stanza.filename) else { return };
        if self.by_name.contains_key(&name) {
            return;
        }
        for virtual_name in stanza.provides {
            self.provided.entry(virtual_name).or_insert_with(|| name.clone());
        }
        let candidate = Candidate { name: name.clone(), filename, index, needs: stanza.needs };
        self.by_name.insert(name, candidate);
    }

    /// The package meeting `name`: its own, or one providing it.
    fn meeting(&self, name: &str) -> Option<&Candidate> {
        self.by_name.get(name).or_else(|| self.by_name.get(self.provided.get(name)?))
    }

    /// The packages an install of `names` downloads, and what no index has.
    pub fn closure(&self, names: &[String]) -> Closure<'_> {
        let mut closure = Closure::default();
        let mut seen = BTreeSet::new();
        let mut queue: VecDeque<Vec<String>> = names.iter().map(|name| vec![name.clone()]).collect();
        while let Some(group) = queue.pop_front() {
            let Some(candidate) = group.iter().find_map(|name| self.meeting(name)) else {
                closure.missing.push(group.join(" | "));
                continue;
            };
            if seen.insert(candidate.name.clone()) {
                closure.packages.push(candidate);
                queue.extend(candidate.needs.iter().cloned());
            }
        }
        closure
    }
}

#[derive(Debug, Default)]
struct Stanza {
    package: Option<String>,
    filename: Option<String>,
    provides: Vec<String>,
    needs: Vec<Vec<String>>,
}

impl Stanza {
    fn field(&mut self, name: &str, value: &str) {
        match name {
            "Package" => self.package = Some(value.to_owned()),
            "Filename" => self.filename = Some(value.to_owned()),
            "Provides" => self.provides = relations(value).into_iter().flatten().collect(),
            "Depends" | "Pre-Depends" => self.needs.extend(relations(value)),
            _ => {}
        }
    }
}

/// A relation field (`a (>= 1), b | c:any, d [amd64]`): groups of package
/// names, versions, architecture qualifiers and restrictions dropped.
fn relations(value: &str) -> Vec<Vec<String>> {
    let name = |alternative: &str| {
        let name = alternative.trim().split([' ', '(', '[', '<']).next().unwrap_or("");
        let name = name.split(':').next().unwrap_or("");
        (!name.is_empty()).then(|| name.to_owned())
    };
    value
        .split(',')
        .map(|group| group.split('|').filter_map(name).collect::<Vec<_>>())
        .filter(|group| !group.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = "Package: top\nVersion: 1\nDepends: mid (>= 1), libc6 | musl\nFilename: pool/t/top_1_all.deb\n\
        Description: the top\n continued line\n\n\
        Package: mid\nPre-Depends: leaf:any\nFilename: pool/m/mid_1_all.deb\n\n\
        Package: leafy\nProvides: leaf (= 1)\nFilename: pool/l/leafy_1_all.deb\n\n\
        Package: musl\nFilename: pool/m/musl_1_amd64.deb\n\n\
        Package: top\nFilename: pool/t/top_0_all.deb\n";

    #[test]
    fn an_install_needs_the_closure_of_its_dependencies_first_alternative_available() {
        let mut catalogue = Catalogue::default();
        catalogue.add_index(INDEX.as_bytes()).unwrap();
        let closure = catalogue.closure(&["top".to_owned(), "absent".to_owned()]);
        let files: Vec<&str> = closure.packages.iter().map(|c| c.filename.as_str()).collect();
        assert_eq!(
            files,
            ["pool/t/top_1_all.deb", "pool/m/mid_1_all.deb", "pool/m/musl_1_amd64.deb", "pool/l/leafy_1_all.deb"]
        );
        assert_eq!(closure.missing, ["absent"]);
    }

    #[test]
    fn relations_drop_versions_qualifiers_and_restrictions() {
        assert_eq!(
            relations("a (>= 1.0), b:any | c [amd64], d <!nocheck>"),
            [vec!["a".to_owned()], vec!["b".to_owned(), "c".to_owned()], vec!["d".to_owned()]]
        );
    }
}
