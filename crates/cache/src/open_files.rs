//! Open handles of recently served blobs, so a hit costs a positioned read
//! and no `open`/`close`: the path walk of `open` was an eighth of the CPU
//! time of small hits. Safe because a blob never changes under its name
//! (its name is its SHA-256); a handle is dropped when its blob is deleted,
//! so deleted bodies do not hold disk space.

use parking_lot::RwLock;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::sync::Arc;

/// A bounded map of blob hash → open handle.
#[derive(Debug)]
pub struct OpenFiles {
    held: RwLock<Held>,
    capacity: usize,
}

/// The handles, and the order they were opened in: when full, the oldest
/// makes room. No recency is kept on every hit (a hit takes the read
/// lock only), and finding the one to close costs the same however many
/// are held: when hits spread over many more blobs than handles, every
/// hit opens one and closes another.
#[derive(Debug, Default)]
struct Held {
    files: HashMap<String, Arc<File>>,
    /// The held hashes, oldest first.
    opened: VecDeque<String>,
}

impl OpenFiles {
    /// A cache holding at most `capacity` handles (0: none).
    pub fn new(capacity: usize) -> Self {
        OpenFiles { held: RwLock::new(Held::default()), capacity }
    }

    /// The handle of `sha256`, opening it with `open` when not held.
    pub fn get_or_open(
        &self,
        sha256: &str,
        open: impl FnOnce() -> std::io::Result<File>,
    ) -> std::io::Result<Arc<File>> {
        if let Some(file) = self.held.read().files.get(sha256) {
            return Ok(Arc::clone(file));
        }
        let file = Arc::new(open()?);
        if self.capacity > 0 {
            let closed = {
                let mut held = self.held.write();
                held.insert(sha256, &file, self.capacity)
            };
            // Closed, if this held the last reference, outside the lock.
            drop(closed);
        }
        Ok(file)
    }

    /// Forgets the handle of a deleted blob.
    pub fn forget(&self, sha256: &str) {
        let forgotten = self.held.write().remove(sha256);
        drop(forgotten);
    }
}

impl Held {
    /// Holds `file` as `sha256`'s handle; returns the handles that made
    /// room for it, for the caller to close.
    fn insert(&mut self, sha256: &str, file: &Arc<File>, capacity: usize) -> Vec<Arc<File>> {
        if self.files.contains_key(sha256) {
            return Vec::new();
        }
        let mut closed = Vec::new();
        while self.opened.len() >= capacity {
            let Some(oldest) = self.opened.pop_front() else { break };
            closed.extend(self.files.remove(&oldest));
        }
        self.files.insert(sha256.to_string(), Arc::clone(file));
        self.opened.push_back(sha256.to_string());
        closed
    }

    /// Stops holding `sha256`'s handle; returns it, for the caller to close.
    /// Rare (a blob deleted), so the order is searched.
    fn remove(&mut self, sha256: &str) -> Option<Arc<File>> {
        let removed = self.files.remove(sha256)?;
        self.opened.retain(|held| held != sha256);
        Some(removed)
    }
}

/// How many handles to keep: a quarter of the process's file limit, at most
/// 4096, so clients and upstreams keep the rest.
pub fn default_capacity() -> usize {
    // No soft limit (`None`, unlimited) leaves the 4096 cap.
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
    usize::try_from(soft / 4).unwrap_or(usize::MAX).min(4096)
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
        let held = |name: &str| cache.held.read().files.contains_key(name);
        assert!(!held("a") && held("b") && held("c"), "the oldest made room");
        cache.forget("c");
        assert!(!held("c"));
        cache.get_or_open("c", &mut open).unwrap();
        cache.get_or_open("d", &mut open).unwrap();
        assert!(held("c") && held("d") && !held("b"));
        assert!(cache.held.read().opened.len() <= 2);
        assert_eq!(opened, 5);
    }
}
