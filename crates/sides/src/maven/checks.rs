//! A Maven artifact is checked against the strongest checksum its
//! repository publishes beside it (`.sha512`, `.sha256`, else `.sha1`): the
//! sidecar is fetched first, read here, and the file is checked as it
//! streams, before it is cached. `.md5` is never the check (it proves
//! nothing against a forger), nor `.asc` (pkgproxy keeps signatures; it
//! does not judge them).

use pkgproxy_cache::{Expected, StreamingCheck, Verifier};

use super::layout::Sidecar;
use crate::sha1_check::Sha1Check;

/// The digest a checksum sidecar gives, lower-case hex: repositories
/// write the digest alone, or followed by the file's name (`HEX  FILE`,
/// `HEX *FILE`), in either case. `None` when `body` is no `kind` digest.
pub fn digest_of(kind: Sidecar, body: &[u8]) -> Option<String> {
    let length = kind.hex_len()?;
    let text = std::str::from_utf8(body).ok()?;
    let digest = text.split_whitespace().next()?;
    (digest.len() == length && digest.bytes().all(|b| b.is_ascii_hexdigit())).then(|| digest.to_ascii_lowercase())
}

/// The check of a file whose sidecar `kind` gives `digest`.
#[derive(Debug, Clone)]
pub struct SidecarVerifier {
    /// Which sidecar gave the digest.
    pub kind: Sidecar,
    /// The digest, lower-case hex.
    pub digest: String,
    /// The file's path, for errors.
    pub path: String,
}

impl Verifier for SidecarVerifier {
    /// A SHA-256 or SHA-512 is the cache's own check.
    fn expected(&self) -> Expected {
        match self.kind {
            Sidecar::Sha256 => Expected { sha256: Some(self.digest.clone()), ..Expected::default() },
            Sidecar::Sha512 => Expected { sha512: Some(self.digest.clone()), ..Expected::default() },
            _ => Expected::default(),
        }
    }

    fn judges_body(&self) -> bool {
        true
    }

    /// A SHA-1 is made as the file streams.
    fn streaming_check(&self) -> Option<Box<dyn StreamingCheck>> {
        match self.kind {
            Sidecar::Sha1 => Some(Box::new(Sha1Check::new(self.digest.clone(), self.path.clone(), "its .sha1"))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha1::Digest;

    #[test]
    fn sidecars_are_read_as_repositories_write_them() {
        let sha1 = "3C7E0D3A3DC1A1DB5E8C2E8D1F60B0C5A1F2E3D4";
        assert_eq!(digest_of(Sidecar::Sha1, sha1.as_bytes()).as_deref(), Some(sha1.to_ascii_lowercase().as_str()));
        let named = format!("{}  commons-io-2.11.0.jar\n", sha1.to_ascii_lowercase());
        assert_eq!(digest_of(Sidecar::Sha1, named.as_bytes()).as_deref(), Some(sha1.to_ascii_lowercase().as_str()));
        assert_eq!(digest_of(Sidecar::Sha256, sha1.as_bytes()), None, "a SHA-1 is no SHA-256");
        assert_eq!(digest_of(Sidecar::Sha1, b"<html>not found</html>"), None);
        assert_eq!(digest_of(Sidecar::Asc, b"-----BEGIN PGP SIGNATURE-----"), None);
    }

    #[test]
    fn the_sidecar_s_digest_is_what_the_file_must_hash_to() {
        let sha1 = hex::encode(sha1::Sha1::digest(b"jar bytes"));
        let verifier = SidecarVerifier { kind: Sidecar::Sha1, digest: sha1, path: "g/a/1/a-1.jar".into() };
        let mut check = verifier.streaming_check().unwrap();
        check.update(b"jar ");
        check.update(b"bytes");
        assert!(check.verdict().is_ok());
        let mut check = verifier.streaming_check().unwrap();
        check.update(b"other bytes");
        assert!(check.verdict().unwrap_err().contains("its .sha1 says"));
        let sha512 = SidecarVerifier { kind: Sidecar::Sha512, digest: "ab".repeat(64), path: String::new() };
        assert_eq!(sha512.expected().sha512.as_deref(), Some("ab".repeat(64).as_str()));
        assert!(sha512.streaming_check().is_none() && sha512.judges_body());
    }
}
