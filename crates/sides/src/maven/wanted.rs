//! What a JVM build will ask a Maven repository for, read from what the
//! build leaves behind: Gradle's `gradle/verification-metadata.xml` (every
//! file, with its SHA-256), `gradle.lockfile` (every module's version), and
//! the list `mvn dependency:list -DoutputFile=FILE` writes. Each is read
//! into the files (paths below a repository) a build fetches, for
//! `pkgproxyctl check|warm maven FILE`.

use super::layout::ArtifactFile;

/// A file a build fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedFile {
    /// The file.
    pub file: ArtifactFile,
    /// Its SHA-256, where the list gives one.
    pub sha256: Option<String>,
}

/// A list that cannot be read as the file it was named as.
#[derive(Debug, thiserror::Error)]
pub enum WantedError {
    /// Gradle's verification metadata is not the XML Gradle writes.
    #[error("not Gradle's verification-metadata.xml: {0}")]
    Verification(#[from] quick_xml::DeError),
    /// A line of a lockfile or a list is not what Gradle or Maven writes.
    #[error("line {line}: {text:?} is not {expected}")]
    Line {
        /// Its number, from 1.
        line: usize,
        /// The line.
        text: String,
        /// What such a line is.
        expected: &'static str,
    },
}

#[derive(serde::Deserialize)]
struct VerificationMetadata {
    #[serde(default)]
    components: Option<Components>,
}

#[derive(serde::Deserialize)]
struct Components {
    #[serde(default)]
    component: Vec<Component>,
}

#[derive(serde::Deserialize)]
struct Component {
    #[serde(rename = "@group")]
    group: String,
    #[serde(rename = "@name")]
    name: String,
    #[serde(rename = "@version")]
    version: String,
    #[serde(default)]
    artifact: Vec<VerifiedArtifact>,
}

#[derive(serde::Deserialize)]
struct VerifiedArtifact {
    #[serde(rename = "@name")]
    name: String,
    #[serde(default)]
    sha256: Vec<Checksum>,
}

#[derive(serde::Deserialize)]
struct Checksum {
    #[serde(rename = "@value")]
    value: String,
}

/// The files Gradle's `verification-metadata.xml` names, each with the
/// SHA-256 it gives (the first, where it gives alternatives).
pub fn verification_metadata(text: &str) -> Result<Vec<WantedFile>, WantedError> {
    let metadata: VerificationMetadata = quick_xml::de::from_str(text)?;
    let mut wanted = Vec::new();
    for component in metadata.components.map(|components| components.component).unwrap_or_default() {
        for artifact in component.artifact {
            let folders = folders(&component.group, &component.name, &component.version);
            let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
            let Some(file) = ArtifactFile::in_folder(&folders, &artifact.name) else { continue };
            let sha256 = artifact.sha256.first().map(|checksum| checksum.value.to_ascii_lowercase());
            wanted.push(WantedFile { file, sha256 });
        }
    }
    Ok(wanted)
}

/// The modules `gradle.lockfile` locks (`GROUP:NAME:VERSION=CONFIGURATIONS`),
/// each as its pom and its jar: what Gradle fetches of a module with no
/// other metadata.
pub fn gradle_lockfile(text: &str) -> Result<Vec<WantedFile>, WantedError> {
    let mut wanted = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("empty=") {
            continue;
        }
        let module = line.split_once('=').map_or(line, |(module, _)| module);
        let bad = || WantedError::Line {
            line: index + 1,
            text: line.to_owned(),
            expected: "GROUP:NAME:VERSION=CONFIGURATIONS",
        };
        let [group, name, version] = module.split(':').collect::<Vec<_>>()[..] else { return Err(bad()) };
        for extension in ["pom", "jar"] {
            let file = coordinates(group, name, version, None, extension).ok_or_else(bad)?;
            wanted.push(WantedFile { file, sha256: None });
        }
    }
    Ok(wanted)
}

/// The artifacts `mvn dependency:list -DoutputFile=FILE` lists
/// (`GROUP:ARTIFACT:TYPE[:CLASSIFIER]:VERSION:SCOPE`, a `-- module ...`
/// note after some), each as its pom and its file.
pub fn dependency_list(text: &str) -> Result<Vec<WantedFile>, WantedError> {
    let mut wanted = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.split(" -- ").next().unwrap_or_default().trim();
        if line.is_empty() || line.starts_with("The following") || line == "none" {
            continue;
        }
        let bad = || WantedError::Line {
            line: index + 1,
            text: line.to_owned(),
            expected: "GROUP:ARTIFACT:TYPE[:CLASSIFIER]:VERSION:SCOPE",
        };
        let parts: Vec<&str> = line.split(':').collect();
        let (group, artifact, kind, classifier, version) = match parts[..] {
            [group, artifact, kind, version, _scope] => (group, artifact, kind, None, version),
            [group, artifact, kind, classifier, version, _scope] => (group, artifact, kind, Some(classifier), version),
            _ => return Err(bad()),
        };
        let (classifier, extension) = file_of_type(kind, classifier);
        let pom = coordinates(group, artifact, version, None, "pom").ok_or_else(bad)?;
        let file = coordinates(group, artifact, version, classifier, extension).ok_or_else(bad)?;
        wanted.push(WantedFile { file: pom.clone(), sha256: None });
        if file != pom {
            wanted.push(WantedFile { file, sha256: None });
        }
    }
    Ok(wanted)
}

