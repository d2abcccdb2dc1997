//! The cache's maintenance over the control sockets: list entries (either
//! socket), remove the entries matching a pattern and evict now (admin
//! socket only: the daemon does it itself, so it never races its own
//! writes).
//!
//! A pattern matches whole keys, `*` standing for any run of characters
//! (`apt/*/pool/*.deb`); no pattern matches every key.

use std::sync::Arc;

use pkgproxy_cache::Evicted;
use pkgproxy_control::{CacheEntry, Removed};

use crate::state::State;

/// The entries of `side` (every side without it) whose key matches
/// `pattern`, least recently used first.
pub fn list(state: &State, side: Option<&str>, pattern: Option<&str>) -> Vec<CacheEntry> {
    let mut listed: Vec<CacheEntry> = state
        .cache
        .entries()
        .into_iter()
        .filter(|(key, _, _)| side.is_none_or(|side| side_of(key) == side))
        .filter(|(key, _, _)| pattern.is_none_or(|pattern| matches(pattern, key)))
        .map(|(key, entry, last_use)| CacheEntry {
            side: side_of(&key).to_string(),
            key,
            size: entry.size,
            last_use,
            class: entry.class.as_str().to_string(),
        })
        .collect();
    listed.sort_by(|a, b| a.last_use.cmp(&b.last_use).then_with(|| a.key.cmp(&b.key)));
    listed
}

/// Removes the entries whose key matches `pattern`. Blocking.
pub fn remove(state: &State, pattern: &str) -> Result<Removed, String> {
    let keys: Vec<String> = list(state, None, Some(pattern)).into_iter().map(|entry| entry.key).collect();
    state.cache.remove_all(&keys).map(removed).map_err(|error| error.to_string())
}

/// Reads every blob back and repairs what is wrong. Blocking, and long.
pub fn verify(state: &Arc<State>) -> Result<pkgproxy_control::CacheVerified, String> {
    let scrubbed = state.cache.scrub().map_err(|error| error.to_string())?;
    Ok(pkgproxy_control::CacheVerified {
        checked: scrubbed.checked,
        bad: scrubbed.bad,
        entries_removed: scrubbed.entries_removed,
        orphans_removed: scrubbed.orphans_removed,
        temps_removed: scrubbed.temps_removed,
        bytes_freed: scrubbed.bytes_freed,
    })
}

/// Evicts now, down to the quota's low-water mark. Blocking.
pub fn collect(state: &Arc<State>) -> Result<Removed, String> {
    let obsolete = |key: &str, entry: &pkgproxy_cache::Entry| state.sides.obsolete(key, entry);
    state.cache.collect(&state.settings.quota, &obsolete).map(removed).map_err(|error| error.to_string())
}

fn removed(evicted: Evicted) -> Removed {
    Removed { entries: evicted.entries, bytes: evicted.bytes }
}

/// The side a key belongs to: its first part (`apt/...`, `registry/...`).
fn side_of(key: &str) -> &str {
    key.split('/').next().unwrap_or("")
}

/// Whether `key` is matched whole by `pattern`, `*` standing for any run
/// of characters.
pub fn matches(pattern: &str, key: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return key == pattern;
    }
    if !key.starts_with(first) || !key[first.len()..].ends_with(last) || key.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &key[first.len()..key.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_whole_keys_with_stars_for_any_run() {
        assert!(matches("apt/*/pool/*.deb", "apt/debian/pool/main/h/hello/hello_2.10_amd64.deb"));
        assert!(!matches("apt/*/pool/*.deb", "apt/debian/pool/main/h/hello/hello.dsc"));
        assert!(matches("*", "anything"));
        assert!(matches("lxd/file/*", "lxd/file/sha256/ab"));
        assert!(!matches("lxd/file", "lxd/file/sha256/ab"), "whole keys");
        assert!(matches("a*a", "aa") && !matches("a*a", "a"));
        assert!(matches("go/*@v/*.zip", "go/example.com/m/@v/v1.0.0.zip"));
    }
}
