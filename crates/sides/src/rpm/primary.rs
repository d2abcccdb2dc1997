//! What a repository's primary metadata (`primary.xml`, compressed as
//! `.gz`, `.xz` or `.zst`) says of each package: where it is, the checksum
//! it must have, when it was published, and what it provides and needs.
//! Read as a stream, one package at a time: Fedora's lists 75,000
//! packages in 150 MB of XML.

use std::io::{BufRead, Read};

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::repomd::Checksum;

/// One package primary metadata lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Package {
    /// `<name>`.
    pub name: String,
    /// `<arch>` (`noarch`, `x86_64`, `src`).
    pub arch: String,
    /// `<version epoch=...>`, `0` when not given.
    pub epoch: String,
    /// `<version ver=...>`.
    pub version: String,
    /// `<version rel=...>`.
    pub release: String,
    /// `<checksum>`: what the package must hash to.
    pub checksum: Option<Checksum>,
    /// `<location href=...>`: its path from the repository's root.
    pub href: String,
    /// `<location xml:base=...>`: a URL its `href` is below instead of the
    /// repository's root, where given.
    pub base: Option<String>,
    /// `<size package=...>`: its size.
    pub size: Option<u64>,
    /// `<time file=...>`: when it was added to the repository (seconds
    /// since the epoch).
    pub time_file: Option<u64>,
    /// `<time build=...>`: when it was built.
    pub time_build: Option<u64>,
    /// The names its `<rpm:provides>` list, and the files primary lists.
    pub provides: Vec<String>,
    /// The names its `<rpm:requires>` list (`rpmlib(...)` left out).
    pub requires: Vec<String>,
}

impl Package {
    /// `NAME-[EPOCH:]VERSION-RELEASE.ARCH`, as `rpm -qa` prints it (the
    /// epoch only when not 0).
    pub fn nevra(&self) -> String {
        match self.epoch.as_str() {
            "" | "0" => format!("{}-{}-{}.{}", self.name, self.version, self.release, self.arch),
            epoch => format!("{}-{epoch}:{}-{}.{}", self.name, self.version, self.release, self.arch),
        }
    }
}

/// Primary metadata that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PrimaryError {
    /// Not XML, or cut short.
    #[error("primary metadata is not XML: {0}")]
    Xml(#[from] quick_xml::Error),
    /// Its compression cannot be read.
    #[error("primary metadata cannot be decompressed: {0}")]
    Io(#[from] std::io::Error),
    /// Its root is not primary metadata's.
    #[error("not primary metadata: its root is <{0}>")]
    NotPrimary(String),
}

/// How a metadata file is compressed, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `.xml`.
    None,
    /// `.gz`.
    Gzip,
    /// `.xz`.
    Xz,
    /// `.zst`.
    Zstd,
}

impl Compression {
    /// The compression of `location`, if pkgproxy reads it (zchunk's
    /// `.zck` and bzip2's `.bz2` are not read: repositories that publish
    /// them publish another primary beside).
    pub fn of(location: &str) -> Option<Compression> {
        let name = location.rsplit('/').next()?;
        match name.rsplit_once('.').map(|(_, extension)| extension) {
            Some("xml") => Some(Compression::None),
            Some("gz") => Some(Compression::Gzip),
            Some("xz") => Some(Compression::Xz),
            Some("zst") => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// A reader of the decompressed bytes.
    pub fn reader<'r>(self, raw: impl Read + 'r) -> Result<Box<dyn BufRead + 'r>, std::io::Error> {
        Ok(match self {
            Compression::None => Box::new(std::io::BufReader::new(raw)),
            Compression::Gzip => Box::new(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(raw))),
            Compression::Xz => Box::new(std::io::BufReader::new(liblzma::read::XzDecoder::new_multi_decoder(raw))),
            Compression::Zstd => Box::new(std::io::BufReader::new(zstd::stream::read::Decoder::new(raw)?)),
        })
    }
}

/// Where the parser is within a `<package>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Within {
    Nothing,
    Name,
    Arch,
    Checksum,
    Provides,
    Requires,
    File,
}

