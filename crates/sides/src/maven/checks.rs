//! A Maven artifact is checked against the strongest checksum its
//! repository publishes beside it (`.sha512`, `.sha256`, else `.sha1`): the
//! sidecar is fetched first, read here, and the file is checked as it
//! streams, before it is cached. `.md5` is never the check (it proves
//! nothing against a forger), nor `.asc` (pkgproxy keeps signatures; it
//! does not judge them).

use std::sync::Arc;

use parking_lot::Mutex;
use pkgproxy_cache::{BodyHashes, BodyReader, Cache, Class, Expected, Record, StreamingCheck, Validators, Verifier};

use super::layout::Sidecar;
use super::metadata::Metadata;
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

/// The check of an artifact file as it streams (its clients get it as it
/// arrives, and a file that fails is cut off before its end), and every
/// checksum of its bytes (`.md5`, `.sha1`, `.sha256`, `.sha512`), made
/// while it streams and kept for good beside it before the file itself
/// is: a client asking for one next gets the checksum of the very bytes
/// it got, offline too. The sidecars fetched to check it were kept only
/// until then (revalidated, so a wrong one is asked again with a later
/// try of the file, never trusted for good).
#[derive(Debug, Clone)]
pub struct CheckedFile {
    /// The strongest checksum published beside it, if one was.
    pub check: Option<SidecarVerifier>,
    /// Where the checksums made are kept.
    pub held: HeldFile,
    /// The checksums made while it streamed, for the check at its end.
    made: Arc<Mutex<Option<Digests>>>,
}

impl CheckedFile {
    /// The check of the file `held` names against `check`.
    pub fn new(check: Option<SidecarVerifier>, held: HeldFile) -> CheckedFile {
        CheckedFile { check, held, made: Arc::default() }
    }
}

impl Verifier for CheckedFile {
    /// A SHA-256 is the cache's own check.
    fn expected(&self) -> Expected {
        match &self.check {
            Some(check) if check.kind == Sidecar::Sha256 => check.expected(),
            _ => Expected::default(),
        }
    }

    fn streaming_check(&self) -> Option<Box<dyn StreamingCheck>> {
        use md5::Digest as _;
        use sha2::Digest as _;
        let against = self.check.clone().filter(|check| check.kind != Sidecar::Sha256);
        Some(Box::new(Digesting {
            md5: md5::Md5::new(),
            sha1: sha1::Sha1::new(),
            sha512: sha2::Sha512::new(),
            against,
            made: Arc::clone(&self.made),
        }))
    }

    /// Keeps the checksums made beside the file, before the file itself
    /// is committed.
    fn check(&self, _body: &mut BodyReader<'_>, hashes: &BodyHashes) -> Result<(), String> {
        let Some(made) = self.made.lock().take() else { return Ok(()) };
        let digests = [
            (Sidecar::Md5, made.md5),
            (Sidecar::Sha1, made.sha1),
            (Sidecar::Sha256, hashes.sha256.clone()),
            (Sidecar::Sha512, made.sha512),
        ];
        let records = digests
            .into_iter()
            .map(|(kind, digest)| Record {
                key: format!("{}.{}", self.held.key, kind.extension()),
                body: digest.into(),
                headers: vec![("content-type".to_owned(), "text/plain".to_owned())],
                validators: Validators::default(),
                class: Class::Immutable,
                fetched_at: None,
            })
            .collect();
        if let Err(error) = self.held.cache.put_all(records) {
            tracing::warn!(key = self.held.key, %error, "the file's checksums could not be kept");
        }
        Ok(())
    }
}

/// Checksums of a body, lower-case hex, beside the SHA-256 the cache makes.
#[derive(Debug)]
struct Digests {
    md5: String,
    sha1: String,
    sha512: String,
}

/// The checksums made as a file streams, and its check against the SHA-1
/// or SHA-512 published beside it.
struct Digesting {
    md5: md5::Md5,
    sha1: sha1::Sha1,
    sha512: sha2::Sha512,
    against: Option<SidecarVerifier>,
    made: Arc<Mutex<Option<Digests>>>,
}

impl StreamingCheck for Digesting {
    fn update(&mut self, bytes: &[u8]) {
        md5::Digest::update(&mut self.md5, bytes);
        sha2::Digest::update(&mut self.sha1, bytes);
        sha2::Digest::update(&mut self.sha512, bytes);
    }

    fn verdict(self: Box<Self>) -> Result<(), String> {
        let made = Digests {
            md5: hex::encode(md5::Digest::finalize(self.md5)),
            sha1: hex::encode(sha2::Digest::finalize(self.sha1)),
            sha512: hex::encode(sha2::Digest::finalize(self.sha512)),
        };
        if let Some(against) = &self.against {
            let got = match against.kind {
                Sidecar::Sha1 => &made.sha1,
                _ => &made.sha512,
            };
            if *got != against.digest {
                let ending = against.kind.extension();
                return Err(format!("{} has {ending} {got}, its .{ending} says {}", against.path, against.digest));
            }
        }
        *self.made.lock() = Some(made);
        Ok(())
    }
}

