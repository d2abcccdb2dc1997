//! What a `maven-metadata.xml` says, as far as pkgproxy reads it: when it
//! was last changed (`<lastUpdated>`, so that an older copy from a lagging
//! mirror never replaces a newer one), the versions it lists (a version a
//! client asks for that it does not list may be new), and, for a SNAPSHOT
//! version's, which timestamped build each `-SNAPSHOT` file name stands
//! for.

use super::layout::ArtifactFile;

/// A `maven-metadata.xml`, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// `<lastUpdated>`, `YYYYMMDDHHMMSS` (UTC) as a number, so that later
    /// is larger.
    pub last_updated: Option<u64>,
    /// `<versions>`, in the order written.
    pub versions: Vec<String>,
    /// `<latest>`.
    pub latest: Option<String>,
    /// `<release>`.
    pub release: Option<String>,
    /// A SNAPSHOT version's builds: each file's timestamped version, by
    /// classifier and extension (`<snapshotVersions>`).
    pub snapshot_versions: Vec<SnapshotVersion>,
}

/// One file of a SNAPSHOT version's latest build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotVersion {
    /// Its classifier, if any.
    pub classifier: Option<String>,
    /// Its extension.
    pub extension: String,
    /// Its version in its file's name (`1.1-20261206.101500-3`).
    pub value: String,
}

