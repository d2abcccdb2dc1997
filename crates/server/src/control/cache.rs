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
/// `pattern`, least recently used first. Blocking: only the keys under
/// the side's and the pattern's common prefix are read, but that may be
/// the whole index.
pub fn list(state: &State, side: Option<&str>, pattern: Option<&str>) -> Result<Vec<CacheEntry>, String> {
    let mut listed = Vec::new();
    let prefix = walked_prefix(side, pattern);
    let matched =
        |key: &str| side.is_none_or(|side| side_of(key) == side) && pattern.is_none_or(|pattern| matches(pattern, key));
    state
        .cache
        .visit(&prefix, |key, entry, use_order| {
            if matched(key) {
                let listed_entry = CacheEntry {
                    side: side_of(key).to_string(),
                    key: key.to_string(),
                    size: entry.size,
                    last_use: use_order / pkgproxy_cache::NANOS_PER_SEC,
                    class: entry.class.as_str().to_string(),
                };
                listed.push((use_order, listed_entry));
            }
        })
        .map_err(|error| error.to_string())?;
    // In the order of use eviction follows, finer than the seconds shown.
    listed.sort_by_key(|(use_order, _)| *use_order);
    let listed = listed.into_iter().map(|(_, entry)| entry).collect();
    Ok(listed)
}

/// Removes the entries whose key matches `pattern`, and what the sides
/// held about them (an apt suite's Release, with its `InRelease`).
/// Blocking.
pub fn remove(state: &State, pattern: &str) -> Result<Removed, String> {
    let keys: Vec<String> = list(state, None, Some(pattern))?.into_iter().map(|entry| entry.key).collect();
    let gone = state.cache.remove_all(&keys).map(removed).map_err(|error| error.to_string())?;
    state.sides.playing(|roles| roles.evicting).for_each(|(_, evicting)| evicting.removed(&keys));
    Ok(gone)
}

/// The keys a listing has to read: those starting with the pattern's text
/// before its first `*`, or with the side's name.
fn walked_prefix(side: Option<&str>, pattern: Option<&str>) -> String {
    let literal = pattern.map(|pattern| pattern.split('*').next().unwrap_or(""));
    match (side, literal) {
        (_, Some(literal)) if !literal.is_empty() => literal.to_string(),
        (Some(side), _) => format!("{side}/"),
        _ => String::new(),
    }
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

/// How far the verify in progress is.
pub fn verifying(cache: &pkgproxy_cache::Cache) -> pkgproxy_control::VerifyProgress {
    match cache.scrub_reached() {
        Some(reached) => pkgproxy_control::VerifyProgress {
            running: true,
            checked: reached.checked,
            bytes_read: reached.bytes_read,
            bytes_total: reached.bytes_total,
        },
        None => pkgproxy_control::VerifyProgress::default(),
    }
}

/// Evicts now, down to the quota's low-water mark. Blocking.
pub fn collect(state: &Arc<State>) -> Result<Removed, String> {
    state.cache.collect(&state.cache.quota(), &state.sides).map(removed).map_err(|error| error.to_string())
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

    #[test]
    fn a_listing_reads_only_the_keys_its_pattern_or_side_starts_with() {
        assert_eq!(walked_prefix(None, Some("apt/*/pool/*.deb")), "apt/");
        assert_eq!(walked_prefix(Some("go"), Some("go/example.com/*")), "go/example.com/");
        assert_eq!(walked_prefix(Some("go"), Some("*.zip")), "go/");
        assert_eq!(walked_prefix(None, Some("*")), "");
        assert_eq!(walked_prefix(None, None), "");
    }
}
