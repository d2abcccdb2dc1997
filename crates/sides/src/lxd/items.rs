//! What the LXD side has learnt of each remote: the products files its
//! current index names, and the sha256 and size of every image file a
//! products file named, kept beside the cache (`lxd-items.redb`) so a
//! restart keeps it.
//!
//! Each generation's items replace the previous one's, except the files of
//! older generations that are cached: a daemon holds a products file for an
//! hour or more (longer offline) and may still ask for a serial the
//! upstream has since deleted. Held in memory too (a remote's products
//! files name some tens of thousands of files), so a hit reads no disk.

use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable, TableDefinition};

use super::stream::Sum;

const FILES: TableDefinition<&str, &[u8]> = TableDefinition::new("files");
const PRODUCTS: TableDefinition<&str, &[u8]> = TableDefinition::new("products");

/// A failure of the LXD side's store.
#[derive(Debug, thiserror::Error)]
#[error("lxd items {}: {message}", path.display())]
pub struct ItemsError {
    path: PathBuf,
    message: String,
}

/// The persistent store of what each remote's products files say.
pub struct Items {
    path: PathBuf,
    db: Database,
    known: RwLock<Known>,
}

#[derive(Default)]
struct Known {
    /// `remote\npath` → what the file must be.
    files: HashMap<String, Sum>,
    /// remote → the products files its current index names.
    products: HashMap<String, Vec<String>>,
}

impl std::fmt::Debug for Items {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Items").field("path", &self.path).finish_non_exhaustive()
    }
}

fn file_key(remote: &str, path: &str) -> String {
    format!("{remote}\n{path}")
}

impl Items {
    /// Opens or creates the store and loads it.
    pub fn open(path: &Path) -> Result<Items, ItemsError> {
        let fail = |e: &dyn std::fmt::Display| ItemsError { path: path.to_path_buf(), message: e.to_string() };
        let db = Database::create(path).map_err(|e| fail(&e))?;
        let txn = db.begin_write().map_err(|e| fail(&e))?;
        txn.open_table(FILES).map_err(|e| fail(&e))?;
        txn.open_table(PRODUCTS).map_err(|e| fail(&e))?;
        txn.commit().map_err(|e| fail(&e))?;
        let mut known = Known::default();
        let txn = db.begin_read().map_err(|e| fail(&e))?;
        for row in txn.open_table(FILES).map_err(|e| fail(&e))?.iter().map_err(|e| fail(&e))? {
            let (key, value) = row.map_err(|e| fail(&e))?;
            if let Some(sum) = decode(value.value()) {
                known.files.insert(key.value().to_string(), sum);
            }
        }
        for row in txn.open_table(PRODUCTS).map_err(|e| fail(&e))?.iter().map_err(|e| fail(&e))? {
            let (remote, value) = row.map_err(|e| fail(&e))?;
            let paths: Vec<String> = serde_json::from_slice(value.value()).unwrap_or_default();
            known.products.insert(remote.value().to_string(), paths);
        }
        Ok(Items { path: path.to_path_buf(), db, known: RwLock::new(known) })
    }

    /// What the file at `path` of `remote` must be, if a products file
    /// named it.
    pub fn file(&self, remote: &str, path: &str) -> Option<Sum> {
        self.known.read().files.get(&file_key(remote, path)).cloned()
    }

    /// A remote and a path a products file named the file `sha256` by.
    pub fn named(&self, sha256: &str) -> Option<(String, String)> {
        let known = self.known.read();
        let (key, _) = known.files.iter().filter(|(_, sum)| sum.sha256 == sha256).min_by_key(|(key, _)| *key)?;
        let (remote, path) = key.split_once('\n')?;
        Some((remote.to_owned(), path.to_owned()))
    }

    /// Whether `path` is a products file `remote`'s current index names.
    pub fn is_products(&self, remote: &str, path: &str) -> bool {
        let known = self.known.read();
        known.products.get(remote).is_some_and(|paths| paths.iter().any(|p| p == path))
    }

