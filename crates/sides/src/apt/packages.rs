//! `Packages` indexes: the size and SHA-256 of every `.deb` an index names.
//! A streaming parser over decompressed bytes, so an index of any length is
//! read in constant memory; no I/O of its own beyond the reader it is given.

use std::io::{self, BufRead, Read};

use super::release::hex32;

/// The longest line kept; longer lines (hostile or broken input) are skipped.
const MAX_LINE: u64 = 64 * 1024;

/// One `.deb` an index names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolFile<'a> {
    /// Its path relative to the archive root (`pool/main/h/hello/hello_2.10-3_amd64.deb`).
    pub filename: &'a str,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256.
    pub sha256: [u8; 32],
}

#[derive(Default)]
struct Stanza {
    filename: Option<String>,
    size: Option<u64>,
    sha256: Option<[u8; 32]>,
}

impl Stanza {
    fn emit(&mut self, each: &mut impl FnMut(PoolFile<'_>)) -> usize {
        let taken = std::mem::take(self);
        match (taken.filename, taken.size, taken.sha256) {
            (Some(filename), Some(size), Some(sha256)) if safe_filename(&filename) => {
                each(PoolFile { filename: &filename, size, sha256 });
                1
            }
            _ => 0,
        }
    }
}

/// A `Filename:` we are willing to key a cache entry by: relative, no `..`.
fn safe_filename(name: &str) -> bool {
    !name.starts_with('/') && !name.split('/').any(|s| s == ".." || s == "." || s.is_empty()) && !name.contains('\0')
}

/// Calls `each` for every stanza with a `Filename`, `Size` and `SHA256`;
/// returns how many. Stanzas lacking one are skipped.
pub fn for_each(mut reader: impl BufRead, mut each: impl FnMut(PoolFile<'_>)) -> io::Result<usize> {
    let mut stanza = Stanza::default();
    let mut count = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(count + stanza.emit(&mut each));
        }
        if line.last() != Some(&b'\n') && n as u64 == MAX_LINE {
            skip_rest_of_line(&mut reader)?;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if text.is_empty() {
            count += stanza.emit(&mut each);
            continue;
        }
        let Some((name, value)) = text.split_once(':') else { continue };
        let value = value.trim();
        match name {
            "Filename" => stanza.filename = Some(value.to_string()),
            "Size" => stanza.size = value.parse().ok(),
            "SHA256" => stanza.sha256 = hex32(value),
            _ => {}
        }
    }
}

fn skip_rest_of_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let len = buf.len();
                reader.consume(len);
            }
        }
    }
}

/// How an index file is compressed, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `Packages`.
    None,
    /// `Packages.gz`.
    Gzip,
    /// `Packages.xz`.
    Xz,
}

impl Compression {
    /// The compression of a `Packages` file by name, or `None` when the name
    /// is not a `Packages` index we can read.
    pub fn of_packages(path: &str) -> Option<Compression> {
        let name = path.rsplit('/').next()?;
        match name {
            "Packages" => Some(Compression::None),
            "Packages.gz" => Some(Compression::Gzip),
            "Packages.xz" => Some(Compression::Xz),
            _ => None,
        }
    }

    /// A reader of the decompressed bytes.
    pub fn reader<'r>(self, raw: impl Read + 'r) -> Box<dyn BufRead + 'r> {
        match self {
            Compression::None => Box::new(io::BufReader::new(raw)),
            Compression::Gzip => Box::new(io::BufReader::new(flate2::read::MultiGzDecoder::new(raw))),
            Compression::Xz => Box::new(io::BufReader::new(liblzma::read::XzDecoder::new_multi_decoder(raw))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = "Package: hello
Version: 1.0
Filename: pool/main/h/hello/hello_1.0_all.deb
Size: 1234
SHA256: b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9
Description: a greeting
 with a long description

Package: broken
Filename: pool/main/b/broken.deb
Size: not-a-number
SHA256: b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9

Package: climber
Filename: pool/../../etc/passwd
Size: 1
SHA256: b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9

Package: last
Filename: pool/main/l/last.deb
Size: 5
SHA256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn collect(bytes: &[u8]) -> Vec<(String, u64)> {
        let mut found = Vec::new();
        for_each(bytes, |f| found.push((f.filename.to_string(), f.size))).unwrap();
        found
    }

    #[test]
    fn complete_stanzas_are_reported_and_the_rest_skipped() {
        let found = collect(INDEX.as_bytes());
        assert_eq!(
            found,
            [("pool/main/h/hello/hello_1.0_all.deb".to_string(), 1234), ("pool/main/l/last.deb".to_string(), 5)]
        );
    }

    #[test]
    fn compressed_indexes_read_the_same() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(INDEX.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 6);
        xz.write_all(INDEX.as_bytes()).unwrap();
        let xz = xz.finish().unwrap();
        for (bytes, compression) in [(gz, Compression::Gzip), (xz, Compression::Xz)] {
            let mut found = 0;
            for_each(compression.reader(bytes.as_slice()), |_| found += 1).unwrap();
            assert_eq!(found, 2, "{compression:?}");
        }
    }

    #[test]
    fn over_long_lines_are_skipped_without_growing() {
        let mut text = String::from("Package: x\nDescription: ");
        text.push_str(&"y".repeat(200_000));
        text.push_str("\nFilename: pool/x.deb\nSize: 1\nSHA256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n");
        assert_eq!(collect(text.as_bytes()).len(), 1);
    }

    #[test]
    fn names_of_packages_indexes() {
        assert_eq!(Compression::of_packages("main/binary-amd64/Packages.xz"), Some(Compression::Xz));
        assert_eq!(Compression::of_packages("main/binary-amd64/Packages"), Some(Compression::None));
        assert_eq!(Compression::of_packages("main/i18n/Translation-en.xz"), None);
    }
}
