//! What a path of a Maven 2 repository names, by the layout every Maven
//! repository serves (`GROUP/AS/PATH/ARTIFACT/VERSION/FILE`): an artifact's
//! file (a pom, a jar and its classifier variants, a Gradle module), a
//! checksum or signature beside a file, or a `maven-metadata.xml`.
//!
//! What is immutable follows from it: a release's files never change under
//! their names, nor do a SNAPSHOT's timestamped files; metadata does, and
//! a `-SNAPSHOT` name is resolved through its version's metadata.

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MavenPath {
    /// A file of an artifact.
    File(ArtifactFile),
    /// A checksum or signature of the file (or metadata) `of` names.
    Sidecar {
        /// What it is beside.
        of: Box<MavenPath>,
        /// Which.
        kind: Sidecar,
    },
    /// A `maven-metadata.xml`, of the folder `folder` (its path below the
    /// repository, without slashes at either end).
    Metadata {
        /// The folder: a group's (plugin prefixes), an artifact's
        /// (its versions), or a SNAPSHOT version's (its timestamped files).
        folder: String,
    },
}

/// A file of one version of an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactFile {
    /// The group, with dots (`org.apache.commons`).
    pub group: String,
    /// The artifact's id.
    pub artifact: String,
    /// The version folder's name (`1.0`, `1.0-SNAPSHOT`).
    pub version: String,
    /// A SNAPSHOT's timestamped build this file is of
    /// (`20261206.101500-3`), when the name carries one.
    pub build: Option<String>,
    /// Its classifier (`sources`, `javadoc`, `linux-x86_64`), if any.
    pub classifier: Option<String>,
    /// Its extension (`jar`, `pom`, `module`, `tar.gz`).
    pub extension: String,
}

/// A checksum or signature published beside a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sidecar {
    /// An MD5, hex.
    Md5,
    /// A SHA-1, hex: what every repository publishes.
    Sha1,
    /// A SHA-256, hex.
    Sha256,
    /// A SHA-512, hex.
    Sha512,
    /// An OpenPGP signature (`.asc`).
    Asc,
}

impl Sidecar {
    /// Every sidecar, by its file name's ending.
    pub const ALL: [Sidecar; 5] = [Sidecar::Md5, Sidecar::Sha1, Sidecar::Sha256, Sidecar::Sha512, Sidecar::Asc];

    /// The checksums a file is checked against, the strongest first.
    pub const CHECKSUMS_STRONGEST_FIRST: [Sidecar; 3] = [Sidecar::Sha512, Sidecar::Sha256, Sidecar::Sha1];

    /// Its file name's ending, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Sidecar::Md5 => "md5",
            Sidecar::Sha1 => "sha1",
            Sidecar::Sha256 => "sha256",
            Sidecar::Sha512 => "sha512",
            Sidecar::Asc => "asc",
        }
    }

    /// The length of its hex digest, for a checksum.
    pub fn hex_len(self) -> Option<usize> {
        match self {
            Sidecar::Md5 => Some(32),
            Sidecar::Sha1 => Some(40),
            Sidecar::Sha256 => Some(64),
            Sidecar::Sha512 => Some(128),
            Sidecar::Asc => None,
        }
    }
}

/// The name of a metadata file.
pub const METADATA: &str = "maven-metadata.xml";

impl MavenPath {
    /// What `path` (below the repository, decoded, with or without a
    /// leading `/`) names; `None` for what no Maven repository lays out
    /// (an empty segment, `.` or `..`, a file that does not name its
    /// folder's artifact and version).
    pub fn parse(path: &str) -> Option<MavenPath> {
        let path = path.strip_prefix('/').unwrap_or(path);
        let segments: Vec<&str> = path.split('/').collect();
        if segments.iter().any(|segment| !is_segment(segment)) {
            return None;
        }
        let (file, folders) = segments.split_last()?;
        if let Some((stem, kind)) = Sidecar::ALL.iter().find_map(|kind| {
            let stem = file.strip_suffix(kind.extension())?.strip_suffix('.')?;
            Some((stem, *kind))
        }) {
            let mut beside = folders.to_vec();
            beside.push(stem);
            let of = MavenPath::parse(&beside.join("/"))?;
            return Some(MavenPath::Sidecar { of: Box::new(of), kind });
        }
        if *file == METADATA {
            return (!folders.is_empty()).then(|| MavenPath::Metadata { folder: folders.join("/") });
        }
        ArtifactFile::parse(folders, file).map(MavenPath::File)
    }