/// A body that is not a `maven-metadata.xml`.
#[derive(Debug, thiserror::Error)]
#[error("not a maven-metadata.xml: {0}")]
pub struct MetadataError(#[from] quick_xml::DeError);

#[derive(serde::Deserialize)]
struct Document {
    #[serde(default)]
    versioning: Option<Versioning>,
}

#[derive(serde::Deserialize)]
struct Versioning {
    #[serde(default, rename = "lastUpdated")]
    last_updated: Option<String>,
    #[serde(default)]
    latest: Option<String>,
    #[serde(default)]
    release: Option<String>,
    #[serde(default)]
    versions: Option<Versions>,
    #[serde(default, rename = "snapshotVersions")]
    snapshot_versions: Option<SnapshotVersions>,
}

#[derive(serde::Deserialize)]
struct Versions {
    #[serde(default)]
    version: Vec<String>,
}

#[derive(serde::Deserialize)]
struct SnapshotVersions {
    #[serde(default, rename = "snapshotVersion")]
    snapshot_version: Vec<RawSnapshotVersion>,
}

#[derive(serde::Deserialize)]
struct RawSnapshotVersion {
    #[serde(default)]
    classifier: Option<String>,
    extension: String,
    value: String,
}

impl Metadata {
    /// Reads `body`.
    pub fn read(body: &[u8]) -> Result<Metadata, MetadataError> {
        let text = String::from_utf8_lossy(body);
        let document: Document = quick_xml::de::from_str(&text)?;
        let Some(versioning) = document.versioning else { return Ok(Metadata::default()) };
        let last_updated = versioning.last_updated.as_deref().and_then(|stamp| {
            let stamp = stamp.trim();
            (stamp.len() == 14).then(|| stamp.parse().ok()).flatten()
        });
        let snapshot_versions = versioning
            .snapshot_versions
            .map(|all| all.snapshot_version)
            .unwrap_or_default()
            .into_iter()
            .map(|raw| SnapshotVersion {
                classifier: raw.classifier.filter(|classifier| !classifier.trim().is_empty()),
                extension: raw.extension.trim().to_owned(),
                value: raw.value.trim().to_owned(),
            })
            .collect();
        Ok(Metadata {
            last_updated,
            versions: versioning.versions.map(|versions| versions.version).unwrap_or_default(),
            latest: versioning.latest,
            release: versioning.release,
            snapshot_versions,
        })
    }

    /// Whether it lists `version`.
    pub fn lists(&self, version: &str) -> bool {
        self.versions.iter().any(|listed| listed == version)
    }

    /// Whether it was last changed before `held` was: a copy from a mirror
    /// that lags, which must not replace the one held. One without a
    /// `<lastUpdated>` is not older.
    pub fn is_older_than(&self, held: &Metadata) -> bool {
        matches!((self.last_updated, held.last_updated), (Some(fetched), Some(held)) if fetched < held)
    }

    /// The timestamped build `file` (a `-SNAPSHOT` name) stands for, by its
    /// classifier and extension, when this, its version's metadata, says.
    pub fn build_of(&self, file: &ArtifactFile) -> Option<String> {
        let base = file.version.strip_suffix("-SNAPSHOT")?;
        let value = &self
            .snapshot_versions
            .iter()
            .find(|snapshot| snapshot.classifier == file.classifier && snapshot.extension == file.extension)?
            .value;
        Some(value.strip_prefix(base)?.strip_prefix('-')?.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maven::layout::MavenPath;

    const ARTIFACT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<metadata>
  <groupId>org.example</groupId>
  <artifactId>lib</artifactId>
  <versioning>
    <latest>1.1</latest>
    <release>1.1</release>
    <versions>
      <version>1.0</version>
      <version>1.1</version>
    </versions>
    <lastUpdated>20261206101500</lastUpdated>
  </versioning>
</metadata>"#;

    const SNAPSHOT: &str = r#"<metadata modelVersion="1.1.0">
  <groupId>org.example</groupId><artifactId>lib</artifactId><version>1.2-SNAPSHOT</version>
  <versioning>
    <snapshot><timestamp>20261206.101500</timestamp><buildNumber>3</buildNumber></snapshot>
    <lastUpdated>20261206101500</lastUpdated>
    <snapshotVersions>
      <snapshotVersion><extension>jar</extension><value>1.2-20261206.101500-3</value><updated>20261206101500</updated></snapshotVersion>
      <snapshotVersion><classifier>sources</classifier><extension>jar</extension><value>1.2-20261206.101500-3</value><updated>20261206101500</updated></snapshotVersion>
      <snapshotVersion><extension>pom</extension><value>1.2-20261206.101500-3</value><updated>20261206101500</updated></snapshotVersion>
    </snapshotVersions>
  </versioning>
</metadata>"#;

    #[test]
    fn an_artifact_s_metadata_lists_its_versions_and_says_when_it_changed() {
        let metadata = Metadata::read(ARTIFACT.as_bytes()).unwrap();
        assert_eq!(metadata.versions, ["1.0", "1.1"]);
        assert!(metadata.lists("1.1") && !metadata.lists("1.2"));
        assert_eq!((metadata.latest.as_deref(), metadata.last_updated), (Some("1.1"), Some(20261206101500)));
        let older = Metadata::read(ARTIFACT.replace("20261206101500", "20261205000000").as_bytes()).unwrap();
        assert!(older.is_older_than(&metadata) && !metadata.is_older_than(&older));
        let undated = Metadata::read(ARTIFACT.replace("<lastUpdated>20261206101500</lastUpdated>", "").as_bytes());
        assert!(!undated.unwrap().is_older_than(&metadata), "one without a date is not older");
    }

    #[test]
    fn a_snapshot_s_metadata_names_the_build_of_each_file() {
        let metadata = Metadata::read(SNAPSHOT.as_bytes()).unwrap();
        let file = |path: &str| match MavenPath::parse(path) {
            Some(MavenPath::File(file)) => file,
            other => panic!("{other:?}"),
        };
        let jar = file("org/example/lib/1.2-SNAPSHOT/lib-1.2-SNAPSHOT.jar");
        assert_eq!(metadata.build_of(&jar).as_deref(), Some("20261206.101500-3"));
        let sources = file("org/example/lib/1.2-SNAPSHOT/lib-1.2-SNAPSHOT-sources.jar");
        assert_eq!(metadata.build_of(&sources).as_deref(), Some("20261206.101500-3"));
        let javadoc = file("org/example/lib/1.2-SNAPSHOT/lib-1.2-SNAPSHOT-javadoc.jar");
        assert_eq!(metadata.build_of(&javadoc), None, "not in this build");
        let built = ArtifactFile { build: metadata.build_of(&jar), ..jar };
        assert_eq!(built.path(), "org/example/lib/1.2-SNAPSHOT/lib-1.2-20261206.101500-3.jar");
    }

    #[test]
    fn what_is_not_metadata_is_an_error() {
        assert!(Metadata::read(b"<html><body>rate limited</body></html").is_err());
        assert!(Metadata::read(b"{\"json\": true}").is_err());
    }
}