/// The classifier and extension of a dependency of Maven's `type`, by the
/// artifact handlers Maven ships (`test-jar` is the `tests` jar, a plugin's
/// and an EJB's are jars).
fn file_of_type<'a>(kind: &'a str, classifier: Option<&'a str>) -> (Option<&'a str>, &'a str) {
    match kind {
        "test-jar" => (Some(classifier.unwrap_or("tests")), "jar"),
        "maven-plugin" | "ejb" | "ejb-client" | "java-source" | "javadoc" | "bundle" => (classifier, "jar"),
        other => (classifier, other),
    }
}

/// The folders a module's files are in: the group's path, its name, its
/// version.
fn folders(group: &str, name: &str, version: &str) -> Vec<String> {
    let mut folders: Vec<String> = group.split('.').map(str::to_owned).collect();
    folders.push(name.to_owned());
    folders.push(version.to_owned());
    folders
}

/// The file of `group:artifact:version`, its `classifier` and `extension`.
fn coordinates(
    group: &str,
    artifact: &str,
    version: &str,
    classifier: Option<&str>,
    extension: &str,
) -> Option<ArtifactFile> {
    let classifier = classifier.map(|classifier| format!("-{classifier}")).unwrap_or_default();
    let folders = folders(group, artifact, version);
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    ArtifactFile::in_folder(&folders, &format!("{artifact}-{version}{classifier}.{extension}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERIFICATION: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<verification-metadata xmlns="https://schema.gradle.org/dependency-verification" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
   <configuration>
      <verify-metadata>true</verify-metadata>
      <verify-signatures>false</verify-signatures>
   </configuration>
   <components>
      <component group="org.apache.commons" name="commons-lang3" version="3.14.0">
         <artifact name="commons-lang3-3.14.0.jar">
            <sha256 value="7B96BF3EE68949ABB5BC465559AC270E0551596FA34523FDDF890EC418DDE13C" origin="Generated by Gradle"/>
         </artifact>
         <artifact name="commons-lang3-3.14.0.pom">
            <sha256 value="59a8b8e5f3b2e6c0d8f3e8f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5" origin="Generated by Gradle"/>
         </artifact>
      </component>
      <component group="com.google.guava" name="guava" version="33.0.0-jre">
         <artifact name="guava-33.0.0-jre.module">
            <sha256 value="1111111111111111111111111111111111111111111111111111111111111111" origin="Generated by Gradle"/>
         </artifact>
      </component>
   </components>
</verification-metadata>"#;

    fn paths(wanted: &[WantedFile]) -> Vec<String> {
        wanted.iter().map(|wanted| wanted.file.path()).collect()
    }

    #[test]
    fn gradle_s_verification_metadata_names_each_file_and_its_sha256() {
        let wanted = verification_metadata(VERIFICATION).unwrap();
        assert_eq!(
            paths(&wanted),
            [
                "org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.jar",
                "org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.pom",
                "com/google/guava/guava/33.0.0-jre/guava-33.0.0-jre.module",
            ]
        );
        assert_eq!(
            wanted[0].sha256.as_deref(),
            Some("7b96bf3ee68949abb5bc465559ac270e0551596fa34523fddf890ec418dde13c")
        );
        assert!(verification_metadata("<html>").is_err());
    }

    #[test]
    fn a_gradle_lockfile_names_each_module_s_pom_and_jar() {
        let lock = "# This is a Gradle generated file for dependency locking.\n# Manual edits can break the build and are not advised.\n# This file is expected to be part of source control.\norg.apache.commons:commons-lang3:3.14.0=compileClasspath,runtimeClasspath\nempty=annotationProcessor\n";
        let wanted = gradle_lockfile(lock).unwrap();
        assert_eq!(
            paths(&wanted),
            [
                "org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.pom",
                "org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.jar",
            ]
        );
        let error = gradle_lockfile("org.apache.commons=compileClasspath\n").unwrap_err().to_string();
        assert!(error.starts_with("line 1:"), "{error}");
    }

    #[test]
    fn maven_s_dependency_list_names_each_artifact_s_pom_and_file() {
        let list = "\nThe following files have been resolved:\n   org.apache.commons:commons-lang3:jar:3.14.0:compile -- module org.apache.commons.lang3\n   com.example:lib:test-jar:tests:1.0:test\n   org.example:parent:pom:2.0:import\n";
        let wanted = dependency_list(list).unwrap();
        assert_eq!(
            paths(&wanted),
            [
                "org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.pom",
                "org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.jar",
                "com/example/lib/1.0/lib-1.0.pom",
                "com/example/lib/1.0/lib-1.0-tests.jar",
                "org/example/parent/2.0/parent-2.0.pom",
            ]
        );
        let error = dependency_list("   junit:junit\n").unwrap_err().to_string();
        assert!(error.contains("GROUP:ARTIFACT:TYPE"), "{error}");
    }
}
