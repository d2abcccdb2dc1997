//! The apt index: what the archives' `Release` and `Packages` files say each
//! file must be, learnt as they pass through and kept beside the cache
//! (`apt-index.redb`) so a restart keeps it.
//!
//! Releases are few and small (a few thousand files each) and are read on
//! every `dists/` request, so they are also held in memory. What the
//! `Packages` indexes say of `pool/` files (a million entries for a mirror
//! of several suites) lives only on disk and is read on a miss, so memory
//! does not grow with it: redb's page cache is capped at
//! [`POOL_CACHE_BYTES`].

mod encoding;

use parking_lot::RwLock;
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use redb::{Database, Durability, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::packages;
use super::release::{FileSum, Release};

const RELEASES: TableDefinition<&str, &[u8]> = TableDefinition::new("releases");
const POOL: TableDefinition<&str, &[u8]> = TableDefinition::new("pool");

/// The most memory redb may use to cache pages of the index.
pub const POOL_CACHE_BYTES: usize = 8 * 1024 * 1024;

/// Pool entries written per transaction while learning a `Packages` index:
/// a write transaction holds its dirty pages in memory until it commits.
const LEARN_BATCH: usize = 8192;

/// A failure of the apt index.
#[derive(Debug, thiserror::Error)]
#[error("apt index {}: {message}", path.display())]
pub struct IndexError {
    path: PathBuf,
    message: String,
}

/// What became of a `Release` offered to the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// It is now the suite's Release.
    Accepted,
    /// It is older than the one held (a lagging mirror): kept out.
    Older {
        /// The date of the Release offered.
        offered: SystemTime,
        /// The date of the one held.
        held: SystemTime,
    },
    /// It is dated further ahead than [`MAX_FUTURE`] (a mirror with a
    /// wrong clock, or a forged answer on plain HTTP): kept out, as apt
    /// refuses it, and never held, so it cannot make the genuine Releases
    /// after it look older.
    Future {
        /// The date of the Release offered.
        offered: SystemTime,
        /// The time it was offered at.
        now: SystemTime,
    },
}

/// How far ahead of pkgproxy's clock a Release may be dated (clocks
/// differ a little; apt's own `Acquire::Max-FutureTime` is ten seconds).
pub const MAX_FUTURE: std::time::Duration = std::time::Duration::from_secs(60);

/// The persistent apt index.
pub struct AptIndex {
    path: PathBuf,
    db: Database,
    releases: RwLock<HashMap<String, Arc<Release>>>,
}

impl std::fmt::Debug for AptIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AptIndex").field("path", &self.path).finish_non_exhaustive()
    }
}

impl AptIndex {
    /// Opens or creates the index file and loads the Releases.
    pub fn open(path: &Path) -> Result<Self, IndexError> {
        let fail = |e: &dyn std::fmt::Display| IndexError { path: path.to_path_buf(), message: e.to_string() };
        let db = Database::builder().set_cache_size(POOL_CACHE_BYTES).create(path).map_err(|e| fail(&e))?;
        let txn = db.begin_write().map_err(|e| fail(&e))?;
        txn.open_table(RELEASES).map_err(|e| fail(&e))?;
        txn.open_table(POOL).map_err(|e| fail(&e))?;
        txn.commit().map_err(|e| fail(&e))?;

        let mut releases = HashMap::new();
        let txn = db.begin_read().map_err(|e| fail(&e))?;
        let table = txn.open_table(RELEASES).map_err(|e| fail(&e))?;
        for row in table.iter().map_err(|e| fail(&e))? {
            let (key, value) = row.map_err(|e| fail(&e))?;
            match encoding::decode_release(value.value()) {
                Some(release) => {
                    releases.insert(key.value().to_string(), Arc::new(release));
                }
                None => tracing::warn!(suite = key.value(), "skipping an unreadable Release in the apt index"),
            }
        }
        drop(table);
        drop(txn);
        Ok(AptIndex { path: path.to_path_buf(), db, releases: RwLock::new(releases) })
    }

    fn fail(&self, e: impl std::fmt::Display) -> IndexError {
        IndexError { path: self.path.clone(), message: e.to_string() }
    }

    /// The Release held for `suite` (`<archive>/dists/<suite>`).
    pub fn release(&self, suite: &str) -> Option<Arc<Release>> {
        self.releases.read().get(suite).cloned()
    }

    /// Each suite (`<archive>/dists/<suite>`) whose Release held says it is
    /// valid only until a time before `by`, with that time, in suite order.
    pub fn valid_until_before(&self, by: std::time::SystemTime) -> Vec<(String, std::time::SystemTime)> {
        let releases = self.releases.read();
        let mut found: Vec<(String, std::time::SystemTime)> = releases
            .iter()
            .filter_map(|(suite, release)| release.valid_until.filter(|until| *until < by).map(|t| (suite.clone(), t)))
            .collect();
        found.sort();
        found
    }

    /// The suites whose Release is held (`<archive>/dists/<suite>`).
    pub fn suites(&self) -> Vec<String> {
        self.releases.read().keys().cloned().collect()
    }

    /// What the Release of the suite `relative` (`dists/...`, within
    /// `archive`) lies in expects of that file, if any Release held lists it.
    pub fn index_file(&self, archive: &str, relative: &str) -> Option<FileSum> {
        self.listing(archive, relative).map(|(sum, _)| sum)
    }

    /// The same, with the date of the Release that lists it.
    pub fn listing(&self, archive: &str, relative: &str) -> Option<(FileSum, Option<std::time::SystemTime>)> {
        let releases = self.releases.read();
        suite_splits(relative).find_map(|(suite, file)| {
            let release = releases.get(&format!("{archive}/{suite}"))?;
            Some((*release.files.get(file)?, release.date))
        })
    }

