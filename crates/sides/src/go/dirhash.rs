//! Go's `h1:` hashes (the dirhash "Hash1" of golang.org/x/mod, which go.sum
//! and the checksum database hold), and the shape a module zip must have.
//!
//! Hash1: for each file, sorted by name, a line of its SHA-256 in hex, two
//! spaces and its name; the hash is `h1:` and the base64 of the SHA-256 of
//! those lines. A module zip's files are named `module@version/...`; a
//! `.mod` file is hashed as the one file `go.mod`.

use std::io::{Read, Seek};

use base64::Engine;
use sha2::{Digest, Sha256};

/// The most a module zip may hold, unpacked (Go's own limit).
pub const MAX_UNPACKED: u64 = 500 << 20;

/// The `h1:` hash of a `.mod` file.
pub fn hash_mod(content: &[u8]) -> String {
    hash1([(String::from("go.mod"), hex::encode(Sha256::digest(content)))])
}

/// Checks that `zip` is a module zip of `module@version` (every entry under
/// `module@version/`, no `..`, within [`MAX_UNPACKED`]) and returns its
/// `h1:` hash.
pub fn check_zip(zip: impl Read + Seek, module: &str, version: &str) -> Result<String, String> {
    let mut archive = zip::ZipArchive::new(zip).map_err(|e| format!("not a valid zip: {e}"))?;
    let prefix = format!("{module}@{version}/");
    let mut unpacked: u64 = 0;
    let mut lines = Vec::with_capacity(archive.len());
    for index in 0..archive.len() {
        let mut file = archive.by_index(index).map_err(|e| format!("zip entry {index}: {e}"))?;
        let name = file.name().map_err(|e| format!("zip entry {index}: {e}"))?.to_string();
        check_name(&name, &prefix)?;
        unpacked = unpacked.saturating_add(file.size());
        if unpacked > MAX_UNPACKED {
            return Err(format!("the zip unpacks to more than {MAX_UNPACKED} bytes"));
        }
        let mut digest = Sha256::new();
        let copied = std::io::copy(&mut (&mut file).take(MAX_UNPACKED + 1), &mut DigestWriter(&mut digest))
            .map_err(|e| format!("zip entry {name}: {e}"))?;
        if copied != file.size() {
            return Err(format!("zip entry {name} holds {copied} bytes, not the {} it declares", file.size()));
        }
        lines.push((name, hex::encode(digest.finalize())));
    }
    Ok(hash1(lines))
}

fn check_name(name: &str, prefix: &str) -> Result<(), String> {
    let Some(rest) = name.strip_prefix(prefix) else {
        return Err(format!("zip entry {name:?} is not under {prefix}"));
    };
    let bad =
        rest.contains('\\') || rest.contains('\n') || rest.split('/').any(|element| element == ".." || element == ".");
    if bad {
        return Err(format!("zip entry {name:?} has a malformed path"));
    }
    Ok(())
}

fn hash1(lines: impl IntoIterator<Item = (String, String)>) -> String {
    let mut lines: Vec<(String, String)> = lines.into_iter().collect();
    lines.sort();
    let mut summary = Sha256::new();
    for (name, digest) in lines {
        summary.update(format!("{digest}  {name}\n"));
    }
    format!("h1:{}", base64::engine::general_purpose::STANDARD.encode(summary.finalize()))
}

struct DigestWriter<'a>(&'a mut Sha256);

impl std::io::Write for DigestWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, content) in entries {
            writer.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
            writer.write_all(content).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    #[test]
    fn entries_outside_the_module_or_climbing_out_are_refused() {
        let good = zip_of(&[("example.com/m@v1.0.0/go.mod", b"module example.com/m\n")]);
        assert!(check_zip(Cursor::new(good), "example.com/m", "v1.0.0").unwrap().starts_with("h1:"));
        for name in
            ["example.com/m@v1.0.1/go.mod", "other/go.mod", "example.com/m@v1.0.0/../x", "example.com/m@v1.0.0/a\\b"]
        {
            let bad = zip_of(&[(name, b"x")]);
            assert!(check_zip(Cursor::new(bad), "example.com/m", "v1.0.0").is_err(), "{name}");
        }
        assert!(check_zip(Cursor::new(b"not a zip".to_vec()), "example.com/m", "v1.0.0").is_err());
    }

    #[test]
    fn the_zip_hash_follows_sorted_names() {
        let a = zip_of(&[("m.com/x@v1.0.0/b.go", b"b"), ("m.com/x@v1.0.0/a.go", b"a")]);
        let b = zip_of(&[("m.com/x@v1.0.0/a.go", b"a"), ("m.com/x@v1.0.0/b.go", b"b")]);
        let hash_a = check_zip(Cursor::new(a), "m.com/x", "v1.0.0").unwrap();
        assert_eq!(hash_a, check_zip(Cursor::new(b), "m.com/x", "v1.0.0").unwrap());
        let c = zip_of(&[("m.com/x@v1.0.0/a.go", b"A"), ("m.com/x@v1.0.0/b.go", b"b")]);
        assert_ne!(hash_a, check_zip(Cursor::new(c), "m.com/x", "v1.0.0").unwrap());
    }
}
