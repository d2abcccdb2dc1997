//! What a metalink (Fedora's and EPEL's `metalink?repo=...&arch=...`)
//! says of a repository's `repomd.xml`: the checksums of the current one,
//! and of the ones before it (`<mm0:alternates>`, kept while mirrors
//! sync), so that a `repomd.xml` a mirror serves is taken only if the
//! metalink names it. The mirrors it lists are not followed: pkgproxy's
//! configured mirrors are one pool.

use super::repomd::Checksum;

/// What a metalink says of `repomd.xml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metalink {
    /// The checksums of each `repomd.xml` it vouches for: the current one
    /// first, then the alternates. Each entry: every checksum given of one
    /// file, with its size where given.
    pub versions: Vec<Vouched>,
}

/// One `repomd.xml` a metalink vouches for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vouched {
    /// Its checksums (SHA-1 and up; MD5 is left out).
    pub checksums: Vec<Checksum>,
    /// Its size, where given.
    pub size: Option<u64>,
    /// When it was published (`mm0:timestamp`), where given.
    pub timestamp: Option<u64>,
}

/// A body that is not a metalink for `repomd.xml`.
#[derive(Debug, thiserror::Error)]
pub enum MetalinkError {
    /// Not the XML of a metalink.
    #[error("not a metalink: {0}")]
    Xml(#[from] quick_xml::DeError),
    /// No `repomd.xml` in it, or none with a usable checksum.
    #[error("the metalink vouches for no repomd.xml by a SHA checksum")]
    Nothing,
}

#[derive(serde::Deserialize)]
struct Document {
    #[serde(default)]
    files: Option<Files>,
}

#[derive(serde::Deserialize)]
struct Files {
    #[serde(default)]
    file: Vec<RawFile>,
}

#[derive(serde::Deserialize)]
struct RawFile {
    #[serde(rename = "@name")]
    name: String,
    #[serde(default, rename = "timestamp")]
    timestamp: Option<String>,
    #[serde(default)]
    size: Option<String>,
    #[serde(default)]
    verification: Option<Verification>,
    #[serde(default)]
    alternates: Option<Alternates>,
}

#[derive(serde::Deserialize)]
struct Alternates {
    #[serde(default)]
    alternate: Vec<RawAlternate>,
}

#[derive(serde::Deserialize)]
struct RawAlternate {
    #[serde(default, rename = "timestamp")]
    timestamp: Option<String>,
    #[serde(default)]
    size: Option<String>,
    #[serde(default)]
    verification: Option<Verification>,
}

#[derive(serde::Deserialize)]
struct Verification {
    #[serde(default)]
    hash: Vec<RawHash>,
}

#[derive(serde::Deserialize)]
struct RawHash {
    #[serde(rename = "@type")]
    algorithm: String,
    #[serde(rename = "$text")]
    hex: String,
}

fn vouched(verification: Option<&Verification>, size: Option<&str>, timestamp: Option<&str>) -> Vouched {
    let checksums = verification
        .map(|verification| &verification.hash[..])
        .unwrap_or_default()
        .iter()
        .filter_map(|hash| Checksum::new(&hash.algorithm, &hash.hex))
        .collect();
    let number = |text: Option<&str>| text.and_then(|text| text.trim().parse().ok());
    Vouched { checksums, size: number(size), timestamp: number(timestamp) }
}

impl Metalink {
    /// Reads `body`, a metalink (version 3, as MirrorManager serves it).
    /// The XML's namespace prefixes (`mm0:`) are read as the local names.
    pub fn read(body: &[u8]) -> Result<Metalink, MetalinkError> {
        let text = String::from_utf8_lossy(body);
        let document: Document = quick_xml::de::from_str(&text)?;
        let files = document.files.map(|files| files.file).unwrap_or_default();
        let repomd = files.iter().find(|file| file.name == "repomd.xml").ok_or(MetalinkError::Nothing)?;
        let mut versions =
            vec![vouched(repomd.verification.as_ref(), repomd.size.as_deref(), repomd.timestamp.as_deref())];
        for alternate in repomd.alternates.iter().flat_map(|alternates| &alternates.alternate) {
            let timestamp = alternate.timestamp.as_deref();
            versions.push(vouched(alternate.verification.as_ref(), alternate.size.as_deref(), timestamp));
        }
        versions.retain(|version| !version.checksums.is_empty());
        match versions.is_empty() {
            true => Err(MetalinkError::Nothing),
            false => Ok(Metalink { versions }),
        }
    }