/// The check of an artifact no checksum is published beside, in a
/// repository that requires one: refused, and said how to keep such files.
#[derive(Debug, Clone)]
pub struct Unproven {
    /// The file's path, for errors.
    pub path: String,
    /// The repository's name, for the advice.
    pub repository: String,
}

impl Verifier for Unproven {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, _body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        Err(format!(
            "{}: the repository publishes no .sha512, .sha256 or .sha1 beside it \
             (require_checksums = false on [[maven.repository]] {:?} keeps such files)",
            self.path, self.repository
        ))
    }
}

/// The check of a `maven-metadata.xml`: a document Maven reads, and not
/// older (`<lastUpdated>`) than the one held, which a mirror that lags
/// would otherwise put back.
#[derive(Debug, Clone)]
pub struct MetadataVerifier {
    /// What the copy held says, if one is.
    pub held: Option<Metadata>,
}

impl Verifier for MetadataVerifier {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        use std::io::Read;
        let mut content = Vec::new();
        body.take(METADATA_LIMIT + 1).read_to_end(&mut content).map_err(|error| error.to_string())?;
        if content.len() as u64 > METADATA_LIMIT {
            return Err(format!("a maven-metadata.xml over {METADATA_LIMIT} bytes"));
        }
        let fetched = Metadata::read(&content).map_err(|error| error.to_string())?;
        match &self.held {
            Some(held) if fetched.is_older_than(held) => Err(format!(
                "an older maven-metadata.xml (lastUpdated {}) than the one held ({}): a mirror that lags",
                fetched.last_updated.unwrap_or_default(),
                held.last_updated.unwrap_or_default()
            )),
            _ => Ok(()),
        }
    }
}

/// The largest `maven-metadata.xml` read.
pub const METADATA_LIMIT: u64 = 16 * 1024 * 1024;

/// The largest checksum or signature read.
pub const SIDECAR_LIMIT: u64 = 64 * 1024;

/// The check of a checksum sidecar: the digest it must give, and, when
/// the file it is beside is held (checked against the strongest
/// checksum), the digest of those bytes: a sidecar a client gets agrees
/// with the file it got.
#[derive(Debug, Clone)]
pub struct SidecarBodyVerifier {
    /// Which checksum it is.
    pub kind: Sidecar,
    /// The file it is beside, when it is held.
    pub held_file: Option<HeldFile>,
}

/// A file held in the cache, by its key.
#[derive(Clone)]
pub struct HeldFile {
    /// The cache.
    pub cache: Cache,
    /// Its key.
    pub key: String,
}

impl std::fmt::Debug for HeldFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldFile").field("key", &self.key).finish()
    }
}

impl HeldFile {
    /// The `kind` digest of the bytes held, if they can be read.
    pub fn digest(&self, kind: Sidecar) -> Option<String> {
        let entry = self.cache.lookup(&self.key)?;
        let file = self.cache.open_body(&entry).ok()?;
        digest_of_file(kind, &file).ok()
    }
}

impl Verifier for SidecarBodyVerifier {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        use std::io::Read;
        let mut content = Vec::new();
        body.take(SIDECAR_LIMIT + 1).read_to_end(&mut content).map_err(|error| error.to_string())?;
        let ending = self.kind.extension();
        let digest = digest_of(self.kind, &content).ok_or_else(|| format!("not a .{ending} file: no digest in it"))?;
        let held = self.held_file.as_ref().and_then(|held| held.digest(self.kind));
        match held {
            Some(held) if held != digest => {
                Err(format!("its .{ending} says {digest}, the file pkgproxy checked and holds is {held}"))
            }
            _ => Ok(()),
        }
    }
}

/// The `kind` digest of `file`'s bytes, lower-case hex.
pub fn digest_of_file(kind: Sidecar, file: &std::fs::File) -> std::io::Result<String> {
    match kind {
        Sidecar::Md5 => {
            use md5::Digest;
            let mut hasher = md5::Md5::new();
            each_chunk(file, |chunk| hasher.update(chunk))?;
            Ok(hex::encode(hasher.finalize()))
        }
        Sidecar::Sha1 => hashed::<sha1::Sha1>(file),
        Sidecar::Sha256 => hashed::<sha2::Sha256>(file),
        Sidecar::Sha512 => hashed::<sha2::Sha512>(file),
        Sidecar::Asc => Err(std::io::Error::other("a signature is not computed")),
    }
}

/// `D`'s digest of `file`'s bytes, lower-case hex.
fn hashed<D: sha2::Digest>(file: &std::fs::File) -> std::io::Result<String> {
    let mut hasher = D::new();
    each_chunk(file, |chunk| hasher.update(chunk))?;
    Ok(hex::encode(hasher.finalize()))
}

/// Feeds `file`'s bytes to `feed`, in order.
fn each_chunk(file: &std::fs::File, mut feed: impl FnMut(&[u8])) -> std::io::Result<()> {
    use std::io::Read;
    let mut reader = BodyReader::new(file);
    let mut buffer = vec![0; 256 * 1024];
    loop {
        match reader.read(&mut buffer)? {
            0 => return Ok(()),
            read => feed(&buffer[..read]),
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
