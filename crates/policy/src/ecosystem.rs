//! The ecosystems the policy judges, by the names pkgproxy's sides and OSV
//! give them, and each one's normal form of a package's name.

/// An ecosystem whose registries publish release times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ecosystem {
    /// npm's registry (`npm` in rules and OSV).
    Npm,
    /// PyPI (`pypi` in rules, `PyPI` in OSV).
    Pypi,
    /// crates.io (`cargo` in rules, `crates.io` in OSV).
    Cargo,
    /// The Go module proxy (`go` in rules, `Go` in OSV).
    Go,
    /// Maven repositories (`maven` in rules, `Maven` in OSV), a package
    /// named `group:artifact`.
    Maven,
    /// RPM repositories (`rpm` in rules), a package named as its file
    /// names it and versioned `VERSION-RELEASE`. OSV has no ecosystem of
    /// RPM packages as such (its distributions' advisories are each a
    /// distribution's release): none is read.
    Rpm,
}

impl Ecosystem {
    /// Every ecosystem, in the order they are listed.
    pub const ALL: [Ecosystem; 6] =
        [Ecosystem::Npm, Ecosystem::Pypi, Ecosystem::Cargo, Ecosystem::Go, Ecosystem::Maven, Ecosystem::Rpm];

    /// The side's name, as rules and pkgproxy's paths write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pypi",
            Ecosystem::Cargo => "cargo",
            Ecosystem::Go => "go",
            Ecosystem::Maven => "maven",
            Ecosystem::Rpm => "rpm",
        }
    }

    /// The ecosystem of a side's name.
    pub fn of_side(name: &str) -> Option<Ecosystem> {
        Ecosystem::ALL.into_iter().find(|ecosystem| ecosystem.as_str() == name)
    }

    /// The ecosystem an OSV record's `affected[].package.ecosystem` names
    /// (`npm`, `PyPI`, `crates.io`, `Go`, `Maven`; a `:suffix` is a release of a
    /// distribution, not one of these).
    pub fn of_osv(name: &str) -> Option<Ecosystem> {
        match name {
            "npm" => Some(Ecosystem::Npm),
            "PyPI" => Some(Ecosystem::Pypi),
            "crates.io" => Some(Ecosystem::Cargo),
            "Go" => Some(Ecosystem::Go),
            "Maven" => Some(Ecosystem::Maven),
            _ => None,
        }
    }

    /// `name` in the ecosystem's normal form: PEP 503's for PyPI (lower
    /// case, each run of `-`, `_`, `.` one `-`), lower case for crates
    /// (crates.io's index names them so), as written for npm, Go and Maven
    /// (`group:artifact`, whose case a repository's layout keeps).
    pub fn normal_name(self, name: &str) -> String {
        match self {
            Ecosystem::Pypi => pep503(name),
            Ecosystem::Cargo => name.to_ascii_lowercase(),
            Ecosystem::Npm | Ecosystem::Go | Ecosystem::Maven | Ecosystem::Rpm => name.to_owned(),
        }
    }

    /// `version` as compared: Go's without its `v` (OSV writes Go's
    /// versions bare), others as written.
    pub fn normal_version(self, version: &str) -> &str {
        match self {
            Ecosystem::Go => version.strip_prefix('v').unwrap_or(version),
            _ => version,
        }
    }
}

impl std::fmt::Display for Ecosystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A project's name as PEP 503 normalises it.
fn pep503(name: &str) -> String {
    let mut normal = String::with_capacity(name.len());
    let mut separated = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            separated = true;
            continue;
        }
        if separated && !normal.is_empty() {
            normal.push('-');
        }
        separated = false;
        normal.extend(c.to_lowercase());
    }
    normal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_take_each_ecosystem_s_normal_form() {
        assert_eq!(Ecosystem::Pypi.normal_name("Zope.Interface__x"), "zope-interface-x");
        assert_eq!(Ecosystem::Cargo.normal_name("Serde_JSON"), "serde_json");
        assert_eq!(Ecosystem::Npm.normal_name("@Scope/Name"), "@Scope/Name");
        assert_eq!(Ecosystem::Go.normal_version("v1.2.3"), "1.2.3");
        assert_eq!(Ecosystem::of_osv("crates.io"), Some(Ecosystem::Cargo));
        assert_eq!(Ecosystem::of_osv("Debian:12"), None);
    }
}