    /// Whether what it names never changes under its name: a release's
    /// files and a SNAPSHOT's timestamped ones (and their sidecars); not
    /// metadata, nor a `-SNAPSHOT` file named without its build.
    pub fn is_immutable(&self) -> bool {
        match self {
            MavenPath::File(file) => !file.is_snapshot() || file.build.is_some(),
            MavenPath::Sidecar { of, .. } => of.is_immutable(),
            MavenPath::Metadata { .. } => false,
        }
    }
}

impl ArtifactFile {
    /// The file `name` in `folders` (`GROUP/AS/PATH/ARTIFACT/VERSION`),
    /// if a repository lays it out there.
    pub fn in_folder(folders: &[&str], name: &str) -> Option<ArtifactFile> {
        if folders.iter().chain([&name]).any(|segment| !is_segment(segment)) {
            return None;
        }
        ArtifactFile::parse(folders, name)
    }

    /// The file `name` in `folders` (`GROUP/AS/PATH/ARTIFACT/VERSION`).
    fn parse(folders: &[&str], name: &str) -> Option<ArtifactFile> {
        let [group @ .., artifact, version] = folders else { return None };
        if group.is_empty() {
            return None;
        }
        let rest = name.strip_prefix(*artifact)?.strip_prefix('-')?;
        let (rest, build) = match version.strip_suffix("-SNAPSHOT") {
            Some(base) => match rest.strip_prefix(*version) {
                Some(rest) => (rest, None),
                None => {
                    let after = rest.strip_prefix(base)?.strip_prefix('-')?;
                    let (build, rest) = split_build(after)?;
                    (rest, Some(build.to_owned()))
                }
            },
            None => (rest.strip_prefix(*version)?, None),
        };
        let (classifier, extension) = match rest.strip_prefix('-') {
            Some(classified) => {
                let (classifier, extension) = classified.split_once('.')?;
                (Some(classifier.to_owned()), extension)
            }
            None => (None, rest.strip_prefix('.')?),
        };
        if extension.is_empty() || classifier.as_deref() == Some("") {
            return None;
        }
        Some(ArtifactFile {
            group: group.join("."),
            artifact: (*artifact).to_owned(),
            version: (*version).to_owned(),
            build,
            classifier,
            extension: extension.to_owned(),
        })
    }

    /// Whether it is of a `-SNAPSHOT` version.
    pub fn is_snapshot(&self) -> bool {
        self.version.ends_with("-SNAPSHOT")
    }

    /// Its path below the repository.
    pub fn path(&self) -> String {
        let version_in_name = match (&self.build, self.version.strip_suffix("-SNAPSHOT")) {
            (Some(build), Some(base)) => format!("{base}-{build}"),
            _ => self.version.clone(),
        };
        let classifier = self.classifier.as_ref().map(|c| format!("-{c}")).unwrap_or_default();
        format!(
            "{}/{}/{}/{}-{version_in_name}{classifier}.{}",
            self.group.replace('.', "/"),
            self.artifact,
            self.version,
            self.artifact,
            self.extension
        )
    }
}

/// A SNAPSHOT build's `TIMESTAMP-BUILDNUMBER` (`20261206.101500-3`) at the
/// start of `text`, and what follows it.
fn split_build(text: &str) -> Option<(&str, &str)> {
    let (date, rest) = text.split_once('.')?;
    let time = rest.get(..6)?;
    let after_time = rest[6..].strip_prefix('-')?;
    let digits = after_time.bytes().take_while(u8::is_ascii_digit).count();
    let fine = date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) && time.bytes().all(|b| b.is_ascii_digit());
    if !fine || digits == 0 {
        return None;
    }
    let length = date.len() + 1 + 6 + 1 + digits;
    Some((&text[..length], &text[length..]))
}

