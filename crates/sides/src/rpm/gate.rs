//! The fleet's policy on the RPM side: a package is judged by the time
//! its repository's primary metadata says it was added (`<time file>`,
//! the time createrepo saw the file; `<time build>` is when it was built,
//! which may be long before it was published). Packages are named
//! `rpm:NAME@VERSION-RELEASE`, as their file names them (the epoch is in
//! no file name).
//!
//! The metadata is served as the repository gives it: dnf checks it
//! against `repomd.xml`'s checksums, and rewriting it would break the
//! chain. A package dnf picks that the policy refuses then fails with the
//! policy's reason in dnf's output.

use std::time::{Duration, SystemTime};

use super::layout::RpmPath;
use super::primary::{self, Compression};
use super::{file_request, package_path, Rpm};
use crate::decision::CachedRequest;
use crate::role::{Filtered, Gated, Gating, Judge, ReleaseName, Times};

impl Gating for Rpm {
    /// A package of a repository the policy judges, timed by the primary
    /// metadata its root's `repomd.xml` names. With no `repomd.xml` held
    /// above it, its time cannot be known (the repository base's
    /// `repomd.xml` is asked, which gives none): `unknown_time` decides.
    fn gated(&self, request: &CachedRequest) -> Option<Gated> {
        let config = self.config();
        let (repository, path) = config.repository_of_key(&request.key)?;
        if !repository.gated || RpmPath::parse(path)? != RpmPath::Package {
            return None;
        }
        let release = release_of(path)?;
        let primary = self
            .root_of_package(repository, path)
            .and_then(|(root, repomd)| self.learning(repository, root, &repomd))
            .map(|(_, primary)| primary);
        let times_from = match primary {
            Some(primary) => {
                let immutable = RpmPath::parse(&primary).is_some_and(|laid| laid.is_immutable());
                file_request(&config, repository, &primary, immutable)
            }
            None => file_request(&config, repository, &super::layout::repomd_path(""), false),
        };
        Some(Gated::Artifact { release, times_from: Box::new(times_from) })
    }

    /// When each package the primary metadata `source` lists was added,
    /// by its path below the repository.
    fn times(&self, source: &CachedRequest, body: &[u8]) -> Times {
        let config = self.config();
        let Some((repository, path)) = config.repository_of_key(&source.key) else { return Times::new() };
        let Some(RpmPath::Metadata { root, .. }) = RpmPath::parse(path) else { return Times::new() };
        let Some(reader) = Compression::of(path).and_then(|compression| compression.reader(body).ok()) else {
            return Times::new();
        };
        let path_of = package_path(repository.clone(), root);
        let mut times = Times::new();
        let read = primary::read(reader, |package| {
            if let (Some(path), Some(added)) = (path_of(&package), package.time_file) {
                times.insert(path, SystemTime::UNIX_EPOCH + Duration::from_secs(added));
            }
        });
        if let Err(error) = read {
            tracing::warn!(key = source.key, %error, "cannot read the times of primary metadata");
        }
        times
    }

    /// The package of `name` at `version` (`VERSION-RELEASE`) the primary
    /// metadata learnt lists, in the first repository that has one: a
    /// package's path is what its root's primary says, not its name.
    fn release_request(&self, name: &str, version: &str) -> Option<CachedRequest> {
        let config = self.config();
        config.repositories.iter().find_map(|repository| {
            let path = self.index.find(&repository.name, name, version)?;
            Some(file_request(&config, repository, &path, true))
        })
    }

    /// Metadata is served as the repository gives it (see the module's
    /// doc).
    fn filtered(&self, _request: &CachedRequest, _body: &[u8], _judge: &mut dyn Judge) -> Filtered {
        Filtered::AsStored
    }
}

/// The release the package at `path` is, as its file names it
/// (`NAME-VERSION-RELEASE.ARCH.rpm`), timed by its path.
fn release_of(path: &str) -> Option<ReleaseName> {
    let file = path.rsplit('/').next()?.strip_suffix(".rpm")?;
    let (nvr, _arch) = file.rsplit_once('.')?;
    let (nv, release) = nvr.rsplit_once('-')?;
    let (name, version) = nv.rsplit_once('-')?;
    (!name.is_empty()).then(|| ReleaseName {
        name: name.to_owned(),
        version: format!("{version}-{release}"),
        timed_as: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_is_named_by_its_file() {
        let release = release_of("f/Packages/g/gcc-c++-14.2.1-3.fc41.x86_64.rpm").unwrap();
        assert_eq!((release.name.as_str(), release.version.as_str()), ("gcc-c++", "14.2.1-3.fc41"));
        assert_eq!(release.timed_as, "f/Packages/g/gcc-c++-14.2.1-3.fc41.x86_64.rpm");
        assert!(release_of("Packages/x.rpm").is_none());
    }
}
