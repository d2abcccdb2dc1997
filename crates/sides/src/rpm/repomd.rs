//! What a repository's `repodata/repomd.xml` says: its revision (so that
//! an older copy from a mirror that lags never replaces a newer one), and
//! each metadata file it names (primary, filelists, other, updateinfo,
//! comps, modules; compressed as `.gz`, `.xz`, `.zst` or `.zck`) with the
//! checksum it must have, as dnf reads it: a metadata file is checked
//! against it before it is cached.

/// A `repomd.xml`, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repomd {
    /// `<revision>`: a number (seconds since the epoch, as createrepo
    /// writes it) for the repositories that write one.
    pub revision: Option<String>,
    /// Each `<data>`, in the order written.
    pub files: Vec<MetadataFile>,
}

/// One metadata file a `repomd.xml` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataFile {
    /// Its type (`primary`, `filelists_zck`, `updateinfo`, `group_xz`).
    pub kind: String,
    /// Its path below the repository (`repodata/HASH-primary.xml.zst`).
    pub location: String,
    /// The checksum of the file as served.
    pub checksum: Checksum,
    /// Its size as served, where given.
    pub size: Option<u64>,
}

/// A checksum as RPM metadata writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    /// `sha256`, `sha512`, `sha1` (`sha` is SHA-1 too, in old repositories).
    pub algorithm: Algorithm,
    /// Lower-case hex.
    pub hex: String,
}

/// A checksum's algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// SHA-1 (`sha1`, or `sha` in old repositories).
    Sha1,
    /// SHA-256.
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512.
    Sha512,
}

impl Algorithm {
    /// The algorithm RPM metadata names `name`; `None` for MD5 (which
    /// proves nothing) and what is not a checksum.
    pub fn named(name: &str) -> Option<Algorithm> {
        match name.trim().to_ascii_lowercase().as_str() {
            "sha" | "sha1" => Some(Algorithm::Sha1),
            "sha256" => Some(Algorithm::Sha256),
            "sha384" => Some(Algorithm::Sha384),
            "sha512" => Some(Algorithm::Sha512),
            _ => None,
        }
    }

    /// The length of its hex digest.
    pub fn hex_len(self) -> usize {
        match self {
            Algorithm::Sha1 => 40,
            Algorithm::Sha256 => 64,
            Algorithm::Sha384 => 96,
            Algorithm::Sha512 => 128,
        }
    }
}

impl Checksum {
    /// `hex` of `algorithm` (as written), if it is one.
    pub fn new(algorithm: &str, hex: &str) -> Option<Checksum> {
        let algorithm = Algorithm::named(algorithm)?;
        let hex = hex.trim().to_ascii_lowercase();
        (hex.len() == algorithm.hex_len() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then_some(Checksum { algorithm, hex })
    }
}

/// A body that is not a `repomd.xml` dnf would read.
#[derive(Debug, thiserror::Error)]
pub enum RepomdError {
    /// Not the XML of a `repomd.xml`.
    #[error("not a repomd.xml: {0}")]
    Xml(#[from] quick_xml::DeError),
    /// No `<data>` at all (an error page served as `200`).
    #[error("not a repomd.xml: it names no metadata file")]
    Empty,
    /// A `<data>` without a location or a usable checksum.
    #[error("repomd.xml's {kind:?} data names no {missing}")]
    Incomplete {
        /// The data's type.
        kind: String,
        /// What it lacks.
        missing: &'static str,
    },
}

#[derive(serde::Deserialize)]
struct Document {
    #[serde(default)]
    revision: Option<String>,
    #[serde(default)]
    data: Vec<RawData>,
}

#[derive(serde::Deserialize)]
struct RawData {
    #[serde(rename = "@type")]
    kind: String,
    #[serde(default)]
    checksum: Option<RawChecksum>,
    #[serde(default)]
    location: Option<RawLocation>,
    #[serde(default)]
    size: Option<String>,
}

#[derive(serde::Deserialize)]
struct RawChecksum {
    #[serde(rename = "@type")]
    algorithm: String,
    #[serde(rename = "$text")]
    hex: String,
}

#[derive(serde::Deserialize)]
struct RawLocation {
    #[serde(rename = "@href")]
    href: String,
}

impl Repomd {
    /// Reads `body`.
    pub fn read(body: &[u8]) -> Result<Repomd, RepomdError> {
        let text = String::from_utf8_lossy(body);
        let document: Document = quick_xml::de::from_str(&text)?;
        let mut files = Vec::with_capacity(document.data.len());
        for raw in document.data {
            let incomplete = |missing| RepomdError::Incomplete { kind: raw.kind.clone(), missing };
            let location = raw.location.as_ref().map(|l| l.href.trim().to_owned()).filter(|l| !l.is_empty());
            let location = location.ok_or_else(|| incomplete("location"))?;
            let checksum = raw.checksum.as_ref().and_then(|c| Checksum::new(&c.algorithm, &c.hex));
            let checksum = checksum.ok_or_else(|| incomplete("SHA checksum"))?;
            let size = raw.size.as_deref().and_then(|size| size.trim().parse().ok());
            files.push(MetadataFile { kind: raw.kind, location, checksum, size });
        }
        if files.is_empty() {
            return Err(RepomdError::Empty);
        }
        let revision = document.revision.map(|revision| revision.trim().to_owned()).filter(|r| !r.is_empty());
        Ok(Repomd { revision, files })
    }

