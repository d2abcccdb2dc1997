//! An artifact as a Maven repository holds one: its coordinates, its files
//! (the pom, the jar, classifier variants) and where the Maven 2 layout
//! puts them; built in memory, or copied from a Debian `maven-repo` with
//! their real bytes.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;

/// Where Debian's Java packages install their artifacts, in the Maven 2
/// layout.
pub const DEBIAN_MAVEN_REPO: &str = "/usr/share/maven-repo";

/// One build of a SNAPSHOT version: its files are named after its
/// timestamp and build number instead of `-SNAPSHOT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotBuild {
    /// When it was deployed, `YYYYMMDD.HHMMSS` (UTC), as in `<timestamp>`.
    pub timestamp: String,
    /// The deployment's number among this version's builds, from 1.
    pub build_number: u32,
}

/// One file of an artifact.
#[derive(Debug, Clone)]
pub struct MavenFile {
    /// The classifier (`sources`, `javadoc`, `linux-x86_64`), if any.
    pub classifier: Option<String>,
    /// The extension, `jar`, `pom`, `module`, `aar`.
    pub extension: String,
    /// Its bytes.
    pub bytes: Bytes,
}

/// A version of an artifact, with its files.
#[derive(Debug, Clone)]
pub struct MavenArtifact {
    /// The group, dotted (`commons-io`, `org.apache.commons`).
    pub group: String,
    /// The artifact id.
    pub artifact: String,
    /// The version as clients name it (`1.0`, `1.0-SNAPSHOT`).
    pub version: String,
    /// The build a SNAPSHOT version's files are of; `None` for a release.
    pub snapshot: Option<SnapshotBuild>,
    /// What its pom declares it depends on: group, artifact, version.
    pub dependencies: Vec<(String, String, String)>,
    /// Its files, the pom first.
    pub files: Vec<MavenFile>,
}

impl MavenArtifact {
    /// Release `version` of `group:artifact`: a pom declaring no
    /// dependencies and a small jar.
    pub fn jar(group: &str, artifact: &str, version: &str) -> MavenArtifact {
        let mut made = MavenArtifact {
            group: group.to_owned(),
            artifact: artifact.to_owned(),
            version: version.to_owned(),
            snapshot: None,
            dependencies: Vec::new(),
            files: Vec::new(),
        };
        let jar = small_jar(&made.coordinates(), 0);
        made.files = vec![made.pom_file(), file(None, "jar", jar)];
        made
    }

    /// Build `build_number` of `base` (`1.0-SNAPSHOT`) of `group:artifact`,
    /// deployed at `timestamp` (`YYYYMMDD.HHMMSS`): its files are named
    /// `ARTIFACT-1.0-TIMESTAMP-BUILD.EXT`.
    pub fn snapshot(group: &str, artifact: &str, base: &str, timestamp: &str, build_number: u32) -> MavenArtifact {
        assert!(base.ends_with("-SNAPSHOT"), "a SNAPSHOT version ends with -SNAPSHOT: {base}");
        let mut made = MavenArtifact::jar(group, artifact, base);
        made.snapshot = Some(SnapshotBuild { timestamp: timestamp.to_owned(), build_number });
        // The jar says which build it is, so two builds differ.
        let jar = small_jar(&format!("{} {timestamp}-{build_number}", made.coordinates()), 0);
        made.files = vec![made.pom_file(), file(None, "jar", jar)];
        made
    }

    /// The same, its pom declaring a dependency on `group:artifact:version`.
    pub fn depends_on(mut self, group: &str, artifact: &str, version: &str) -> MavenArtifact {
        self.dependencies.push((group.to_owned(), artifact.to_owned(), version.to_owned()));
        self.files[0] = self.pom_file();
        self
    }

    /// The same, its jar `bytes`.
    pub fn with_jar(self, bytes: impl Into<Bytes>) -> MavenArtifact {
        self.with_file(None, "jar", bytes)
    }

    /// The same, its jar a real one of `size` bytes at least (entries that
    /// do not compress away).
    pub fn sized(self, size: usize) -> MavenArtifact {
        let jar = small_jar(&self.coordinates(), size);
        self.with_jar(jar)
    }

    /// The same with a file of `classifier` and `extension` (replacing
    /// one of the same name).
    pub fn with_file(mut self, classifier: Option<&str>, extension: &str, bytes: impl Into<Bytes>) -> MavenArtifact {
        let classifier = classifier.map(str::to_owned);
        self.files.retain(|held| held.classifier != classifier || held.extension != extension);
        self.files.push(MavenFile { classifier, extension: extension.to_owned(), bytes: bytes.into() });
        self
    }

    /// `group:artifact:version`.
    pub fn coordinates(&self) -> String {
        format!("{}:{}:{}", self.group, self.artifact, self.version)
    }

    /// The version its files are named with: the version, or for a
    /// SNAPSHOT build `1.0-TIMESTAMP-BUILD`.
    pub fn file_version(&self) -> String {
        match &self.snapshot {
            None => self.version.clone(),
            Some(build) => {
                let base = self.version.trim_end_matches("-SNAPSHOT");
                format!("{base}-{}-{}", build.timestamp, build.build_number)
            }
        }
    }