    /// Whether it vouches for a `repomd.xml` of these digests (lower-case
    /// hex, by algorithm) and size: every checksum it gives of one version
    /// agrees.
    pub fn vouches_for(&self, digest: impl Fn(super::repomd::Algorithm) -> String, size: u64) -> bool {
        self.versions.iter().any(|version| {
            version.size.is_none_or(|vouched| vouched == size)
                && version.checksums.iter().all(|checksum| digest(checksum.algorithm) == checksum.hex)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::repomd::Algorithm;
    use super::*;

    const CURRENT: &str = "1111111111111111111111111111111111111111111111111111111111111111";
    const BEFORE: &str = "2222222222222222222222222222222222222222222222222222222222222222";

    fn metalink() -> String {
        format!(
            r#"<?xml version="1.0" encoding="utf-8"?>
<metalink version="3.0" xmlns="http://www.metalinker.org/" type="dynamic" pubdate="Sun, 06 Dec 2026 10:00:00 GMT" generator="mirrormanager" xmlns:mm0="http://fedorahosted.org/mirrormanager">
 <files>
  <file name="repomd.xml">
   <mm0:timestamp>1765015200</mm0:timestamp>
   <size>7000</size>
   <verification>
    <hash type="md5">00000000000000000000000000000000</hash>
    <hash type="sha256">{CURRENT}</hash>
   </verification>
   <mm0:alternates>
    <mm0:alternate>
     <mm0:timestamp>1764928800</mm0:timestamp>
     <size>6990</size>
     <verification><hash type="sha256">{BEFORE}</hash></verification>
    </mm0:alternate>
   </mm0:alternates>
   <resources maxconnections="1">
    <url protocol="https" type="https" location="DE" preference="100">https://mirror.example/fedora/releases/41/Everything/x86_64/os/repodata/repomd.xml</url>
   </resources>
  </file>
 </files>
</metalink>
"#
        )
    }

    #[test]
    fn the_current_repomd_and_the_ones_before_it_are_vouched_for() {
        let read = Metalink::read(metalink().as_bytes()).unwrap();
        assert_eq!(read.versions.len(), 2);
        assert_eq!(read.versions[0].checksums.len(), 1, "MD5 left out");
        assert_eq!((read.versions[0].size, read.versions[0].timestamp), (Some(7000), Some(1765015200)));
        let digest = |hex: &'static str| {
            move |algorithm| match algorithm {
                Algorithm::Sha256 => hex.to_owned(),
                _ => String::new(),
            }
        };
        assert!(read.vouches_for(digest(CURRENT), 7000));
        assert!(read.vouches_for(digest(BEFORE), 6990), "a mirror still syncing");
        assert!(!read.vouches_for(digest(CURRENT), 6990), "the size must agree too");
        assert!(!read.vouches_for(digest("3"), 7000));
    }

    #[test]
    fn a_metalink_that_vouches_for_nothing_is_an_error() {
        assert!(matches!(Metalink::read(b"<metalink><files/></metalink>"), Err(MetalinkError::Nothing)));
        let md5_only = metalink().replace(&format!(r#"<hash type="sha256">{CURRENT}</hash>"#), "");
        let md5_only =
            md5_only.replace(&format!(r#"<verification><hash type="sha256">{BEFORE}</hash></verification>"#), "");
        assert!(matches!(Metalink::read(md5_only.as_bytes()), Err(MetalinkError::Nothing)));
        assert!(Metalink::read(b"<html>").is_err());
    }
}