    /// The file at `location` (below the repository), if it names one.
    pub fn file_at(&self, location: &str) -> Option<&MetadataFile> {
        self.files.iter().find(|file| file.location == location)
    }

    /// Whether it is older than `held` by revision: a copy from a mirror
    /// that lags, which must not replace the one held. Revisions that are
    /// not both numbers are not compared.
    pub fn is_older_than(&self, held: &Repomd) -> bool {
        let number = |repomd: &Repomd| repomd.revision.as_deref().and_then(|r| r.parse::<u64>().ok());
        matches!((number(self), number(held)), (Some(fetched), Some(held)) if fetched < held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repomd(revision: &str) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<repomd xmlns="http://linux.duke.edu/metadata/repo" xmlns:rpm="http://linux.duke.edu/metadata/rpm">
  <revision>{revision}</revision>
  <tags><distro cpeid="cpe:/o:example:os:1">Example 1</distro></tags>
  <data type="primary">
    <checksum type="sha256">{a}</checksum>
    <open-checksum type="sha256">{b}</open-checksum>
    <location href="repodata/{a}-primary.xml.zst"/>
    <timestamp>1765000000</timestamp>
    <size>12345</size>
    <open-size>99999</open-size>
  </data>
  <data type="primary_zck">
    <checksum type="sha256">{b}</checksum>
    <header-checksum type="sha256">{a}</header-checksum>
    <location href="repodata/{b}-primary.xml.zck"/>
    <size>2000</size>
    <header-size>300</header-size>
  </data>
  <data type="group">
    <checksum type="sha">{c}</checksum>
    <location href="repodata/comps.xml"/>
  </data>
</repomd>
"#,
            a = "a".repeat(64),
            b = "B".repeat(64),
            c = "c".repeat(40),
        )
    }

    #[test]
    fn each_metadata_file_is_named_with_its_checksum_and_the_revision_orders_copies() {
        let read = Repomd::read(repomd("1765000000").as_bytes()).unwrap();
        assert_eq!(read.revision.as_deref(), Some("1765000000"));
        let kinds: Vec<&str> = read.files.iter().map(|file| file.kind.as_str()).collect();
        assert_eq!(kinds, ["primary", "primary_zck", "group"]);
        let primary = read.file_at(&format!("repodata/{}-primary.xml.zst", "a".repeat(64))).unwrap();
        assert_eq!((primary.checksum.algorithm, primary.size), (Algorithm::Sha256, Some(12345)));
        assert_eq!(read.files[1].checksum.hex, "b".repeat(64), "lower-cased");
        assert_eq!(read.files[2].checksum.algorithm, Algorithm::Sha1, "`sha` is SHA-1");
        let older = Repomd::read(repomd("1764999999").as_bytes()).unwrap();
        assert!(older.is_older_than(&read) && !read.is_older_than(&older));
    }

    #[test]
    fn what_dnf_could_not_check_is_an_error() {
        let page = Repomd::read(b"<html><body>mirror maintenance</body></html>").unwrap_err().to_string();
        assert!(page.contains("names no metadata file"), "{page}");
        let md5 = repomd("1").replace(r#"<checksum type="sha">"#, r#"<checksum type="md5">"#);
        let error = Repomd::read(md5.as_bytes()).unwrap_err().to_string();
        assert!(error.contains("\"group\" data names no SHA checksum"), "{error}");
        let short = repomd("1").replace(&"c".repeat(40), "cc");
        assert!(Repomd::read(short.as_bytes()).is_err());
        assert!(Repomd::read(b"not xml <").is_err());
    }
}
