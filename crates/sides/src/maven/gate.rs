//! The fleet's policy on the Maven side: a release's files are judged by
//! the time its pom was published, the `Last-Modified` its repository
//! gives it (a release's files are deployed together, and the pom is what
//! every build fetches first; Maven Central's `Last-Modified` is the
//! upload's time). A metadata's `<lastUpdated>` is not used: it is when
//! the artifact's newest version was published, which would hold back
//! every older version for as long as the newest is. A repository that
//! gives no `Last-Modified` (a cache that strips it) leaves the time
//! unknown, which `unknown_time` decides.
//!
//! `maven-metadata.xml` is served as the repository gives it: its
//! checksums are served beside it and checked by Maven, and a version
//! range or `LATEST` that picks a refused version then fails with the
//! policy's reason, as a pinned version does. A SNAPSHOT is not a
//! release: never judged.

use std::time::SystemTime;

use super::layout::{ArtifactFile, MavenPath};
use super::{file_request, Maven};
use crate::decision::CachedRequest;
use crate::role::{Filtered, Gated, Gating, Judge, ReleaseName, Times};

impl Gating for Maven {
    /// A release's file, from a repository the policy judges.
    fn gated(&self, request: &CachedRequest) -> Option<Gated> {
        let config = self.config();
        let (repository, _, laid) = Self::laid_out(&config, request)?;
        let MavenPath::File(file) = laid else { return None };
        if !repository.gated || file.is_snapshot() {
            return None;
        }
        let pom = pom_of(&file);
        Some(Gated::Artifact {
            release: release_of(&file),
            times_from: Box::new(file_request(&config, repository, &pom.path(), true)),
        })
    }

    /// The time the pom `source` was published: its `Last-Modified`.
    fn times(&self, source: &CachedRequest, _body: &[u8]) -> Times {
        let config = self.config();
        let Some((_, _, MavenPath::File(pom))) = Self::laid_out(&config, source) else { return Times::new() };
        let entry = self.cache.newest_entry(&source.key);
        let modified = entry.and_then(|entry| entry.validators.last_modified.clone());
        let published = modified.and_then(|date| httpdate::parse_http_date(&date).ok());
        published.map(|at: SystemTime| Times::from([(pom.version, at)])).unwrap_or_default()
    }

    /// The pom of `name` (`group:artifact`) at `version` on Maven Central.
    fn release_request(&self, name: &str, version: &str) -> Option<CachedRequest> {
        let (group, artifact) = name.split_once(':')?;
        let folders: Vec<&str> = group.split('.').chain([artifact, version]).collect();
        let pom = ArtifactFile::in_folder(&folders, &format!("{artifact}-{version}.pom"))?;
        let config = self.config();
        let central = config.repository("central")?;
        Some(file_request(&config, central, &pom.path(), true))
    }

    /// Metadata is served as the repository gives it (see the module's
    /// doc).
    fn filtered(&self, _request: &CachedRequest, _body: &[u8], _judge: &mut dyn Judge) -> Filtered {
        Filtered::AsStored
    }
}

/// The pom of the release `file` is of.
fn pom_of(file: &ArtifactFile) -> ArtifactFile {
    ArtifactFile { build: None, classifier: None, extension: "pom".to_owned(), ..file.clone() }
}

/// The release `file` is of, as the policy names it.
fn release_of(file: &ArtifactFile) -> ReleaseName {
    ReleaseName {
        name: format!("{}:{}", file.group, file.artifact),
        version: file.version.clone(),
        timed_as: file.version.clone(),
    }
}
