//! `maven-metadata.xml` as a repository writes it, from the versions held:
//! at artifact level (the versions, `latest`, `release`) and at the level
//! of a SNAPSHOT version (its newest build and that build's files). Pure.

use bytes::Bytes;

use super::held::{last_updated, Held};

/// The `maven-metadata.xml` of folder `dir` (`/GROUP/ARTIFACT` or
/// `/GROUP/ARTIFACT/VERSION-SNAPSHOT`) and the minute it last changed;
/// `None` where a repository has none.
pub(super) fn at(held: &[Held], dir: &str) -> Option<(Bytes, u64)> {
    let versions: Vec<&Held> = held.iter().filter(|held| held.artifact.artifact_dir() == dir).collect();
    if !versions.is_empty() {
        return Some(artifact_level(&versions));
    }
    let builds: Vec<&Held> =
        held.iter().filter(|held| held.artifact.snapshot.is_some() && held.artifact.version_dir() == dir).collect();
    (!builds.is_empty()).then(|| snapshot_level(&builds))
}

/// The versions of one artifact, `held` in the order published.
fn artifact_level(held: &[&Held]) -> (Bytes, u64) {
    let first = &held[0].artifact;
    let mut versions: Vec<&str> = Vec::new();
    for held in held {
        if !versions.contains(&held.artifact.version.as_str()) {
            versions.push(&held.artifact.version);
        }
    }
    let minute = held.iter().map(|held| held.minute).max().unwrap_or_default();
    let latest = held.last().map(|held| held.artifact.version.as_str()).unwrap_or_default();
    let release = held.iter().rev().find(|held| held.artifact.snapshot.is_none());
    let release = release.map(|held| format!("    <release>{}</release>\n", held.artifact.version)).unwrap_or_default();
    let listed: String = versions.iter().map(|version| format!("      <version>{version}</version>\n")).collect();
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metadata>\n  <groupId>{}</groupId>\n  <artifactId>{}</artifactId>\n  <versioning>\n    <latest>{latest}</latest>\n{release}    <versions>\n{listed}    </versions>\n    <lastUpdated>{}</lastUpdated>\n  </versioning>\n</metadata>\n",
        first.group,
        first.artifact,
        last_updated(minute)
    );
    (Bytes::from(xml), minute)
}

/// The builds of one SNAPSHOT version, `held` in the order published: the
/// newest names the files a client resolves `-SNAPSHOT` to.
fn snapshot_level(held: &[&Held]) -> (Bytes, u64) {
    let newest = held.iter().max_by_key(|held| held.minute).expect("a build");
    let artifact = &newest.artifact;
    let build = artifact.snapshot.as_ref().expect("a SNAPSHOT build");
    let updated = build.timestamp.replace('.', "");
    let files: String = artifact
        .files
        .iter()
        .map(|file| {
            let classifier =
                file.classifier.as_ref().map(|c| format!("        <classifier>{c}</classifier>\n")).unwrap_or_default();
            format!(
                "      <snapshotVersion>\n{classifier}        <extension>{}</extension>\n        <value>{}</value>\n        <updated>{updated}</updated>\n      </snapshotVersion>\n",
                file.extension,
                artifact.file_version()
            )
        })
        .collect();
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metadata modelVersion=\"1.1.0\">\n  <groupId>{}</groupId>\n  <artifactId>{}</artifactId>\n  <version>{}</version>\n  <versioning>\n    <snapshot>\n      <timestamp>{}</timestamp>\n      <buildNumber>{}</buildNumber>\n    </snapshot>\n    <lastUpdated>{}</lastUpdated>\n    <snapshotVersions>\n{files}    </snapshotVersions>\n  </versioning>\n</metadata>\n",
        artifact.group,
        artifact.artifact,
        artifact.version,
        build.timestamp,
        build.build_number,
        last_updated(newest.minute)
    );
    (Bytes::from(xml), newest.minute)
}