    /// Makes `products` and `files` `remote`'s current generation, keeping
    /// the files of older ones for which `kept` says the bytes are cached.
    /// Blocking.
    pub fn adopt(
        &self,
        remote: &str,
        products: &[String],
        files: &BTreeMap<String, Sum>,
        kept: impl Fn(&Sum) -> bool,
    ) -> Result<(), ItemsError> {
        let fail = |e: &dyn std::fmt::Display| ItemsError { path: self.path.clone(), message: e.to_string() };
        let mut known = self.known.write();
        let prefix = file_key(remote, "");
        let dropped: Vec<String> = known
            .files
            .iter()
            .filter(|(key, sum)| key.starts_with(&prefix) && !files.contains_key(&key[prefix.len()..]) && !kept(sum))
            .map(|(key, _)| key.clone())
            .collect();
        let txn = self.db.begin_write().map_err(|e| fail(&e))?;
        {
            let mut table = txn.open_table(FILES).map_err(|e| fail(&e))?;
            for (path, sum) in files {
                table.insert(file_key(remote, path).as_str(), encode(sum).as_slice()).map_err(|e| fail(&e))?;
            }
            for key in &dropped {
                table.remove(key.as_str()).map_err(|e| fail(&e))?;
            }
            let listed = serde_json::to_vec(products).map_err(|e| fail(&e))?;
            txn.open_table(PRODUCTS).map_err(|e| fail(&e))?.insert(remote, listed.as_slice()).map_err(|e| fail(&e))?;
        }
        txn.commit().map_err(|e| fail(&e))?;
        for key in dropped {
            known.files.remove(&key);
        }
        for (path, sum) in files {
            known.files.insert(file_key(remote, path), sum.clone());
        }
        known.products.insert(remote.to_string(), products.to_vec());
        Ok(())
    }

    /// How many files are known, over every remote.
    pub fn count(&self) -> usize {
        self.known.read().files.len()
    }
}

/// A sum as stored: the size (8 bytes, little-endian), then the hex.
fn encode(sum: &Sum) -> Vec<u8> {
    let mut bytes = sum.size.to_le_bytes().to_vec();
    bytes.extend_from_slice(sum.sha256.as_bytes());
    bytes
}

fn decode(bytes: &[u8]) -> Option<Sum> {
    let (size, sha256) = bytes.split_at_checked(8)?;
    let size = u64::from_le_bytes(size.try_into().ok()?);
    let sha256 = std::str::from_utf8(sha256).ok()?;
    (sha256.len() == 64).then(|| Sum { sha256: sha256.to_string(), size })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(c: char, size: u64) -> Sum {
        Sum { sha256: c.to_string().repeat(64), size }
    }

    #[test]
    fn a_new_generation_keeps_the_older_files_that_are_cached_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lxd-items.redb");
        let products = vec!["streams/v1/p.json".to_string()];
        {
            let items = Items::open(&path).unwrap();
            let first: BTreeMap<_, _> = [("old/a".to_string(), sum('a', 1)), ("old/b".to_string(), sum('b', 2))].into();
            items.adopt("ubuntu", &products, &first, |_| false).unwrap();
            let second: BTreeMap<_, _> = [("new/c".to_string(), sum('c', 3))].into();
            items.adopt("ubuntu", &products, &second, |sum| sum.sha256.starts_with('a')).unwrap();
            items.adopt("other", &[], &first, |_| false).unwrap();
        }
        let items = Items::open(&path).unwrap();
        assert_eq!(items.file("ubuntu", "old/a"), Some(sum('a', 1)), "cached: kept");
        assert_eq!(items.file("ubuntu", "old/b"), None, "not cached: dropped");
        assert_eq!(items.file("ubuntu", "new/c"), Some(sum('c', 3)));
        assert_eq!(items.file("other", "old/b"), Some(sum('b', 2)), "per remote");
        assert!(items.is_products("ubuntu", "streams/v1/p.json"));
        assert!(!items.is_products("other", "streams/v1/p.json"));
        assert_eq!(items.count(), 4);
    }
}