    /// The name of the file a Release of `archive` lists with `sha256` in the
    /// folder `dir` (`dists/<suite>/main/binary-amd64`): what a by-hash file is.
    pub fn name_by_hash(&self, archive: &str, dir: &str, sha256: &[u8; 32]) -> Option<String> {
        let releases = self.releases.read();
        let dir = format!("{dir}/");
        let name = suite_splits(&dir).find_map(|(suite, folder)| {
            let release = releases.get(&format!("{archive}/{suite}"))?;
            release.files.iter().find_map(|(path, sum)| {
                let in_folder = path.strip_prefix(folder).is_some_and(|name| !name.contains('/'));
                (in_folder && sum.sha256 == *sha256).then(|| format!("{suite}/{path}"))
            })
        });
        name
    }

    /// Offers a newly fetched Release of `suite`, at `now`; one older than
    /// held, or dated ahead of `now`, is kept out. Blocking (a durable
    /// write).
    pub fn offer_release(&self, suite: &str, release: Release, now: SystemTime) -> Result<Offer, IndexError> {
        if let Some(offered) = release.date.filter(|date| *date > now + MAX_FUTURE) {
            return Ok(Offer::Future { offered, now });
        }
        if let (Some(held), Some(offered)) = (self.release(suite).and_then(|r| r.date), release.date) {
            if offered < held {
                return Ok(Offer::Older { offered, held });
            }
        }
        let encoded = encoding::encode_release(&release);
        let txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        {
            let mut table = txn.open_table(RELEASES).map_err(|e| self.fail(e))?;
            table.insert(suite, encoded.as_slice()).map_err(|e| self.fail(e))?;
        }
        txn.commit().map_err(|e| self.fail(e))?;
        self.releases.write().insert(suite.to_string(), Arc::new(release));
        Ok(Offer::Accepted)
    }

    /// Forgets the Release held for `suite` (its `InRelease` was removed
    /// by hand): the next one fetched is taken whatever its date.
    pub fn forget_release(&self, suite: &str) -> Result<bool, IndexError> {
        let txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        let removed = {
            let mut table = txn.open_table(RELEASES).map_err(|e| self.fail(e))?;
            let removed = table.remove(suite).map_err(|e| self.fail(e))?.is_some();
            removed
        };
        txn.commit().map_err(|e| self.fail(e))?;
        self.releases.write().remove(suite);
        Ok(removed)
    }

    /// Learns every `.deb` a `Packages` index of `archive` names. Blocking;
    /// memory stays bounded however long the index is.
    pub fn learn_packages(&self, archive: &str, index: impl BufRead) -> Result<usize, IndexError> {
        let mut batch: Vec<(String, encoding::SumRecord)> = Vec::with_capacity(LEARN_BATCH);
        let mut learnt = 0;
        let mut failure = None;
        let parsed = packages::for_each(index, |file| {
            if failure.is_some() {
                return;
            }
            batch.push((format!("{archive}/{}", file.filename), encoding::encode_sum(file.size, &file.sha256)));
            if batch.len() == LEARN_BATCH {
                match self.write_pool(&mut batch, Durability::None) {
                    Ok(n) => learnt += n,
                    Err(e) => failure = Some(e),
                }
            }
        });
        if let Some(failure) = failure {
            return Err(failure);
        }
        parsed.map_err(|e| self.fail(format!("reading a Packages index: {e}")))?;
        learnt += self.write_pool(&mut batch, Durability::Immediate)?;
        Ok(learnt)
    }

    fn write_pool(
        &self,
        batch: &mut Vec<(String, encoding::SumRecord)>,
        durability: Durability,
    ) -> Result<usize, IndexError> {
        let mut txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        txn.set_durability(durability);
        {
            let mut table = txn.open_table(POOL).map_err(|e| self.fail(e))?;
            for (key, value) in batch.iter() {
                table.insert(key.as_str(), value.as_slice()).map_err(|e| self.fail(e))?;
            }
        }
        txn.commit().map_err(|e| self.fail(e))?;
        let n = batch.len();
        batch.clear();
        Ok(n)
    }

    /// How many suites' Releases and how many pool files the index knows.
    pub fn counts(&self) -> (usize, u64) {
        let suites = self.releases.read().len();
        let pool = self.db.begin_read().ok().and_then(|txn| txn.open_table(POOL).ok()?.len().ok()).unwrap_or(0);
        (suites, pool)
    }

    /// What the newest `Packages` index learnt says of `archive`'s pool file
    /// `filename` (`pool/...`).
    pub fn pool_file(&self, archive: &str, filename: &str) -> Option<FileSum> {
        let txn = self.db.begin_read().ok()?;
        let table = txn.open_table(POOL).ok()?;
        let value = table.get(format!("{archive}/{filename}").as_str()).ok()??;
        encoding::decode_sum(value.value())
    }
}

/// The ways `dists/<a>/<b>/.../<file>` splits into a suite folder and a path
/// within it, shortest suite first (`dists/<a>` with `<b>/.../<file>`, then
/// `dists/<a>/<b>` ...).
fn suite_splits(relative: &str) -> impl Iterator<Item = (&str, &str)> {
    let slashes: Vec<usize> = relative.match_indices('/').map(|(i, _)| i).skip(1).collect();
    slashes.into_iter().map(move |i| (&relative[..i], &relative[i + 1..]))
}

#[cfg(test)]
mod tests;
