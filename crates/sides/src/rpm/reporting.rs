//! What the RPM side's keys name, for the cache's page: a package by its
//! name, and its version, release and architecture as its file name says
//! (`NAME-VERSION-RELEASE.ARCH.rpm`); `repomd.xml` and the metadata it
//! names are the repositories' metadata, summed in one line rather than
//! listed among the packages (every dnf run reads them: they would top
//! the list). The side sends no client's credentials upstream: nothing it
//! holds is private.

use super::layout::RpmPath;
use super::nevra::Nevra;
use super::Rpm;
use crate::role::{Named, Reporting};

impl Reporting for Rpm {
    fn noun(&self) -> &'static str {
        "packages"
    }

    fn others(&self) -> &'static str {
        "repository metadata (repomd.xml and the files it names)"
    }

    fn names(&self, key: &str) -> Named {
        let Some(path) = key.strip_prefix("rpm/").and_then(|rest| rest.split_once('/')).map(|(_, path)| path) else {
            return Named::Other;
        };
        match RpmPath::parse(path) {
            Some(RpmPath::Package) => path.rsplit('/').next().and_then(named_rpm).unwrap_or(Named::Other),
            _ => Named::Other,
        }
    }
}

/// `NAME-VERSION-RELEASE.ARCH.rpm`: the name, and the rest as the
/// version (the name may hold `-`: the last two split the version and the
/// release off).
fn named_rpm(file: &str) -> Option<Named> {
    let nevra = Nevra::parse(file.strip_suffix(".rpm")?)?;
    let version = format!("{}-{}.{}", nevra.version, nevra.release, nevra.arch);
    Some(Named::File { package: nevra.name, version })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpm::{Config, Options};

    fn named(package: &str, version: &str) -> Named {
        Named::File { package: package.into(), version: version.into() }
    }

    #[test]
    fn a_package_names_its_name_and_its_version_release_and_architecture() {
        assert_eq!(named_rpm("bash-5.2.26-3.fc41.x86_64.rpm"), Some(named("bash", "5.2.26-3.fc41.x86_64")));
        assert_eq!(
            named_rpm("perl-Time-HiRes-1.9775-511.fc41.x86_64.rpm"),
            Some(named("perl-Time-HiRes", "1.9775-511.fc41.x86_64"))
        );
        assert_eq!(named_rpm("hello-2.12.1-5.fc41.src.rpm"), Some(named("hello", "2.12.1-5.fc41.src")));
        assert_eq!(named_rpm("not-a-package.rpm"), None);
    }

    #[test]
    fn metadata_and_other_files_are_the_repositories_metadata() {
        let cache_dir = tempfile::tempdir().unwrap();
        let cache =
            pkgproxy_cache::Cache::open(cache_dir.path(), std::sync::Arc::new(pkgproxy_cache::SystemClock)).unwrap();
        let rpm = Rpm::open(Config::new(&Options::default()).unwrap(), cache, cache_dir.path()).unwrap();
        let root = "rpm/fedora/releases/41/Everything/x86_64/os";
        assert_eq!(
            rpm.names(&format!("{root}/Packages/b/bash-5.2.26-3.fc41.x86_64.rpm")),
            named("bash", "5.2.26-3.fc41.x86_64")
        );
        for key in [
            format!("{root}/repodata/repomd.xml"),
            format!("{root}/repodata/0123-primary.xml.zst"),
            format!("{root}/repodata/repomd.xml.metalink"),
            format!("{root}/.treeinfo"),
            "rpm/fedora".to_owned(),
        ] {
            assert_eq!(rpm.names(&key), Named::Other, "{key}");
        }
    }
}
