//! Checksums pkgproxy answers itself: a `maven-metadata.xml`'s, from the
//! copy held (its client was given that copy a moment before, and one
//! revalidated on its own could differ), and a file's when the repository
//! cannot give it now or gives one that disagrees with the bytes pkgproxy
//! checked and holds.

use http::header::{HeaderValue, CONTENT_TYPE};
use http::StatusCode;

use super::checks::digest_of_file;
use super::layout::Sidecar;
use crate::decision::{CacheView, CachedRequest, Fallback, LocalAnswer};

/// The answer giving `kind`'s digest of `body`, as repositories write it
/// (the hex digest alone); `None` for a signature.
pub fn computed(kind: Sidecar, body: &[u8]) -> Option<LocalAnswer> {
    use sha2::Digest;
    let digest = match kind {
        Sidecar::Md5 => hex::encode(<md5::Md5 as md5::Digest>::digest(body)),
        Sidecar::Sha1 => hex::encode(sha1::Sha1::digest(body)),
        Sidecar::Sha256 => hex::encode(sha2::Sha256::digest(body)),
        Sidecar::Sha512 => hex::encode(sha2::Sha512::digest(body)),
        Sidecar::Asc => return None,
    };
    Some(answer(digest))
}

fn answer(digest: String) -> LocalAnswer {
    let mut answer = LocalAnswer::text(StatusCode::OK, "");
    answer.headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    answer.body = digest.into();
    answer
}

/// A file's checksum computed from the file held.
#[derive(Debug)]
pub struct FromHeldFile {
    /// The file's own request.
    pub file: CachedRequest,
    /// Which checksum.
    pub kind: Sidecar,
}

impl Fallback for FromHeldFile {
    fn answer(&self, cache: &dyn CacheView) -> Option<LocalAnswer> {
        let file = cache.open(&self.file)?;
        digest_of_file(self.kind, &file).ok().map(answer)
    }
}
