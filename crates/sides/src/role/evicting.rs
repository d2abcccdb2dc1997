//! The evicting role: entries a side knows can never be served again (an
//! apt index file a newer `Release` replaced), which eviction takes first.
//! What the side knows of them is dropped when they are removed by hand.

/// Entries that can never be served again.
pub trait Evicting: Send + Sync {
    /// The key prefixes under which entries may be superseded for good:
    /// eviction looks there first.
    fn superseded_prefixes(&self) -> Vec<String>;

    /// Whether the entry under `key` can never be served again.
    fn superseded(&self, key: &str, entry: &pkgproxy_cache::Entry) -> bool;

    /// The entries under `keys` were removed by hand (`pkgproxyctl cache
    /// rm`): what the side held about them is dropped too. Blocking.
    fn removed(&self, keys: &[String]);
}
