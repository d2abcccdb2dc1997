//! The cache's listing: one walk of a side's keys in the index (never a
//! body), each key named by the side's reporting role and summed under its
//! package and version. Only what matches the search is kept while
//! walking, and only the most recently used packages and versions are
//! listed, with the count of the rest, so the page stays small whatever
//! the cache holds. Private content is counted, never named.

use std::collections::HashMap;

use pkgproxy_cache::{Cache, Entry, StoreError, Use, NANOS_PER_SEC};
use pkgproxy_control::{BrowsePackage, BrowseSide, BrowseVersion};
use pkgproxy_sides::role::{Named, Reporting};
use pkgproxy_sides::Side;

/// How much of a side the listing shows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Packages listed per side.
    pub packages: usize,
    /// Versions listed per package.
    pub versions: usize,
    /// Packages summed per side at most, so that a walk of a cache of
    /// millions holds a bounded map: the entries of any further package
    /// are only counted.
    pub grouped: usize,
}

/// A package as the walk sums it.
#[derive(Debug, Default)]
struct Package {
    metadata_bytes: u64,
    metadata_hits: u64,
    metadata_use: u64,
    versions: HashMap<String, BrowseVersion>,
}

/// `side`'s part of the cache, its packages narrowed to those whose name
/// holds `query` (any case). Blocking: it reads the side's keys in the
/// index.
pub fn side(cache: &Cache, side: &dyn Side, query: &str, limits: Limits) -> Result<BrowseSide, StoreError> {
    let reporting = side.roles().reporting;
    let mut listed = BrowseSide {
        side: side.id().to_string(),
        noun: reporting.map_or("entries", Reporting::noun).to_string(),
        other_noun: reporting.map_or("indexes and other metadata", Reporting::others).to_string(),
        itemised: reporting.is_some(),
        entries: 0,
        bytes: 0,
        packages: Vec::new(),
        more: 0,
        other_entries: 0,
        other_bytes: 0,
        private_entries: 0,
        ungrouped_entries: 0,
    };
    let query = query.to_lowercase();
    let mut packages: HashMap<String, Package> = HashMap::new();
    cache.visit_used(&format!("{}/", side.id()), |key, entry, used| {
        listed.entries += 1;
        listed.bytes += entry.size;
        let Some(reporting) = reporting else { return };
        match reporting.names(key) {
            Named::Private => listed.private_entries += 1,
            Named::Other => {
                listed.other_entries += 1;
                listed.other_bytes += entry.size;
            }
            Named::File { package, .. } | Named::Metadata { package }
                if packages.len() >= limits.grouped
                    && !packages.contains_key(&package)
                    && matches(&package, &query) =>
            {
                listed.ungrouped_entries += 1;
            }
            Named::File { package, version } if matches(&package, &query) => {
                let version = packages
                    .entry(package)
                    .or_default()
                    .versions
                    .entry(version.clone())
                    .or_insert_with(|| BrowseVersion { version, bytes: 0, hits: 0, last_use: 0 });
                add(version, entry, used);
            }
            Named::Metadata { package } if matches(&package, &query) => {
                let package = packages.entry(package).or_default();
                package.metadata_bytes += entry.size;
                package.metadata_hits += used.hits;
                package.metadata_use = package.metadata_use.max(seconds(used));
            }
            Named::File { .. } | Named::Metadata { .. } => {}
        }
    })?;
    if !query.is_empty() {
        (listed.other_entries, listed.other_bytes) = (0, 0);
    }
    let mut packages: Vec<BrowsePackage> =
        packages.into_iter().map(|(name, package)| summed(name, package, limits.versions)).collect();
    packages.sort_by(|a, b| b.last_use.cmp(&a.last_use).then_with(|| a.name.cmp(&b.name)));
    listed.more = packages.len().saturating_sub(limits.packages) as u64;
    packages.truncate(limits.packages);
    listed.packages = packages;
    Ok(listed)
}

fn matches(name: &str, query: &str) -> bool {
    query.is_empty() || name.to_lowercase().contains(query)
}

fn seconds(used: Use) -> u64 {
    used.last_use / NANOS_PER_SEC
}

fn add(version: &mut BrowseVersion, entry: &Entry, used: Use) {
    version.bytes += entry.size;
    version.hits += used.hits;
    version.last_use = version.last_use.max(seconds(used));
}

/// `package` as listed: its totals, and its most recently used versions.
fn summed(name: String, package: Package, limit: usize) -> BrowsePackage {
    let mut versions: Vec<BrowseVersion> = package.versions.into_values().collect();
    let bytes = package.metadata_bytes + versions.iter().map(|version| version.bytes).sum::<u64>();
    let hits = package.metadata_hits + versions.iter().map(|version| version.hits).sum::<u64>();
    let last_use = versions.iter().map(|version| version.last_use).fold(package.metadata_use, u64::max);
    versions.sort_by(|a, b| b.last_use.cmp(&a.last_use).then_with(|| b.version.cmp(&a.version)));
    let more_versions = versions.len().saturating_sub(limit) as u64;
    versions.truncate(limit);
    BrowsePackage { name, bytes, metadata_bytes: package.metadata_bytes, hits, last_use, versions, more_versions }
}