    /// The folder of its group and artifact, `/org/apache/commons/ARTIFACT`.
    pub fn artifact_dir(&self) -> String {
        format!("/{}/{}", self.group.replace('.', "/"), self.artifact)
    }

    /// The folder of this version, `/GROUP/ARTIFACT/VERSION`.
    pub fn version_dir(&self) -> String {
        format!("{}/{}", self.artifact_dir(), self.version)
    }

    /// Where `file` is in the layout,
    /// `/GROUP/ARTIFACT/VERSION/ARTIFACT-VERSION[-CLASSIFIER].EXT`.
    pub fn path_of(&self, file: &MavenFile) -> String {
        let classifier = file.classifier.as_ref().map(|classifier| format!("-{classifier}")).unwrap_or_default();
        format!("{}/{}-{}{classifier}.{}", self.version_dir(), self.artifact, self.file_version(), file.extension)
    }

    /// Where its file of `extension` without classifier is (`jar`, `pom`).
    pub fn path(&self, extension: &str) -> String {
        format!("{}/{}-{}.{extension}", self.version_dir(), self.artifact, self.file_version())
    }

    /// Its file of `extension` without classifier.
    pub fn file(&self, extension: &str) -> Option<&MavenFile> {
        self.files.iter().find(|held| held.classifier.is_none() && held.extension == extension)
    }

    /// Its pom, declaring its dependencies.
    fn pom_file(&self) -> MavenFile {
        let dependencies: String = self
            .dependencies
            .iter()
            .map(|(group, artifact, version)| {
                format!(
                    "    <dependency>\n      <groupId>{group}</groupId>\n      <artifactId>{artifact}</artifactId>\n      <version>{version}</version>\n    </dependency>\n"
                )
            })
            .collect();
        let pom = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  <modelVersion>4.0.0</modelVersion>\n  <groupId>{}</groupId>\n  <artifactId>{}</artifactId>\n  <version>{}</version>\n  <packaging>jar</packaging>\n  <description>Made by the test kit.</description>\n  <dependencies>\n{dependencies}  </dependencies>\n</project>\n",
            self.group, self.artifact, self.version
        );
        file(None, "pom", pom)
    }
}

fn file(classifier: Option<&str>, extension: &str, bytes: impl Into<Bytes>) -> MavenFile {
    MavenFile { classifier: classifier.map(str::to_owned), extension: extension.to_owned(), bytes: bytes.into() }
}

/// A real jar (a zip with a manifest and one resource naming `what`), of
/// `size` bytes at least; the same for the same arguments.
fn small_jar(what: &str, size: usize) -> Bytes {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    // A fixed time, so a jar depends on its contents only.
    let stored = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default());
    zip.start_file("META-INF/MANIFEST.MF", stored).expect("a jar entry");
    zip.write_all(b"Manifest-Version: 1.0\r\nCreated-By: pkgproxy-testkit\r\n\r\n").expect("a manifest");
    zip.start_file("testkit.txt", stored).expect("a jar entry");
    let mut text = format!("{what}\n");
    let mut line = 0u64;
    while text.len() < size {
        use sha2::Digest;
        text.push_str(&format!("{}\n", hex::encode(sha2::Sha256::digest(line.to_le_bytes()))));
        line += 1;
    }
    zip.write_all(text.as_bytes()).expect("a resource");
    Bytes::from(zip.finish().expect("a jar").into_inner())
}

/// Artifacts copied from a Maven 2 layout on disk, and what was not there.
#[derive(Debug, Clone, Default)]
pub struct LoadedArtifacts {
    /// The versions found: each with its pom and, if there is one, its jar.
    pub artifacts: Vec<MavenArtifact>,
    /// `group:artifact:version` of each one found.
    pub loaded: Vec<String>,
    /// `group:artifact:version` of each one asked for and not found.
    pub missing: Vec<String>,
}

/// Copies the poms and jars of `wanted` (group, artifact, version) from
/// the Maven 2 layout under `root` ([`DEBIAN_MAVEN_REPO`] for the Java
/// packages installed), with their real bytes. A version without a pom is
/// skipped and named in `missing`.
pub fn load_maven_repo(root: &Path, wanted: &[(&str, &str, &str)]) -> LoadedArtifacts {
    let mut loaded = LoadedArtifacts::default();
    for (group, artifact, version) in wanted {
        let coordinates = format!("{group}:{artifact}:{version}");
        let dir = root.join(group.replace('.', "/")).join(artifact).join(version);
        let read = |extension: &str| std::fs::read(dir.join(format!("{artifact}-{version}.{extension}"))).ok();
        let Some(pom) = read("pom") else {
            loaded.missing.push(coordinates);
            continue;
        };
        let mut files = vec![file(None, "pom", pom)];
        files.extend(read("jar").map(|jar| file(None, "jar", jar)));
        loaded.artifacts.push(MavenArtifact {
            group: group.to_string(),
            artifact: artifact.to_string(),
            version: version.to_string(),
            snapshot: None,
            dependencies: Vec::new(),
            files,
        });
        loaded.loaded.push(coordinates);
    }
    loaded
}
