//! The chain of checksums every file of a repository is held to before it
//! is cached: a metalink vouches for `repomd.xml`, `repomd.xml` for each
//! metadata file, primary metadata for each package.

use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use pkgproxy_cache::{BodyHashes, BodyReader, Expected, StreamingCheck, Verifier};
use sha2::Digest;

use super::index::{Listed, RpmIndex};
use super::metalink::Metalink;
use super::primary::{Compression, Package};
use super::repomd::{Algorithm, Checksum, Repomd};

/// The largest `repomd.xml` read (Fedora's are a few kilobytes).
pub const REPOMD_LIMIT: u64 = 4 * 1024 * 1024;

/// The hex digest of `bytes` by `algorithm`.
pub fn digest(algorithm: Algorithm, bytes: &[u8]) -> String {
    let mut hasher = Hasher::new(algorithm);
    hasher.update(bytes);
    hasher.finish()
}

/// A digest being made.
enum Hasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
}

impl Hasher {
    fn new(algorithm: Algorithm) -> Hasher {
        match algorithm {
            Algorithm::Sha1 => Hasher::Sha1(sha1::Sha1::new()),
            Algorithm::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Algorithm::Sha384 => Hasher::Sha384(sha2::Sha384::new()),
            Algorithm::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha1(hasher) => hasher.update(bytes),
            Hasher::Sha256(hasher) => hasher.update(bytes),
            Hasher::Sha384(hasher) => hasher.update(bytes),
            Hasher::Sha512(hasher) => hasher.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            Hasher::Sha1(hasher) => hex::encode(hasher.finalize()),
            Hasher::Sha256(hasher) => hex::encode(hasher.finalize()),
            Hasher::Sha384(hasher) => hex::encode(hasher.finalize()),
            Hasher::Sha512(hasher) => hex::encode(hasher.finalize()),
        }
    }
}

/// What the body must match for `checksum` and `size`: SHA-256 and
/// SHA-512 are checked by the cache as the body streams; SHA-1 and
/// SHA-384 by [`DigestCheck`].
fn expected_for(checksum: &Checksum, size: Option<u64>) -> Expected {
    let hex = Some(checksum.hex.clone());
    match checksum.algorithm {
        Algorithm::Sha256 => Expected { size, sha256: hex, sha512: None },
        Algorithm::Sha512 => Expected { size, sha256: None, sha512: hex },
        _ => Expected { size, ..Expected::default() },
    }
}

/// A digest the cache does not make itself, made as the body streams.
struct DigestCheck {
    hasher: Hasher,
    checksum: Checksum,
    what: String,
}

impl DigestCheck {
    /// `None` when the cache checks `checksum` itself.
    fn boxed(checksum: &Checksum, what: &str) -> Option<Box<dyn StreamingCheck>> {
        matches!(checksum.algorithm, Algorithm::Sha1 | Algorithm::Sha384).then(|| {
            Box::new(DigestCheck {
                hasher: Hasher::new(checksum.algorithm),
                checksum: checksum.clone(),
                what: what.to_owned(),
            }) as Box<dyn StreamingCheck>
        })
    }
}

impl StreamingCheck for DigestCheck {
    fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    fn verdict(self: Box<Self>) -> Result<(), String> {
        let got = self.hasher.finish();
        match got == self.checksum.hex {
            true => Ok(()),
            false => Err(format!("{} does not match its checksum {}", self.what, self.checksum.hex)),
        }
    }
}

/// A `repomd.xml`: read before it is taken; never older than the one
/// held; listed by the metalink, where there is one.
#[derive(Debug)]
pub struct RepomdCheck {
    /// The copy held, if any.
    pub held: Option<Repomd>,
    /// The metalink's word, when it could be had.
    pub metalink: Option<Metalink>,
    /// The path, for messages.
    pub path: String,
    /// Where the root is noted as held once its `repomd.xml` is taken:
    /// the index, the repository and the root.
    pub held_in: (Arc<RpmIndex>, String, String),
}

