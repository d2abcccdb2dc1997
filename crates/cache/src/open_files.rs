//! Open handles of recently served blobs, so a hit costs a positioned read
//! and no `open`/`close`: the path walk of `open` was an eighth of the CPU
//! time of small hits. Safe because a blob never changes under its name
//! (its name is its SHA-256); a handle is dropped when its blob is deleted,
//! so deleted bodies do not hold disk space.

use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, RwLock};

/// A bounded map of blob hash → open handle.
#[derive(Debug)]
pub struct OpenFiles {
    files: RwLock<HashMap<String, Arc<File>>>,
    capacity: usize,
}

impl OpenFiles {
    /// A cache holding at most `capacity` handles (0: none).
    pub fn new(capacity: usize) -> Self {
        OpenFiles { files: RwLock::new(HashMap::new()), capacity }
    }

    /// The handle of `sha256`, opening it with `open` when not held.
    pub fn get_or_open(
        &self,
        sha256: &str,
        open: impl FnOnce() -> std::io::Result<File>,
    ) -> std::io::Result<Arc<File>> {
        if let Some(file) = self.files.read().unwrap_or_else(|p| p.into_inner()).get(sha256) {
            return Ok(Arc::clone(file));
        }
        let file = Arc::new(open()?);
        if self.capacity > 0 {
            let mut files = self.files.write().unwrap_or_else(|p| p.into_inner());
            if files.len() >= self.capacity {
                // More blobs served than handles kept: one held handle, any,
                // makes room. No recency is kept on every hit, and closing
                // all of them at once would hold the lock for thousands of
                // closes while hits wait.
                let any = files.keys().next().cloned();
                if let Some(any) = any {
                    files.remove(&any);
                }
            }
            files.insert(sha256.to_string(), Arc::clone(&file));
        }
        Ok(file)
    }

    /// Forgets the handle of a deleted blob.
    pub fn forget(&self, sha256: &str) {
        self.files.write().unwrap_or_else(|p| p.into_inner()).remove(sha256);
    }
}

/// How many handles to keep: a quarter of the process's file limit, at most
/// 4096, so clients and upstreams keep the rest.
pub fn default_capacity() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct passed; no other effect.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let soft = if known { limit.rlim_cur as usize } else { 1024 };
    (soft / 4).min(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_reused_bounded_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob");
        std::fs::write(&path, b"x").unwrap();
        let cache = OpenFiles::new(2);
        let mut opened = 0;
        let mut open = || {
            opened += 1;
            File::open(&path)
        };
        let a = cache.get_or_open("a", &mut open).unwrap();
        let again = cache.get_or_open("a", &mut open).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        cache.get_or_open("b", &mut open).unwrap();
        cache.get_or_open("c", &mut open).unwrap();
        assert!(cache.files.read().unwrap().len() <= 2);
        cache.forget("c");
        assert!(!cache.files.read().unwrap().contains_key("c"));
        assert_eq!(opened, 3);
    }
}
