//! Snap blobs (`.snap` files, deltas, components, integrity data): stored
//! by the `sha3-384` the store's answer gave for them, checked against it
//! and the answer's size before they enter the cache.
//!
//! The store names a blob by a download URL with no digest in it; pkgproxy
//! rewrites that URL in every answer into one of its own that carries the
//! digest and size (`/snap/download/SHA3/SIZE/<store path>`), so a blob
//! request says by itself what its bytes must be, after a restart and
//! offline too. A client that names a wrong digest only makes its own
//! download fail: the bytes are stored under the digest they really have.

use pkgproxy_cache::{StreamingCheck, Verifier};
use sha3::{Digest, Sha3_384};

use crate::decision::Refusal;

/// The prefix of a blob URL, below the side's mount.
pub const DOWNLOAD_PREFIX: &str = "/download/";

/// A blob request, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobPath<'a> {
    /// The lower-case hex SHA3-384 the bytes must have.
    pub sha3_384: String,
    /// Their length.
    pub size: u64,
    /// Where the store serves them, below its base URL (starting with `/`).
    pub store_path: &'a str,
}

impl<'a> BlobPath<'a> {
    /// Parses `rest`, the path below [`DOWNLOAD_PREFIX`].
    pub fn parse(rest: &'a str) -> Result<BlobPath<'a>, Refusal> {
        let malformed = || Refusal::not_found("not a snap download URL of pkgproxy's");
        let (digest, rest) = rest.split_once('/').ok_or_else(malformed)?;
        let (size, store_path) = rest.split_at(rest.find('/').ok_or_else(malformed)?);
        if !is_sha3_384(digest) {
            return Err(malformed());
        }
        let size = size.parse().map_err(|_| malformed())?;
        if store_path.len() < 2 {
            return Err(malformed());
        }
        Ok(BlobPath { sha3_384: digest.to_ascii_lowercase(), size, store_path })
    }

    /// The cache key: the digest, within the store's scope.
    pub fn key(&self, scope: &str) -> String {
        format!("snap/blob/{scope}/{}", self.sha3_384)
    }
}

/// The path pkgproxy serves the blob at (below the side's mount).
pub fn blob_path(sha3_384: &str, size: u64, store_path: &str) -> String {
    format!("{DOWNLOAD_PREFIX}{sha3_384}/{size}{store_path}")
}

/// The cache key of the blob with `sha3_384` in `scope`.
pub fn blob_key(scope: &str, sha3_384: &str) -> String {
    format!("snap/blob/{scope}/{}", sha3_384.to_ascii_lowercase())
}

/// True for 96 hex digits.
pub fn is_sha3_384(text: &str) -> bool {
    text.len() == 96 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Checks a blob's SHA3-384 before it is committed, hashing the bytes as
/// they stream. Clients stream them meanwhile, all but the last byte, so a
/// wrong blob reaches none of them whole.
#[derive(Debug)]
pub struct BlobVerifier {
    /// The lower-case hex digest the bytes must have.
    pub sha3_384: String,
}

impl Verifier for BlobVerifier {
    fn streaming_check(&self) -> Option<Box<dyn StreamingCheck>> {
        Some(Box::new(Sha3Check { expected: self.sha3_384.clone(), hasher: Sha3_384::new() }))
    }
}

/// The SHA3-384 of a blob, as it streams.
struct Sha3Check {
    expected: String,
    hasher: Sha3_384,
}

impl StreamingCheck for Sha3Check {
    fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    fn verdict(self: Box<Self>) -> Result<(), String> {
        let actual = hex::encode(self.hasher.finalize());
        match actual == self.expected {
            true => Ok(()),
            false => {
                // What arrived is for the log, not for clients: it may
                // come from a redirect's target.
                tracing::warn!(expected = self.expected, actual, "a snap download fails its SHA3-384");
                Err(format!("sha3-384 mismatch: the store's answer said {}", self.expected))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str =
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_blob_url_says_what_its_bytes_must_be() {
        let rest = format!("{DIGEST}/4096/api/v1/snaps/download/ID_3.snap");
        let blob = BlobPath::parse(&rest).unwrap();
        assert_eq!((blob.size, blob.store_path), (4096, "/api/v1/snaps/download/ID_3.snap"));
        assert_eq!(blob.key("global"), format!("snap/blob/global/{DIGEST}"));
        assert_eq!(blob_path(DIGEST, 4096, "/x.snap"), format!("/download/{DIGEST}/4096/x.snap"));
        for bad in ["", "abc/1/x", &format!("{DIGEST}/x/y"), &format!("{DIGEST}/12"), &format!("{DIGEST}/12/")] {
            assert!(BlobPath::parse(bad).is_err(), "{bad}");
        }
    }

    fn verdict(verifier: &BlobVerifier, chunks: &[&[u8]]) -> Result<(), String> {
        let mut check = verifier.streaming_check().expect("a streaming check");
        chunks.iter().for_each(|chunk| check.update(chunk));
        check.verdict()
    }

    #[test]
    fn the_verifier_takes_the_right_bytes_only() {
        let right = BlobVerifier { sha3_384: hex::encode(Sha3_384::digest(b"snap bytes")) };
        assert!(verdict(&right, &[b"snap ", b"bytes"]).is_ok());
        assert!(verdict(&right, &[b"snap ", b"bytez"]).is_err());
        let wrong = BlobVerifier { sha3_384: DIGEST.to_string() };
        let error = verdict(&wrong, &[b"snap bytes"]).unwrap_err();
        assert!(error.contains("sha3-384 mismatch"), "{error}");
    }
}