impl Verifier for RepomdCheck {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, hashes: &BodyHashes) -> Result<(), String> {
        let mut bytes = Vec::new();
        body.take(REPOMD_LIMIT).read_to_end(&mut bytes).map_err(|e| format!("cannot read {}: {e}", self.path))?;
        let fetched =
            Repomd::read(&bytes).map_err(|e| format!("{} is not a repository's repomd.xml: {e}", self.path))?;
        if let Some(held) = self.held.as_ref().filter(|held| fetched.is_older_than(held)) {
            return Err(format!(
                "the mirror's {} is older (revision {}) than the one held (revision {}): a mirror that is behind",
                self.path,
                fetched.revision.as_deref().unwrap_or("?"),
                held.revision.as_deref().unwrap_or("?"),
            ));
        }
        if let Some(metalink) = &self.metalink {
            let vouched = metalink.vouches_for(|algorithm| digest(algorithm, &bytes), hashes.size);
            if !vouched {
                return Err(format!(
                    "the mirror's {} is not one its metalink lists (revision {}): a mirror that is behind or wrong",
                    self.path,
                    fetched.revision.as_deref().unwrap_or("?"),
                ));
            }
        }
        let (index, repository, root) = &self.held_in;
        if let Err(error) = index.hold_root(repository, root) {
            tracing::warn!(%error, "cannot note the root as held: eviction will not find its superseded metadata");
        }
        Ok(())
    }
}

/// A metadata file `repomd.xml` names: its checksum and size; primary
/// metadata is learnt once committed.
#[derive(Debug)]
pub struct MetadataCheck {
    /// What it must be: by the `repomd.xml` held, else by its name.
    pub checksum: Option<(Checksum, Option<u64>)>,
    /// The path, for messages.
    pub path: String,
    /// Where primary metadata is learnt into.
    pub learning: Option<Learning>,
}

impl Verifier for MetadataCheck {
    fn expected(&self) -> Expected {
        self.checksum.as_ref().map(|(checksum, size)| expected_for(checksum, *size)).unwrap_or_default()
    }

    fn streaming_check(&self) -> Option<Box<dyn StreamingCheck>> {
        let (checksum, _) = self.checksum.as_ref()?;
        DigestCheck::boxed(checksum, &self.path)
    }

    fn learns(&self) -> bool {
        self.learning.is_some()
    }

    fn committed(&self, body: &mut BodyReader<'_>, _: &BodyHashes) {
        if let Some(learning) = &self.learning {
            learning.learn_once(Some(body));
        }
    }
}

/// Learning one primary metadata file of one root into the index.
#[derive(Clone)]
pub struct Learning {
    /// The index.
    pub index: Arc<RpmIndex>,
    /// The repository's name.
    pub repository: String,
    /// The root whose primary it is.
    pub root: String,
    /// The primary's checksum (as `repomd.xml` gives it).
    pub checksum: String,
    /// Its compression.
    pub compression: Compression,
    /// Where below the repository a package it lists is.
    pub path_of: PathOf,
    /// The primaries being learnt: one is learnt once, however many
    /// fetches would (a dnf fetching packages the moment it has the
    /// primary metadata, Fedora's 150 MB of XML).
    pub under_way: Arc<UnderWay>,
}

/// The primaries being learnt, each behind a lock of its own.
#[derive(Debug, Default)]
pub struct UnderWay(parking_lot::Mutex<std::collections::HashMap<String, Arc<parking_lot::Mutex<()>>>>);

impl UnderWay {
    fn lock_of(&self, key: &str) -> Arc<parking_lot::Mutex<()>> {
        let mut locks = self.0.lock();
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        Arc::clone(locks.entry(key.to_owned()).or_default())
    }

    /// Whether `key` is being learnt now.
    pub fn is_learning(&self, key: &str) -> bool {
        self.0.lock().get(key).is_some_and(|lock| lock.is_locked())
    }
}

