//! The RPM index: what each repository's primary metadata said of its
//! packages (the checksum, size and publish time each must have), learnt
//! as primary metadata passes through and kept beside the cache
//! (`rpm-index.redb`), so a restart keeps it. Fedora's primary lists
//! 75,000 packages: they live on disk and are read on a miss, so memory
//! does not grow with them.
//!
//! A package's entry is never dropped when a newer primary no longer
//! lists it: a client whose metadata is a little older than pkgproxy's
//! may still ask for it, and the checksum of a name never changes.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::primary::{self, Package};
use super::repomd::{Algorithm, Checksum};

/// `REPOSITORY/PATH` of a package: what it must be.
const PACKAGES: TableDefinition<&str, &str> = TableDefinition::new("packages");
/// `REPOSITORY/ROOT`: the checksum of the primary metadata last learnt
/// for that root.
const LEARNT: TableDefinition<&str, &str> = TableDefinition::new("learnt");

/// `REPOSITORY/ROOT` of every root whose `repomd.xml` pkgproxy took:
/// where eviction looks for metadata a newer one no longer names.
const ROOTS: TableDefinition<&str, ()> = TableDefinition::new("roots");

/// The most memory redb may use to cache pages of the index.
const CACHE_BYTES: usize = 8 * 1024 * 1024;
/// Packages written per transaction while learning a primary.
const LEARN_BATCH: usize = 8192;

/// A failure of the RPM index.
#[derive(Debug, thiserror::Error)]
#[error("rpm index {}: {message}", path.display())]
pub struct IndexError {
    path: PathBuf,
    message: String,
}

/// What primary metadata said a package must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its checksum.
    pub checksum: Checksum,
    /// Its size, where given.
    pub size: Option<u64>,
    /// When it was added to the repository (`<time file>`).
    pub time_file: Option<u64>,
    /// `NAME-[EPOCH:]VERSION-RELEASE.ARCH`.
    pub nevra: String,
}

impl Listed {
    fn encode(&self) -> String {
        let algorithm = match self.checksum.algorithm {
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha384 => "sha384",
            Algorithm::Sha512 => "sha512",
        };
        let number = |n: Option<u64>| n.map_or_else(String::new, |n| n.to_string());
        format!("{algorithm} {} {} {} {}", self.checksum.hex, number(self.size), number(self.time_file), self.nevra)
    }

    fn decode(text: &str) -> Option<Listed> {
        let mut fields = text.splitn(5, ' ');
        let checksum = Checksum::new(fields.next()?, fields.next()?)?;
        let number = |field: Option<&str>| field.and_then(|n| n.parse().ok());
        let (size, time_file) = (number(fields.next()), number(fields.next()));
        Some(Listed { checksum, size, time_file, nevra: fields.next().unwrap_or_default().to_owned() })
    }
}

/// The persistent RPM index.
pub struct RpmIndex {
    path: PathBuf,
    db: Database,
}

impl std::fmt::Debug for RpmIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpmIndex").field("path", &self.path).finish_non_exhaustive()
    }
}

impl RpmIndex {
    /// Opens or creates the index file.
    pub fn open(path: &Path) -> Result<RpmIndex, IndexError> {
        let fail = |e: &dyn std::fmt::Display| IndexError { path: path.to_path_buf(), message: e.to_string() };
        let db = Database::builder().set_cache_size(CACHE_BYTES).create(path).map_err(|e| fail(&e))?;
        let txn = db.begin_write().map_err(|e| fail(&e))?;
        txn.open_table(PACKAGES).map_err(|e| fail(&e))?;
        txn.open_table(LEARNT).map_err(|e| fail(&e))?;
        txn.open_table(ROOTS).map_err(|e| fail(&e))?;
        txn.commit().map_err(|e| fail(&e))?;
        Ok(RpmIndex { path: path.to_path_buf(), db })
    }

    fn fail(&self, e: impl std::fmt::Display) -> IndexError {
        IndexError { path: self.path.clone(), message: e.to_string() }
    }

