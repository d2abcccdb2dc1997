//! What the apt side's keys name, for the page listing the cache: a
//! `.deb` in an archive's pool is a package's version for an architecture
//! (read from its file name, `NAME_VERSION_ARCH.deb`); index files name no
//! package. The side sends no client's credentials upstream: nothing it
//! holds is private.

use super::Apt;
use crate::role::reporting::{Named, Reporting};

impl Reporting for Apt {
    fn noun(&self) -> &'static str {
        "packages"
    }

    fn names(&self, key: &str) -> Named {
        let file =
            key.strip_prefix("apt/").filter(|rest| rest.contains("/pool/")).and_then(|rest| rest.rsplit('/').next());
        file.and_then(named_deb).unwrap_or(Named::Other)
    }
}

/// `NAME_VERSION_ARCH.deb` (or `.udeb`, `.ddeb`): the version with its
/// architecture, and its epoch as the archive writes it in file names
/// (`1%3a2.0`) read as `1:2.0`.
fn named_deb(file: &str) -> Option<Named> {
    let stem = [".deb", ".udeb", ".ddeb"].iter().find_map(|suffix| file.strip_suffix(suffix))?;
    let mut fields = stem.splitn(3, '_');
    let (package, version, arch) = (fields.next()?, fields.next()?, fields.next()?);
    let version = version.replace("%3a", ":").replace("%3A", ":");
    Some(Named::File { package: package.to_owned(), version: format!("{version} {arch}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deb_names_its_package_version_and_architecture() {
        let named = |package: &str, version: &str| Named::File { package: package.into(), version: version.into() };
        assert_eq!(named_deb("hello_2.10-3_amd64.deb"), Some(named("hello", "2.10-3 amd64")));
        assert_eq!(named_deb("bash_1%3a5.2-1_arm64.deb"), Some(named("bash", "1:5.2-1 arm64")));
        assert_eq!(named_deb("Packages.xz"), None);
    }
}
