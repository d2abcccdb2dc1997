//! What pkgproxy reads of a package's document (full or abbreviated) or of
//! one version's: when the document was last changed, and one version's
//! `dist` (where its tarball is and what it must hash to). Documents run to
//! tens of megabytes: every other version is skipped as it is read, never
//! kept.

use std::fmt;

use pkgproxy_cache::{BodyHashes, BodyReader, Verifier};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

/// The largest document read (the largest packages' run to tens of MB).
pub const LIMIT: u64 = 256 * 1024 * 1024;

/// A version's `dist`, as far as pkgproxy reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Dist {
    /// Where its tarball is.
    #[serde(default)]
    pub tarball: Option<String>,
    /// Its Subresource Integrity (`sha512-BASE64`), for all but old
    /// versions.
    #[serde(default)]
    pub integrity: Option<String>,
    /// The hex SHA-1 of its tarball, for every version.
    #[serde(default)]
    pub shasum: Option<String>,
}

/// What a document says, as pkgproxy reads it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Read {
    /// When it was last changed (`time.modified` in a full document,
    /// `modified` in an abbreviated one).
    pub modified: Option<String>,
    /// The `dist` of the version asked for, if it lists it (a version's
    /// own document: its `dist`, if it is that version).
    pub dist: Option<Dist>,
    /// Whether it is a package's or a version's document at all (it names
    /// versions, or a version).
    pub is_document: bool,
}

/// Reads `body`, a document, keeping the `dist` of `version` if given.
pub fn read(body: &[u8], version: Option<&str>) -> Option<Read> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let read = Document { version }.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(read)
}

/// When the document `body` was last changed.
pub fn modified(body: &[u8]) -> Option<String> {
    read(body, None)?.modified
}

/// Whether a document last changed at `fetched` is older than one last
/// changed at `held` (RFC 3339 times; one that does not parse is not
/// older).
pub fn is_older(fetched: &str, held: &str) -> bool {
    match (humantime::parse_rfc3339_weak(fetched), humantime::parse_rfc3339_weak(held)) {
        (Ok(fetched), Ok(held)) => fetched < held,
        _ => false,
    }
}

/// A document, read for one version.
struct Document<'v> {
    version: Option<&'v str>,
}

impl<'de> DeserializeSeed<'de> for Document<'_> {
    type Value = Read;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Read, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Document<'_> {
    type Value = Read;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a package's document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read, A::Error> {
        #[derive(Deserialize)]
        struct Time {
            #[serde(default)]
            modified: Option<String>,
        }
        let mut read = Read::default();
        let (mut own_version, mut own_dist) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "versions" => {
                    read.is_document = true;
                    read.dist = map.next_value_seed(Versions { version: self.version })?;
                }
                "time" => match map.next_value::<Option<Time>>() {
                    Ok(time) => read.modified = read.modified.or(time.and_then(|time| time.modified)),
                    Err(_) => return Err(serde::de::Error::custom("time is not an object")),
                },
                "modified" => read.modified = map.next_value::<Option<String>>()?.or(read.modified),
                "version" => own_version = map.next_value::<Option<String>>()?,
                "dist" => own_dist = map.next_value::<Option<Dist>>()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if let (Some(own), Some(dist)) = (own_version, own_dist) {
            read.is_document = true;
            if self.version.is_none_or(|version| version == own) {
                read.dist = read.dist.or(Some(dist));
            }
        }
        Ok(read)
    }
}

/// A document's `versions`, read for one of them.
struct Versions<'v> {
    version: Option<&'v str>,
}

impl<'de> DeserializeSeed<'de> for Versions<'_> {
    type Value = Option<Dist>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Dist>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Versions<'_> {
    type Value = Option<Dist>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a document's versions")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Dist>, A::Error> {
        #[derive(Deserialize)]
        struct Version {
            #[serde(default)]
            dist: Option<Dist>,
        }
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if Some(key.as_str()) == self.version {
                found = map.next_value::<Version>()?.dist;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The checks of a document: one it is, and not older than the one held.
#[derive(Debug)]
pub struct DocumentVerifier {
    /// When the document held was last changed, if one is.
    pub held_modified: Option<String>,
}

impl Verifier for DocumentVerifier {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        use std::io::Read;
        let mut content = Vec::new();
        body.take(LIMIT + 1).read_to_end(&mut content).map_err(|error| error.to_string())?;
        if content.len() as u64 > LIMIT {
            return Err(format!("a document over {LIMIT} bytes"));
        }
        let read = read(&content, None).filter(|read| read.is_document).ok_or("not a package's document")?;
        match (&self.held_modified, &read.modified) {
            (Some(held), Some(fetched)) if is_older(fetched, held) => {
                Err(format!("a document last changed {fetched}, older than the one held ({held}): a lagging mirror"))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"{"_id":"a","name":"a","dist-tags":{"latest":"1.1.0"},
        "versions":{"1.0.0":{"name":"a","version":"1.0.0","dist":{"tarball":"https://r.example/a/-/a-1.0.0.tgz","shasum":"aa"}},
                    "1.1.0":{"name":"a","version":"1.1.0","dist":{"tarball":"https://r.example/a/-/a-1.1.0.tgz","integrity":"sha512-x","shasum":"bb"}}},
        "time":{"created":"2020-01-01T00:00:00.000Z","modified":"2024-05-01T10:00:00.123Z","1.0.0":"2020-01-01T00:00:00.000Z"},
        "readme":"{\"versions\": \"not these\"}"}"#;

    #[test]
    fn a_full_document_gives_its_modified_time_and_one_version_s_dist() {
        let read = read(FULL.as_bytes(), Some("1.1.0")).unwrap();
        assert_eq!(read.modified.as_deref(), Some("2024-05-01T10:00:00.123Z"));
        let dist = read.dist.unwrap();
        assert_eq!((dist.integrity.as_deref(), dist.shasum.as_deref()), (Some("sha512-x"), Some("bb")));
        assert!(super::read(FULL.as_bytes(), Some("2.0.0")).unwrap().dist.is_none());
    }

    #[test]
    fn an_abbreviated_and_a_version_s_document_are_read_too() {
        let corgi = r#"{"name":"a","modified":"2024-05-01T10:00:00Z","versions":{"1.0.0":{"dist":{"shasum":"aa"}}}}"#;
        let read = read(corgi.as_bytes(), Some("1.0.0")).unwrap();
        assert_eq!(
            (read.modified.as_deref(), read.dist.unwrap().shasum.as_deref()),
            (Some("2024-05-01T10:00:00Z"), Some("aa"))
        );
        let version = r#"{"name":"a","version":"1.0.0","dist":{"shasum":"aa","tarball":"t"}}"#;
        assert_eq!(super::read(version.as_bytes(), Some("1.0.0")).unwrap().dist.unwrap().tarball.as_deref(), Some("t"));
        assert!(super::read(version.as_bytes(), Some("1.0.1")).unwrap().dist.is_none());
        for not_one in ["[]", "{\"error\":\"Not found\"}", "{\"versions\":{}} x"] {
            assert!(super::read(not_one.as_bytes(), None).is_none_or(|read| !read.is_document), "{not_one}");
        }
    }

    #[test]
    fn times_compare_as_times() {
        assert!(is_older("2024-05-01T09:59:59.999Z", "2024-05-01T10:00:00Z"));
        assert!(!is_older("2024-05-01T10:00:00Z", "2024-05-01T10:00:00.000Z"));
        assert!(!is_older("garbage", "2024-05-01T10:00:00Z"));
    }
}