/// Where below a repository a package its primary lists is (`None`: not
/// below it).
pub type PathOf = Arc<dyn Fn(&Package) -> Option<String> + Send + Sync>;

impl std::fmt::Debug for Learning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learning").field("repository", &self.repository).field("root", &self.root).finish()
    }
}

impl Learning {
    /// What [`UnderWay`] knows this primary by.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.repository, self.root, self.checksum)
    }

    /// Learns the primary `raw` reads (compressed), unless it is learnt
    /// already; one being learnt is waited for. `None` for `raw`: only
    /// waits for the one being learnt. Blocking.
    pub fn learn_once(&self, raw: Option<impl Read>) {
        let lock = self.under_way.lock_of(&self.key());
        let _learning = lock.lock();
        if self.index.learnt(&self.repository, &self.root, &self.checksum) {
            return;
        }
        if let Some(raw) = raw {
            self.learn(raw);
        }
    }

    /// Learns the primary `raw` reads (compressed). Blocking.
    fn learn(&self, raw: impl Read) {
        let (repository, root) = (self.repository.as_str(), self.root.as_str());
        let learnt = self.compression.reader(raw).map_err(|e| e.to_string()).and_then(|reader| {
            self.index.learn(repository, root, &self.checksum, reader, |p| (self.path_of)(p)).map_err(|e| e.to_string())
        });
        match learnt {
            Ok(learnt) => tracing::debug!(repository, root, learnt, "learnt primary metadata"),
            Err(error) => tracing::warn!(repository, root, %error, "cannot learn primary metadata"),
        }
    }
}

/// A package: what the primary metadata learnt lists for it; when none
/// learnt does, the primary given (fetched as a prerequisite) is learnt
/// first, before the package's verdict.
#[derive(Debug)]
pub struct PackageCheck {
    /// What the index listed when the fetch started.
    pub listed: Option<Listed>,
    /// The primary to learn when nothing was listed, with its body (none
    /// while another fetch learns it: that one is waited for).
    pub primary: Option<(Learning, Option<Bytes>)>,
    /// The index, the repository and the package's path, to look it up.
    pub lookup: Option<(Arc<RpmIndex>, String, String)>,
}

impl Verifier for PackageCheck {
    fn expected(&self) -> Expected {
        self.listed.as_ref().map(|listed| expected_for(&listed.checksum, listed.size)).unwrap_or_default()
    }

    fn streaming_check(&self) -> Option<Box<dyn StreamingCheck>> {
        DigestCheck::boxed(&self.listed.as_ref()?.checksum, "the package")
    }

    /// Only a package not listed yet is judged at its end.
    fn judges_body(&self) -> bool {
        self.listed.is_none()
    }

