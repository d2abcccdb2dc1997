//! An index's files as pkgproxy serves them: `packages/AA/BB/REST/FILE`,
//! the 64 hex digits of AA, BB and REST the file's BLAKE2b-256 (PyPI's
//! own layout, kept, so a tool that maps PyPI's file URLs onto a proxy
//! finds them) or, for an index whose links are laid out otherwise, its
//! SHA-256 as its page gives it; and `FILE.metadata`, its core metadata.
//! Each is checked against the digest its path names while it streams.

use std::sync::{Arc, OnceLock};

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest as _};
use pkgproxy_cache::{BodyHashes, BodyReader, StreamingCheck, Verifier};

use super::page::Listed;

/// A file's path below `packages/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePath {
    /// The 64 hex digits, lower case.
    pub digest: String,
    /// The file's name.
    pub filename: String,
    /// Whether its core metadata (`FILE.metadata`) is asked for.
    pub metadata: bool,
}

impl FilePath {
    /// `AA/BB/REST/FILE[.metadata]`.
    pub fn parse(below: &str) -> Option<FilePath> {
        let mut parts = below.split('/');
        let (a, b, rest, file) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || a.len() != 2 || b.len() != 2 || rest.len() != 60 {
            return None;
        }
        let digest = format!("{a}{b}{rest}").to_ascii_lowercase();
        if !digest.bytes().all(|byte| byte.is_ascii_hexdigit()) || !is_filename(file) {
            return None;
        }
        let (filename, metadata) = match file.strip_suffix(".metadata") {
            Some(wheel) => (wheel, true),
            None => (file, false),
        };
        Some(FilePath { digest, filename: filename.to_owned(), metadata })
    }

    /// `AA/BB/REST/FILE`, the file's own (not its metadata's).
    pub fn file_path(&self) -> String {
        let d = &self.digest;
        format!("{}/{}/{}/{}", &d[..2], &d[2..4], &d[4..], self.filename)
    }
}

/// Whether `name` may be a distribution's file name.
fn is_filename(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-+!".contains(&b))
}