    /// What the primary metadata learnt says of package `path` of
    /// `repository`.
    pub fn package(&self, repository: &str, path: &str) -> Option<Listed> {
        let txn = self.db.begin_read().ok()?;
        let table = txn.open_table(PACKAGES).ok()?;
        let value = table.get(format!("{repository}/{path}").as_str()).ok()??;
        Listed::decode(value.value())
    }

    /// Whether the primary metadata with checksum `primary` was learnt for
    /// `root` of `repository`.
    pub fn learnt(&self, repository: &str, root: &str, primary: &str) -> bool {
        let read = || -> Option<bool> {
            let txn = self.db.begin_read().ok()?;
            let table = txn.open_table(LEARNT).ok()?;
            let value = table.get(format!("{repository}/{root}").as_str()).ok()??;
            Some(value.value() == primary)
        };
        read().unwrap_or(false)
    }

    /// Notes that a `repomd.xml` of `root` of `repository` was taken.
    /// Blocking.
    pub fn hold_root(&self, repository: &str, root: &str) -> Result<(), IndexError> {
        let key = format!("{repository}/{root}");
        let known = || -> Option<bool> {
            let txn = self.db.begin_read().ok()?;
            Some(txn.open_table(ROOTS).ok()?.get(key.as_str()).ok()?.is_some())
        };
        if known() == Some(true) {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        txn.open_table(ROOTS).map_err(|e| self.fail(e))?.insert(key.as_str(), ()).map_err(|e| self.fail(e))?;
        txn.commit().map_err(|e| self.fail(e))
    }

    /// Forgets `root` of `repository` (its `repomd.xml` was removed by
    /// hand). Blocking.
    pub fn forget_root(&self, repository: &str, root: &str) -> Result<(), IndexError> {
        let key = format!("{repository}/{root}");
        let txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        txn.open_table(ROOTS).map_err(|e| self.fail(e))?.remove(key.as_str()).map_err(|e| self.fail(e))?;
        txn.commit().map_err(|e| self.fail(e))
    }

    /// Every `REPOSITORY/ROOT` whose `repomd.xml` was taken.
    pub fn roots(&self) -> Vec<String> {
        let read = || -> Option<Vec<String>> {
            let txn = self.db.begin_read().ok()?;
            let table = txn.open_table(ROOTS).ok()?;
            let rows = table.iter().ok()?;
            Some(rows.filter_map(|row| Some(row.ok()?.0.value().to_owned())).collect())
        };
        read().unwrap_or_default()
    }

    /// The path of a package of `repository` named `name` at `version`
    /// (`VERSION-RELEASE`, an epoch left out), of any architecture.
    /// Reads the whole table: for a command, not for the request path.
    pub fn find(&self, repository: &str, name: &str, version: &str) -> Option<String> {
        let txn = self.db.begin_read().ok()?;
        let table = txn.open_table(PACKAGES).ok()?;
        let prefix = format!("{repository}/");
        let wanted = |nevra: &str| {
            let Some(rest) = nevra.strip_prefix(name).and_then(|rest| rest.strip_prefix('-')) else { return false };
            let rest = rest.split_once(':').map_or(rest, |(_, rest)| rest);
            rest.strip_prefix(version).is_some_and(|arch| arch.starts_with('.') && !arch[1..].contains('-'))
        };
        let rows = table.range(prefix.as_str()..).ok()?;
        rows.filter_map(Result::ok)
            .take_while(|(key, _)| key.value().starts_with(&prefix))
            .find(|(_, value)| Listed::decode(value.value()).is_some_and(|listed| wanted(&listed.nevra)))
            .map(|(key, _)| key.value()[prefix.len()..].to_owned())
    }

    /// How many packages the index knows.
    pub fn count(&self) -> u64 {
        self.db.begin_read().ok().and_then(|txn| txn.open_table(PACKAGES).ok()?.len().ok()).unwrap_or(0)
    }

    /// Learns every package `primary` (decompressed, checksum
    /// `primary_checksum`) lists for `root` of `repository`; `path_of` says
    /// where below the repository a package is (`None`: not below it, an
    /// `xml:base` elsewhere). Blocking; memory stays bounded however long
    /// the metadata is. Returns how many were learnt.
    pub fn learn(
        &self,
        repository: &str,
        root: &str,
        primary_checksum: &str,
        primary: impl BufRead,
        path_of: impl Fn(&Package) -> Option<String>,
    ) -> Result<usize, IndexError> {
        let mut batch: Vec<(String, String)> = Vec::with_capacity(LEARN_BATCH);
        let (mut learnt, mut failure) = (0, None);
        let read = primary::read(primary, |package| {
            if failure.is_some() {
                return;
            }
            let (Some(path), Some(checksum)) = (path_of(&package), package.checksum.clone()) else { return };
            let listed = Listed { checksum, size: package.size, time_file: package.time_file, nevra: package.nevra() };
            batch.push((format!("{repository}/{path}"), listed.encode()));
            if batch.len() == LEARN_BATCH {
                match self.write(&mut batch, Durability::None) {
                    Ok(n) => learnt += n,
                    Err(e) => failure = Some(e),
                }
            }
        });
        if let Some(failure) = failure {
            return Err(failure);
        }
        read.map_err(|e| self.fail(format!("reading primary metadata of {repository}/{root}: {e}")))?;
        learnt += self.write(&mut batch, Durability::None)?;
        let mut txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        txn.set_durability(Durability::Immediate);
        {
            let mut table = txn.open_table(LEARNT).map_err(|e| self.fail(e))?;
            table.insert(format!("{repository}/{root}").as_str(), primary_checksum).map_err(|e| self.fail(e))?;
        }
        txn.commit().map_err(|e| self.fail(e))?;
        Ok(learnt)
    }

    fn write(&self, batch: &mut Vec<(String, String)>, durability: Durability) -> Result<usize, IndexError> {
        let mut txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        txn.set_durability(durability);
        {
            let mut table = txn.open_table(PACKAGES).map_err(|e| self.fail(e))?;
            for (key, value) in batch.iter() {
                table.insert(key.as_str(), value.as_str()).map_err(|e| self.fail(e))?;
            }
        }
        txn.commit().map_err(|e| self.fail(e))?;
        let n = batch.len();
        batch.clear();
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_learnt_are_found_by_path_and_kept_over_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rpm-index.redb");
        {
            let index = RpmIndex::open(&path).unwrap();
            let primary = super::super::primary::tests::PRIMARY.as_bytes();
            let learnt = index
                .learn("internal", "el9", "abc", primary, |package| {
                    package.base.is_none().then(|| format!("el9/{}", package.href))
                })
                .unwrap();
            assert_eq!(learnt, 1, "the package at another host is not below the repository");
            assert!(index.learnt("internal", "el9", "abc"));
            assert!(!index.learnt("internal", "el9", "def"));
        }
        let index = RpmIndex::open(&path).unwrap();
        let listed = index.package("internal", "el9/Packages/h/hello-1.0-1.noarch.rpm").unwrap();
        assert_eq!(listed.checksum.algorithm, Algorithm::Sha256);
        assert_eq!((listed.size, listed.time_file), (Some(6000), Some(1765000000)));
        assert_eq!(listed.nevra, "hello-1.0-1.noarch");
        assert_eq!(index.package("other", "el9/Packages/h/hello-1.0-1.noarch.rpm"), None);
        assert_eq!(index.count(), 1);
        assert_eq!(index.find("internal", "hello", "1.0-1").as_deref(), Some("el9/Packages/h/hello-1.0-1.noarch.rpm"));
        assert_eq!(index.find("internal", "hello", "1.0-2"), None);
        assert_eq!(index.find("internal", "hell", "1.0-1"), None);
    }
}