/// Whether `segment` may be a folder's or a file's name in a repository.
pub fn is_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && segment.len() <= 255
        && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.+~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> ArtifactFile {
        match MavenPath::parse(path) {
            Some(MavenPath::File(file)) => file,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn files_name_their_coordinates() {
        let jar = file("/org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.jar");
        assert_eq!(
            (jar.group.as_str(), jar.artifact.as_str(), jar.version.as_str()),
            ("org.apache.commons", "commons-lang3", "3.14.0")
        );
        assert_eq!((jar.classifier, jar.extension.as_str()), (None, "jar"));
        let sources = file("com/google/guava/guava/33.0.0-jre/guava-33.0.0-jre-sources.jar");
        assert_eq!((sources.version.as_str(), sources.classifier.as_deref()), ("33.0.0-jre", Some("sources")));
        let native = file("io/netty/netty-tcnative/2.0.61.Final/netty-tcnative-2.0.61.Final-linux-x86_64.jar");
        assert_eq!(native.classifier.as_deref(), Some("linux-x86_64"));
        let archive = file("org/example/dist/1.0/dist-1.0-bin.tar.gz");
        assert_eq!((archive.classifier.as_deref(), archive.extension.as_str()), (Some("bin"), "tar.gz"));
        assert_eq!(file("org/example/lib/1.0/lib-1.0.module").extension, "module");
        for path in [
            "org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.jar",
            "org/example/dist/1.0/dist-1.0-bin.tar.gz",
        ] {
            assert_eq!(file(path).path(), path, "written back as it was");
        }
    }

    #[test]
    fn snapshots_are_immutable_only_by_their_timestamped_names() {
        let timestamped = file("org/example/lib/1.1-SNAPSHOT/lib-1.1-20261206.101500-3-sources.jar");
        assert_eq!(timestamped.build.as_deref(), Some("20261206.101500-3"));
        assert_eq!(timestamped.classifier.as_deref(), Some("sources"));
        assert!(MavenPath::File(timestamped.clone()).is_immutable());
        assert_eq!(timestamped.path(), "org/example/lib/1.1-SNAPSHOT/lib-1.1-20261206.101500-3-sources.jar");
        let named = file("org/example/lib/1.1-SNAPSHOT/lib-1.1-SNAPSHOT.jar");
        assert_eq!(named.build, None);
        assert!(!MavenPath::File(named).is_immutable());
        assert!(MavenPath::parse("org/example/lib/1.1/lib-1.1.jar").unwrap().is_immutable());
    }

    #[test]
    fn sidecars_and_metadata_are_named() {
        let sha1 = MavenPath::parse("org/example/lib/1.0/lib-1.0.jar.sha1").unwrap();
        let MavenPath::Sidecar { of, kind } = &sha1 else { panic!("{sha1:?}") };
        assert_eq!((*kind, of.is_immutable()), (Sidecar::Sha1, true));
        let signature_checksum = MavenPath::parse("org/example/lib/1.0/lib-1.0.pom.asc.sha256").unwrap();
        let MavenPath::Sidecar { of, kind: Sidecar::Sha256 } = signature_checksum else { panic!() };
        assert!(matches!(*of, MavenPath::Sidecar { kind: Sidecar::Asc, .. }));
        assert_eq!(
            MavenPath::parse("org/example/lib/maven-metadata.xml"),
            Some(MavenPath::Metadata { folder: "org/example/lib".into() })
        );
        let metadata_sha1 = MavenPath::parse("org/example/lib/maven-metadata.xml.sha1").unwrap();
        assert!(!metadata_sha1.is_immutable());
        assert_eq!(Sidecar::CHECKSUMS_STRONGEST_FIRST[0], Sidecar::Sha512);
    }

    #[test]
    fn what_no_repository_lays_out_is_refused() {
        for path in [
            "",
            "lib-1.0.jar",
            "lib/1.0/lib-1.0.jar",
            "org/example/lib/1.0/other-1.0.jar",
            "org/example/lib/1.0/lib-1.1.jar",
            "org/../lib/1.0/lib-1.0.jar",
            "org//lib/1.0/lib-1.0.jar",
            "org/example/lib/1.0/lib-1.0",
            "org/example/lib/1.0/lib-1.0-.jar",
            "org/example/lib/1.0-SNAPSHOT/lib-1.0-2026.1-1.jar",
            "org/example/lib/1.0/lib 1.0.jar",
            "maven-metadata.xml",
        ] {
            assert_eq!(MavenPath::parse(path), None, "{path}");
        }
    }
}