/// Where pkgproxy serves a file a page lists, below `packages/`: its own
/// path when the index lays it out as PyPI does, else by the SHA-256 the
/// page gives; `None` when the page gives no hash to check it by.
pub fn served_path(listed: &Listed) -> Option<String> {
    let path = listed.url.split(['?', '#']).next().unwrap_or_default();
    if let Some((_, below)) = path.rsplit_once("/packages/") {
        if FilePath::parse(below).is_some_and(|file| !file.metadata && file.filename == listed.filename) {
            return Some(below.to_ascii_lowercase().replacen(
                &listed.filename.to_ascii_lowercase(),
                &listed.filename,
                1,
            ));
        }
    }
    let sha256 =
        listed.sha256.as_deref().filter(|sha| sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let sha256 = sha256.to_ascii_lowercase();
    is_filename(&listed.filename)
        .then(|| format!("{}/{}/{}/{}", &sha256[..2], &sha256[2..4], &sha256[4..], listed.filename))
}

/// The project a distribution's file is of, normalised: a wheel's name up
/// to its first `-`, an sdist's up to the `-` before its version.
pub fn project_of(filename: &str) -> Option<String> {
    let stem = filename.strip_suffix(".whl").map(|wheel| wheel.split('-').next().unwrap_or_default());
    let stem = stem.or_else(|| {
        let bytes = filename.as_bytes();
        (1..bytes.len()).find(|&i| bytes[i - 1] == b'-' && bytes[i].is_ascii_digit()).map(|i| &filename[..i - 1])
    })?;
    (!stem.is_empty()).then(|| super::normalize(stem))
}

/// The version in a distribution's file name: a wheel's (or an egg's)
/// second `-`-separated part, an sdist's from the `-` before a digit to its
/// extension.
pub fn version_of(filename: &str) -> Option<&str> {
    if let Some(built) = filename.strip_suffix(".whl").or_else(|| filename.strip_suffix(".egg")) {
        return built.split('-').nth(1).filter(|version| !version.is_empty());
    }
    let stem = [".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz"].iter().find_map(|ext| filename.strip_suffix(ext))?;
    let bytes = stem.as_bytes();
    let at = (1..bytes.len()).find(|&i| bytes[i - 1] == b'-' && bytes[i].is_ascii_digit())?;
    Some(&stem[at..])
}

/// The project (normalised) and version a distribution's file is of.
pub fn release_of(filename: &str) -> Option<(String, &str)> {
    Some((project_of(filename)?, version_of(filename)?))
}

/// The checks of a file fetched for a path naming `digest`: its
/// BLAKE2b-256 (PyPI's layout) or its SHA-256 (an index laid out
/// otherwise) is the digest, and its SHA-256 the page's, when the page
/// gives one.
#[derive(Debug)]
pub struct FileVerifier {
    /// The 64 hex digits the path names.
    pub digest: String,
    /// The SHA-256 its page gives, if any.
    pub page_sha256: Option<String>,
    /// Whether the body's BLAKE2b-256 was the digest, once it streamed.
    blake2b_matched: Arc<OnceLock<bool>>,
}

impl FileVerifier {
    /// The checks of a file whose path names `digest`.
    pub fn new(digest: String, page_sha256: Option<String>) -> FileVerifier {
        FileVerifier { digest, page_sha256, blake2b_matched: Arc::default() }
    }
}

impl Verifier for FileVerifier {
    fn streaming_check(&self) -> Option<Box<dyn StreamingCheck>> {
        let matched = Arc::clone(&self.blake2b_matched);
        Some(Box::new(Blake2Check { hasher: Blake2b::<U32>::new(), digest: self.digest.clone(), matched }))
    }

    fn check(&self, _body: &mut BodyReader<'_>, hashes: &BodyHashes) -> Result<(), String> {
        let blake2b = self.blake2b_matched.get().copied().unwrap_or(false);
        if !blake2b && !self.digest.eq_ignore_ascii_case(&hashes.sha256) {
            return Err(format!(
                "the file is neither the BLAKE2b-256 nor the SHA-256 its path names ({})",
                self.digest
            ));
        }
        match &self.page_sha256 {
            Some(sha256) if !sha256.eq_ignore_ascii_case(&hashes.sha256) => {
                Err(format!("the file's SHA-256 is {}, its page says {sha256}", hashes.sha256))
            }
            _ => Ok(()),
        }
    }
}

/// BLAKE2b-256 computed as the body streams, its verdict left for
/// [`FileVerifier::check`], which has the SHA-256 too.
struct Blake2Check {
    hasher: Blake2b<U32>,
    digest: String,
    matched: Arc<OnceLock<bool>>,
}

impl StreamingCheck for Blake2Check {
    fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    fn verdict(self: Box<Self>) -> Result<(), String> {
        let blake2b = hex::encode(self.hasher.finalize());
        let _ = self.matched.set(blake2b == self.digest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B2: &str = "b7ce149ab1d0d1c10c1e5d1e2a9ed1d8a1e4cd4a8cd8a2e5ff5c5e5b59c9bc5e";

    #[test]
    fn a_file_path_names_its_digest_and_file() {
        let path = format!("{}/{}/{}/six-1.17.0-py2.py3-none-any.whl", &B2[..2], &B2[2..4], &B2[4..]);
        let file = FilePath::parse(&path).unwrap();
        assert_eq!(
            (file.digest.as_str(), file.filename.as_str(), file.metadata),
            (B2, "six-1.17.0-py2.py3-none-any.whl", false)
        );
        assert!(FilePath::parse(&format!("{path}.metadata")).unwrap().metadata);
        assert_eq!(FilePath::parse(&format!("{path}.metadata")).unwrap().file_path(), path);
        for bad in ["ab/cd/ef/x.whl", &format!("{}/{}/{}/../x", &B2[..2], &B2[2..4], &B2[4..]), "zz/zz/x/y"] {
            assert_eq!(FilePath::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_listed_file_keeps_pypi_s_layout_or_is_laid_out_by_its_sha256() {
        let file = "six-1.17.0-py2.py3-none-any.whl";
        let pypi = Listed {
            filename: file.into(),
            url: format!("https://files.example/packages/{}/{}/{}/{file}", &B2[..2], &B2[2..4], &B2[4..]),
            sha256: None,
            metadata_sha256: None,
        };
        assert_eq!(served_path(&pypi).unwrap(), format!("{}/{}/{}/{file}", &B2[..2], &B2[2..4], &B2[4..]));
        let other =
            Listed { url: "https://corp.example/+f/abc/six.whl".into(), sha256: Some(B2.into()), ..pypi.clone() };
        assert_eq!(served_path(&other).unwrap(), format!("{}/{}/{}/{file}", &B2[..2], &B2[2..4], &B2[4..]));
        let unhashed = Listed { sha256: None, ..other };
        assert_eq!(served_path(&unhashed), None, "nothing to check it by");
    }

    #[test]
    fn a_file_s_version_is_read_from_its_name() {
        assert_eq!(version_of("six-1.16.0-py2.py3-none-any.whl"), Some("1.16.0"));
        assert_eq!(version_of("zope.interface-6.0.tar.gz"), Some("6.0"));
        assert_eq!(version_of("my-pkg-2.0rc1.zip"), Some("2.0rc1"));
        assert_eq!(version_of("notes.txt"), None);
        assert_eq!(
            release_of("Zope.Interface-6.0-cp312-cp312-linux_x86_64.whl"),
            Some(("zope-interface".into(), "6.0"))
        );
    }

    #[test]
    fn a_file_s_project_is_in_its_name() {
        assert_eq!(project_of("Django-5.0-py3-none-any.whl").as_deref(), Some("django"));
        assert_eq!(project_of("zope.interface-6.0.tar.gz").as_deref(), Some("zope-interface"));
        assert_eq!(project_of("python-dateutil-2.9.0.tar.gz").as_deref(), Some("python-dateutil"));
        assert_eq!(project_of("nothing"), None);
    }
}
