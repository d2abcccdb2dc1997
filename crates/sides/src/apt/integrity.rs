//! The apt side with its index: which checksum every request must meet and
//! what is learnt from what passes through.
//!
//! - `InRelease`/`Release`: parsed before they are cached; one older than
//!   the suite's Release held (a lagging mirror) is refused, so clients keep
//!   the newer one.
//! - `dists/**` files fetched by name: must match the size and SHA-256 the
//!   suite's Release lists; a cached copy that does not is superseded.
//! - `by-hash` files: checked against the hash in their path (by the
//!   classification); when the Release names them a `Packages` index, it is
//!   learnt.
//! - `pool/**`: must match the newest `Packages` index that named it.

use std::sync::Arc;

use pkgproxy_cache::{BodyHashes, BodyReader, Expected, Verifier};

use super::index::{AptIndex, Offer};
use super::packages::Compression;
use super::release::{self, hex32};
use super::Apt;
use crate::decision::CachedRequest;

/// The largest `Release` parsed (Debian's are well under a megabyte).
const MAX_RELEASE_BYTES: u64 = 64 * 1024 * 1024;

impl Apt {
    /// `request` with the size and SHA-256 the index lists for a `dists/`
    /// file fetched by name.
    pub(super) fn expecting_listed_sums(&self, mut request: CachedRequest) -> CachedRequest {
        let listed = match archive_and_path(&request.key) {
            Some((archive, relative)) if is_index_by_name(relative) => self.index.listing(archive, relative),
            _ => None,
        };
        if let Some((sum, date)) = listed {
            request.wanted.expected.size = Some(sum.size);
            request.wanted.expected.sha256 = Some(hex::encode(sum.sha256));
            request.wanted.expected_from = Some(match date {
                Some(date) => format!("Release of {}", release::minute_utc(date)),
                None => "the suite's Release".to_owned(),
            });
        }
        request
    }

    /// The hooks into a fetch of `request`: asked for on a miss only, so a
    /// hit costs no lookup in the pool index.
    pub(super) fn checks(&self, request: &CachedRequest) -> Option<Arc<dyn Verifier>> {
        let (archive, relative) = archive_and_path(&request.key)?;
        let (index, archive) = (Arc::clone(&self.index), archive.to_string());
        if relative.starts_with("pool/") {
            return Some(Arc::new(PoolFile { index, archive, filename: relative.to_string() }));
        }
        if let Some(folder) = by_hash_folder(relative) {
            return Some(Arc::new(ByHash { index, archive, folder: folder.to_string() }));
        }
        if let Some(suite) = release_suite(relative) {
            let clock = Arc::clone(&self.clock);
            return Some(Arc::new(ReleaseFile { index, suite: format!("{archive}/{suite}"), clock }));
        }
        let compression = Compression::of_packages(relative)?;
        Some(Arc::new(PackagesIndex { index, archive, compression }))
    }
}

/// The archive and the archive-relative path of an apt cache key.
pub(super) fn archive_and_path(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix("apt/")?.split_once('/')
}

/// A `dists/` file fetched by name that a Release lists (not a Release, not
/// by-hash).
fn is_index_by_name(relative: &str) -> bool {
    relative.starts_with("dists/") && by_hash_folder(relative).is_none() && release_suite(relative).is_none()
}

/// `dists/<suite...>` of a `dists/<suite...>/InRelease` or `.../Release`.
pub(super) fn release_suite(relative: &str) -> Option<&str> {
    let (suite, name) = relative.rsplit_once('/')?;
    matches!(name, "InRelease" | "Release").then_some(suite)
}

/// The folder holding the file a `.../by-hash/<ALGORITHM>/<hash>` path names.
fn by_hash_folder(relative: &str) -> Option<&str> {
    relative.rsplit_once("/by-hash/").map(|(folder, _)| folder)
}

/// A `pool/` file: what the newest `Packages` index said of it.
#[derive(Debug)]
struct PoolFile {
    index: Arc<AptIndex>,
    archive: String,
    filename: String,
}

impl Verifier for PoolFile {
    fn expected(&self) -> Expected {
        match self.index.pool_file(&self.archive, &self.filename) {
            Some(sum) => Expected { size: Some(sum.size), sha256: Some(hex::encode(sum.sha256)), sha512: None },
            None => Expected::default(),
        }
    }
}

/// An `InRelease` or `Release`: parsed and offered to the index before it is
/// cached.
#[derive(Debug)]
struct ReleaseFile {
    index: Arc<AptIndex>,
    suite: String,
    /// Tells when it is offered, against its date.
    clock: Arc<dyn pkgproxy_cache::Clock>,
}

impl Verifier for ReleaseFile {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _: &BodyHashes) -> Result<(), String> {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(body, MAX_RELEASE_BYTES), &mut bytes)
            .map_err(|e| format!("cannot read the Release: {e}"))?;
        let parsed = release::parse(&bytes).map_err(|e| e.to_string())?;
        match self.index.offer_release(&self.suite, parsed, self.clock.now()).map_err(|e| e.to_string())? {
            Offer::Accepted => Ok(()),
            Offer::Future { offered, now } => Err(format!(
                "the upstream's Release for {} is dated {} s ahead of this clock ({}): a mirror with a wrong clock, which apt refuses as not valid yet",
                self.suite,
                unix(offered).saturating_sub(unix(now)),
                release::minute_utc(offered)
            )),
            Offer::Older { offered, held } => Err(format!(
                "the upstream's Release for {} is older ({} s) than the one already held ({} s): a mirror lagging behind",
                self.suite,
                unix(offered),
                unix(held)
            )),
        }
    }
}

fn unix(time: std::time::SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A `Packages` index fetched by name: learnt once committed.
#[derive(Debug)]
struct PackagesIndex {
    index: Arc<AptIndex>,
    archive: String,
    compression: Compression,
}

impl Verifier for PackagesIndex {
    fn learns(&self) -> bool {
        true
    }

    fn committed(&self, body: &mut BodyReader<'_>, _: &BodyHashes) {
        learn(&self.index, &self.archive, self.compression, body);
    }
}

/// A by-hash file: learnt when the Release names it a `Packages` index.
#[derive(Debug)]
struct ByHash {
    index: Arc<AptIndex>,
    archive: String,
    folder: String,
}

impl Verifier for ByHash {
    fn learns(&self) -> bool {
        true
    }

    fn committed(&self, body: &mut BodyReader<'_>, hashes: &BodyHashes) {
        let Some(sha256) = hex32(&hashes.sha256) else { return };
        let Some(name) = self.index.name_by_hash(&self.archive, &self.folder, &sha256) else { return };
        if let Some(compression) = Compression::of_packages(&name) {
            learn(&self.index, &self.archive, compression, body);
        }
    }
}

fn learn(index: &AptIndex, archive: &str, compression: Compression, body: &mut BodyReader<'_>) {
    match index.learn_packages(archive, compression.reader(body)) {
        Ok(learnt) => tracing::debug!(archive, learnt, "learnt a Packages index"),
        Err(error) => tracing::warn!(archive, %error, "cannot learn a Packages index"),
    }
}