    fn check(&self, body: &mut BodyReader<'_>, hashes: &BodyHashes) -> Result<(), String> {
        if self.listed.is_some() {
            return Ok(());
        }
        let Some((index, repository, path)) = &self.lookup else {
            return Err("the package is not listed by any primary metadata pkgproxy holds".to_owned());
        };
        if let Some((learning, primary)) = &self.primary {
            learning.learn_once(primary.as_ref().map(|body| body.as_ref()));
        }
        let listed = index.package(repository, path).ok_or_else(|| {
            format!("{path} is not listed by the primary metadata of repository {repository:?}: pkgproxy keeps only packages it can check")
        })?;
        if listed.size.is_some_and(|size| size != hashes.size) {
            return Err(format!(
                "{path} is {} bytes, its primary metadata says {}",
                hashes.size,
                listed.size.unwrap_or(0)
            ));
        }
        let got = match listed.checksum.algorithm {
            Algorithm::Sha256 => hashes.sha256.clone(),
            algorithm => {
                let mut hasher = Hasher::new(algorithm);
                let mut buf = vec![0; 64 * 1024];
                loop {
                    let n = body.read(&mut buf).map_err(|e| format!("cannot read {path}: {e}"))?;
                    if n == 0 {
                        break;
                    }
                    hasher.update(&buf[..n]);
                }
                hasher.finish()
            }
        };
        match got == listed.checksum.hex {
            true => Ok(()),
            false => Err(format!("{path} does not match the checksum its primary metadata gives")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repomd(revision: u64) -> String {
        let hex = "0".repeat(64);
        format!(
            "<repomd><revision>{revision}</revision><data type=\"primary\"><checksum type=\"sha256\">{hex}</checksum>\
             <location href=\"repodata/{hex}-primary.xml.gz\"/></data></repomd>"
        )
    }

    /// The verdict of `check` on `body`, offered as a mirror's.
    fn verdict(check: &RepomdCheck, body: &str) -> Result<(), String> {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, body.as_bytes()).unwrap();
        let hashes =
            BodyHashes { sha256: digest(Algorithm::Sha256, body.as_bytes()), sha512: None, size: body.len() as u64 };
        check.check(&mut BodyReader::new(&file), &hashes)
    }

    #[test]
    fn a_repomd_older_than_the_one_held_or_not_in_the_metalink_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let index = Arc::new(RpmIndex::open(&dir.path().join("index.redb")).unwrap());
        let held_in = (Arc::clone(&index), "local".to_owned(), "el9".to_owned());
        let check = |held: Option<u64>, metalink: Option<&str>| RepomdCheck {
            held: held.map(|revision| Repomd::read(repomd(revision).as_bytes()).unwrap()),
            metalink: metalink.map(|body| Metalink::read(body.as_bytes()).unwrap()),
            path: "el9/repodata/repomd.xml".to_owned(),
            held_in: held_in.clone(),
        };
        assert!(verdict(&check(None, None), &repomd(5)).is_ok());
        assert!(verdict(&check(Some(5), None), &repomd(5)).is_ok(), "the same revision again");
        assert!(verdict(&check(Some(4), None), &repomd(5)).is_ok(), "a newer one");
        let older = verdict(&check(Some(6), None), &repomd(5)).unwrap_err();
        assert!(older.contains("older (revision 5) than the one held (revision 6)"), "{older}");
        assert!(verdict(&check(None, None), "<html>a captive portal</html>").is_err());
        assert!(index.roots().contains(&"local/el9".to_owned()), "the root is noted as held");

        let vouching = |body: &str| {
            let sha256 = digest(Algorithm::Sha256, body.as_bytes());
            format!(
                "<metalink xmlns=\"http://www.metalinker.org/\"><files><file name=\"repomd.xml\"><size>{}</size>\
                 <verification><hash type=\"sha256\">{sha256}</hash></verification></file></files></metalink>",
                body.len()
            )
        };
        let current = repomd(7);
        assert!(verdict(&check(None, Some(&vouching(&current))), &current).is_ok());
        let behind = verdict(&check(None, Some(&vouching(&current))), &repomd(6)).unwrap_err();
        assert!(behind.contains("not one its metalink lists (revision 6)"), "{behind}");
    }

    #[test]
    fn digests_are_made_by_each_algorithm() {
        assert_eq!(digest(Algorithm::Sha1, b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            digest(Algorithm::Sha256, b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest(Algorithm::Sha384, b"abc").len(), 96);
    }

    #[test]
    fn a_sha1_checksum_is_checked_as_the_body_streams() {
        let checksum = Checksum::new("sha", "a9993e364706816aba3e25717850c26c9cd0d89d").unwrap();
        let mut check = DigestCheck::boxed(&checksum, "x").unwrap();
        check.update(b"ab");
        check.update(b"c");
        assert!(check.verdict().is_ok());
        let mut check = DigestCheck::boxed(&checksum, "x").unwrap();
        check.update(b"abd");
        assert!(check.verdict().is_err());
        let sha256 = Checksum::new("sha256", &"0".repeat(64)).unwrap();
        assert!(DigestCheck::boxed(&sha256, "x").is_none(), "the cache checks SHA-256 itself");
        assert_eq!(expected_for(&sha256, Some(3)).sha256.as_deref(), Some("0".repeat(64).as_str()));
    }
}
