//! What the cache's page on the proxy listener says, as JSON at
//! [`crate::BROWSE_JSON_PATH`] (the page itself is at
//! [`crate::BROWSE_PATH`]): per side, the packages held, their versions,
//! sizes, last use and hits, and the top clients and packages of the last
//! day. Open to every client of the proxy: it names no private content.

use serde::{Deserialize, Serialize};

/// The cache as its page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Browse {
    /// The search the listing was narrowed by (a part of a name, any case).
    pub query: String,
    /// Per side, in the order of the sides.
    pub sides: Vec<BrowseSide>,
    /// The clients served the most of the cache's content over the last
    /// day, most first.
    pub top_clients: Vec<TopClient>,
    /// The packages served the most over the last day, most first.
    pub top_packages: Vec<TopPackage>,
}

/// One side's part of the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowseSide {
    /// The side's name (`npm`, `cargo`).
    pub side: String,
    /// What its users call what it holds (`packages`, `crates`).
    pub noun: String,
    /// Whether the side tells its packages apart; if not, only its totals
    /// are shown.
    pub itemised: bool,
    /// Its entries, private ones included.
    pub entries: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The packages matching the search, most recently used first, up to
    /// the page's limit.
    pub packages: Vec<BrowsePackage>,
    /// How many more packages match than are listed.
    pub more: u64,
    /// What names no package (index files, compressed forms): entries and
    /// bytes, when nothing was searched for.
    pub other_entries: u64,
    /// Their bytes.
    pub other_bytes: u64,
    /// What the side calls them.
    #[serde(default)]
    pub other_noun: String,
    /// Entries only a client's own credentials may read: counted, never
    /// named.
    pub private_entries: u64,
    /// Entries of packages beyond the most a listing groups (the first
    /// ones in key order are): counted, not listed. A search narrows them.
    #[serde(default)]
    pub ungrouped_entries: u64,
}

/// A package held, with its versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowsePackage {
    /// Its name as its users write it.
    pub name: String,
    /// Every byte held for it: its versions' files and its metadata.
    pub bytes: u64,
    /// Of which its metadata (documents, pages, index files).
    pub metadata_bytes: u64,
    /// Hits over all its entries since they were cached.
    pub hits: u64,
    /// When any of its entries was last used (Unix seconds).
    pub last_use: u64,
    /// Its versions held, newest use first, up to the page's limit.
    pub versions: Vec<BrowseVersion>,
    /// How many more versions are held than are listed.
    pub more_versions: u64,
}

/// A version of a package held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowseVersion {
    /// The version (with an architecture, for apt).
    pub version: String,
    /// The bytes of its files.
    pub bytes: u64,
    /// Hits of its files.
    pub hits: u64,
    /// When one of its files was last used (Unix seconds).
    pub last_use: u64,
}

/// A client and how much it was served over the last day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopClient {
    /// Its address.
    pub address: String,
    /// Files served to it from the cache or through it.
    pub requests: u64,
}

/// A package and how often it was served over the last day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopPackage {
    /// Its side.
    pub side: String,
    /// Its name.
    pub name: String,
    /// Files of it served.
    pub requests: u64,
}
