//! The exporting role: what a bundle carries before a key so that taking
//! the bundle in checks it (a pool file's archive `Release` and `Packages`
//! indexes; a tarball's package document).

/// What proves a key, carried with it.
pub trait Exporting: Send + Sync {
    /// The cache keys of what proves what is cached under `key`, beyond
    /// its prerequisites. Only what the cache holds is carried.
    fn proving_keys(&self, key: &str) -> Vec<String>;
}
