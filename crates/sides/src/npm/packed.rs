//! Documents kept compressed, for the clients that take gzip: a document of
//! ten megabytes is a megabyte or so on the wire, and a hundred clients of
//! it must not cost a hundred compressions, nor a hundred copies in memory.
//!
//! A document's links point at pkgproxy as each client reached it, so what
//! is kept compressed is the document as one kind of client gets it (the
//! host it named, whether it is npm): made once, in the background, the
//! first time such a client asks, and served to every such client after as
//! a file. A site's clients reach pkgproxy by one name or two, so a
//! document has a form or two; a few more are kept at most, and a client
//! beyond them is sent the document rewritten as it streams, uncompressed.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use sha2::{Digest, Sha256};

use pkgproxy_cache::{Cache, Class};

use super::links::Links;
use crate::{StoredBody, StreamRewriter};

/// How many compressed forms one document may have.
pub const FORMS_KEPT: usize = 4;

/// The key of the compressed form of the document of SHA-256 `sha256` for
/// clients whose links are `links`.
pub fn key(sha256: &str, links: &Links) -> String {
    let form = Sha256::digest(format!("{}\n{}", links.base, links.keep_npm_registry).as_bytes());
    format!("{}{}", prefix(sha256), hex::encode(&form[..8]))
}

/// Where the compressed forms of the document of SHA-256 `sha256` are kept.
pub fn prefix(sha256: &str) -> String {
    format!("npm/packed/{sha256}/")
}

/// `document`, as clients whose links are `links` get it, gzipped.
pub fn pack(document: &[u8], links: Links) -> std::io::Result<Vec<u8>> {
    let mut rewriter = links.rewriter();
    let mut encoder = GzEncoder::new(Vec::with_capacity(document.len() / 6), Compression::default());
    let mut rewritten = Vec::new();
    for chunk in document.chunks(64 * 1024) {
        rewriter.feed(chunk, &mut rewritten);
        encoder.write_all(&rewritten)?;
        rewritten.clear();
    }
    rewriter.finish(&mut rewritten);
    encoder.write_all(&rewritten)?;
    encoder.finish()
}

/// Makes and keeps the compressed form `key` of the document `stored`.
pub fn make(cache: &Cache, key: &str, stored: &StoredBody, links: Links) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let size = usize::try_from(stored.size).map_err(|_| "too large a document")?;
    let mut document = vec![0; size];
    stored.file.read_exact_at(&mut document, 0).map_err(|error| error.to_string())?;
    let packed = pack(&document, links).map_err(|error| error.to_string())?;
    cache.put(key, &packed, Vec::new(), Class::Immutable).map_err(|error| error.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_packed_document_unpacks_to_the_document_its_clients_get() {
        let document = r#"{"versions":{"1.0.0":{"dist":{"tarball":"https://registry.npmjs.org/a/-/a-1.0.0.tgz"}}}}"#;
        let links = Links { base: "http://p:3142/npm".into(), keep_npm_registry: false };
        let packed = pack(document.as_bytes(), links.clone()).unwrap();
        let mut unpacked = String::new();
        flate2::read::GzDecoder::new(packed.as_slice()).read_to_string(&mut unpacked).unwrap();
        assert_eq!(unpacked, document.replace("https://registry.npmjs.org", "http://p:3142/npm"));
    }

    #[test]
    fn each_kind_of_client_has_its_own_form_of_a_document() {
        let links = |base: &str, keep| Links { base: base.into(), keep_npm_registry: keep };
        let one = key("abc", &links("http://p/npm", false));
        assert!(one.starts_with(&prefix("abc")));
        assert_eq!(one, key("abc", &links("http://p/npm", false)));
        assert_ne!(one, key("abc", &links("http://p/npm", true)));
        assert_ne!(one, key("abc", &links("http://q/npm", false)));
        assert_ne!(one, key("abd", &links("http://p/npm", false)));
    }
}
