//! The fetches made ahead of clients that are on their way (the request
//! path decides what to fetch ahead): a few at once, so that clients' own
//! requests come first, and each key once.

use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many fetches ahead run at once.
const AT_ONCE: usize = 16;

/// The most keys on their way ahead; beyond, no more are taken.
const KEYS_LIMIT: usize = 1024;

/// The keys on their way ahead, and the turns to fetch them.
#[derive(Debug)]
pub struct Ahead {
    running: Arc<Semaphore>,
    keys: Arc<Mutex<HashSet<String>>>,
}

impl Default for Ahead {
    fn default() -> Self {
        Ahead { running: Arc::new(Semaphore::new(AT_ONCE)), keys: Arc::default() }
    }
}

impl Ahead {
    /// Takes `key` to be fetched ahead, unless it is on its way already or
    /// too many are.
    pub fn claim(&self, key: &str) -> Option<Claim> {
        let mut keys = self.keys.lock();
        if keys.len() >= KEYS_LIMIT || !keys.insert(key.to_owned()) {
            return None;
        }
        Some(Claim { key: key.to_owned(), keys: Arc::clone(&self.keys), running: Arc::clone(&self.running) })
    }
}

/// A key on its way ahead: no longer once dropped.
#[derive(Debug)]
pub struct Claim {
    key: String,
    keys: Arc<Mutex<HashSet<String>>>,
    running: Arc<Semaphore>,
}

impl Claim {
    /// Waits for a turn among the fetches ahead; held while it runs.
    pub async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.running).acquire_owned().await.ok()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.keys.lock().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_on_its_way_once_until_its_claim_is_dropped() {
        let ahead = Ahead::default();
        let claim = ahead.claim("a").expect("the first claim");
        assert!(ahead.claim("a").is_none(), "on its way");
        assert!(ahead.claim("b").is_some());
        drop(claim);
        assert!(ahead.claim("a").is_some(), "free again");
    }
}