/// Reads primary metadata from `reader` (decompressed), calling `each`
/// with every package in order. Returns how many were read.
pub fn read(reader: impl BufRead, mut each: impl FnMut(Package)) -> Result<usize, PrimaryError> {
    let mut xml = Reader::from_reader(reader);
    let mut buf = Vec::new();
    let (mut package, mut within, mut count) = (None::<Package>, Within::Nothing, 0);
    let mut checksum_type = String::new();
    let mut rooted = false;
    let mut text = String::new();
    loop {
        match xml.read_event_into(&mut buf)? {
            Event::Start(start) => {
                let name = start.local_name().as_ref().to_vec();
                if !rooted {
                    rooted = true;
                    if name != b"metadata" {
                        return Err(PrimaryError::NotPrimary(String::from_utf8_lossy(&name).into_owned()));
                    }
                    continue;
                }
                match (name.as_slice(), package.as_mut()) {
                    (b"package", _) => package = Some(Package::default()),
                    (b"name", Some(_)) if within == Within::Nothing => within = Within::Name,
                    (b"arch", Some(_)) => within = Within::Arch,
                    (b"checksum", Some(_)) => {
                        checksum_type = attribute(&start, b"type").unwrap_or_default();
                        within = Within::Checksum;
                    }
                    (b"provides", Some(_)) => within = Within::Provides,
                    (b"requires", Some(_)) => within = Within::Requires,
                    (b"file", Some(_)) => within = Within::File,
                    (b"obsoletes" | b"conflicts" | b"recommends" | b"suggests" | b"supplements" | b"enhances", _) => {
                        within = Within::Nothing
                    }
                    (_, Some(package)) => described(package, &start, within),
                    _ => {}
                }
            }
            Event::Empty(empty) => {
                if let Some(package) = package.as_mut() {
                    described(package, &empty, within);
                }
            }
            Event::Text(content) if within != Within::Nothing => {
                text.push_str(&content.decode().map_err(quick_xml::Error::from)?);
            }
            Event::GeneralRef(reference) if within != Within::Nothing => {
                let name = reference.decode().map_err(quick_xml::Error::from)?;
                text.push_str(quick_xml::escape::resolve_predefined_entity(&name).unwrap_or_default());
            }
            Event::End(end) => {
                let value = std::mem::take(&mut text);
                let name = end.local_name();
                if name.as_ref() == b"package" {
                    if let Some(package) = package.take() {
                        each(package);
                        count += 1;
                    }
                    within = Within::Nothing;
                    continue;
                }
                let Some(package) = package.as_mut() else { continue };
                match (name.as_ref(), within) {
                    (b"name", Within::Name) => package.name = value.trim().to_owned(),
                    (b"arch", Within::Arch) => package.arch = value.trim().to_owned(),
                    (b"checksum", Within::Checksum) => package.checksum = Checksum::new(&checksum_type, value.trim()),
                    (b"file", Within::File) => package.provides.push(value.trim().to_owned()),
                    _ => {}
                }
                if matches!(name.as_ref(), b"name" | b"arch" | b"checksum" | b"file" | b"provides" | b"requires") {
                    within = Within::Nothing;
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !rooted {
        return Err(PrimaryError::NotPrimary(String::new()));
    }
    Ok(count)
}

/// Takes what an element within a package says in its attributes.
fn described(package: &mut Package, element: &BytesStart<'_>, within: Within) {
    match element.local_name().as_ref() {
        b"version" => {
            package.epoch = attribute(element, b"epoch").unwrap_or_else(|| "0".to_owned());
            package.version = attribute(element, b"ver").unwrap_or_default();
            package.release = attribute(element, b"rel").unwrap_or_default();
        }
        b"time" => {
            package.time_file = attribute(element, b"file").and_then(|time| time.parse().ok());
            package.time_build = attribute(element, b"build").and_then(|time| time.parse().ok());
        }
        b"size" => package.size = attribute(element, b"package").and_then(|size| size.parse().ok()),
        b"location" => {
            package.href = attribute(element, b"href").unwrap_or_default();
            package.base = attribute(element, b"xml:base").filter(|base| !base.is_empty());
        }
        b"entry" => {
            let Some(name) = attribute(element, b"name") else { return };
            match within {
                Within::Provides => package.provides.push(name),
                Within::Requires if !name.starts_with("rpmlib(") => package.requires.push(name),
                _ => {}
            }
        }
        _ => {}
    }
}

/// The value of attribute `key` (as written, prefix included), unescaped.
fn attribute(element: &BytesStart<'_>, key: &[u8]) -> Option<String> {
    let attribute = element.try_get_attribute(key).ok()??;
    Some(attribute.normalized_value(quick_xml::XmlVersion::Implicit1_0).ok()?.into_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const PRIMARY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="2">
<package type="rpm">
  <name>hello</name>
  <arch>noarch</arch>
  <version epoch="0" ver="1.0" rel="1"/>
  <checksum type="sha256" pkgid="YES">b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9</checksum>
  <summary>Says &lt;hello&gt;</summary>
  <description>name: not this one</description>
  <time file="1765000000" build="1764990000"/>
  <size package="6000" installed="100" archive="400"/>
  <location href="Packages/h/hello-1.0-1.noarch.rpm"/>
  <format>
    <rpm:license>MIT</rpm:license>
    <rpm:provides>
      <rpm:entry name="hello" flags="EQ" epoch="0" ver="1.0" rel="1"/>
    </rpm:provides>
    <rpm:requires>
      <rpm:entry name="libgreet"/>
      <rpm:entry name="rpmlib(CompressedFileNames)" flags="LE" epoch="0" ver="3.0.4" rel="1"/>
      <rpm:entry name="/bin/sh" pre="1"/>
    </rpm:requires>
    <rpm:obsoletes><rpm:entry name="hi"/></rpm:obsoletes>
    <file>/usr/bin/hello</file>
  </format>
</package>
<package type="rpm">
  <name>libgreet</name>
  <arch>x86_64</arch>
  <version epoch="2" ver="0.3" rel="4.fc41"/>
  <checksum type="sha512" pkgid="YES">aa</checksum>
  <time file="1765000100" build="1764990100"/>
  <size package="7000"/>
  <location xml:base="http://mirror.example/pub/other/" href="Packages/l/libgreet-0.3-4.fc41.x86_64.rpm"/>
  <format/>
</package>
</metadata>
"#;

    #[test]
    fn each_package_is_read_with_its_location_checksum_times_and_needs() {
        let mut packages = Vec::new();
        let count = read(PRIMARY.as_bytes(), |package| packages.push(package)).unwrap();
        assert_eq!(count, 2);
        let hello = &packages[0];
        assert_eq!(hello.nevra(), "hello-1.0-1.noarch");
        assert_eq!(hello.href, "Packages/h/hello-1.0-1.noarch.rpm");
        assert_eq!(hello.base, None);
        assert_eq!(hello.checksum.as_ref().unwrap().hex.len(), 64);
        assert_eq!((hello.size, hello.time_file, hello.time_build), (Some(6000), Some(1765000000), Some(1764990000)));
        assert_eq!(hello.requires, ["libgreet", "/bin/sh"]);
        assert_eq!(hello.provides, ["hello", "/usr/bin/hello"]);
        let lib = &packages[1];
        assert_eq!(lib.nevra(), "libgreet-2:0.3-4.fc41.x86_64");
        assert_eq!(lib.base.as_deref(), Some("http://mirror.example/pub/other/"));
        assert_eq!(lib.checksum, None, "a checksum of the wrong length is none");
    }

    #[test]
    fn what_is_not_primary_metadata_is_refused() {
        let error = read("<repomd></repomd>".as_bytes(), |_| {}).unwrap_err();
        assert!(error.to_string().contains("<repomd>"), "{error}");
        assert!(read("not xml at all".as_bytes(), |_| {}).is_err());
    }

    #[test]
    fn compressions_are_known_by_name() {
        assert_eq!(Compression::of("repodata/x-primary.xml.zst"), Some(Compression::Zstd));
        assert_eq!(Compression::of("repodata/x-primary.xml.gz"), Some(Compression::Gzip));
        assert_eq!(Compression::of("repodata/x-primary.xml.zck"), None);
        let mut zstd = Vec::new();
        zstd::stream::copy_encode(PRIMARY.as_bytes(), &mut zstd, 3).unwrap();
        let count = read(Compression::Zstd.reader(zstd.as_slice()).unwrap(), |_| {}).unwrap();
        assert_eq!(count, 2);
    }
}
