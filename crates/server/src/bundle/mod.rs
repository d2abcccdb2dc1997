//! Bundles: what a build needs from the cache, carried to another pkgproxy
//! (one in an air-gapped network) as one tar stream, and taken in there
//! with the same checks as a fetch.
//!
//! A bundle is, in this order:
//!
//! ```text
//! pkgproxy-bundle.json          the manifest: every item, in the order
//!                               they are taken in (what proves an item
//!                               comes before it: an InRelease before the
//!                               indexes it lists, a checksum database
//!                               record before the module it covers)
//! pkgproxy-bundle.json.sha256   the manifest's SHA-256
//! pkgproxy-bundle.json.sig      who wrote it: a signature over that
//!                               SHA-256 (see [`crate::signing`]); a bundle
//!                               without one is taken only when the admin
//!                               says so
//! policy/malicious.tsv          the fleet's malicious-package records
//!                               (`export --policy`), when the manifest
//!                               names them with their SHA-256 (so the
//!                               signature covers them too)
//! blobs/<sha256>                each item's bytes, once per hash, in the
//!                               order of the first item that has them
//! ```
//!
//! The malicious-package records are taken in whole, replacing those an
//! earlier bundle brought, and put in force at once (`[policy]` as written,
//! with them).
//!
//! An item with a URL is taken in as a fetch of that URL; one without is
//! either a proof (a checksum database record), read by the fetch of the
//! next item with a URL, or a side's record of an answer (a snap's store
//! answer), which the side reads and keeps.
//!
//! Exporting streams: the manifest is made from the cache's index, the
//! bytes are read from the store as they are written out. Importing
//! streams too: each blob is staged in a file beside the cache's own
//! downloads, taken in through the request path (see
//! [`crate::proxy::supplied`]) and removed.

pub mod export;
pub mod import;
mod manifest;
mod records;

use serde::{Deserialize, Serialize};

/// The manifest's name in the tar.
pub const MANIFEST: &str = "pkgproxy-bundle.json";
/// The name of the manifest's SHA-256 (hex) in the tar.
pub const MANIFEST_SUM: &str = "pkgproxy-bundle.json.sha256";
/// The name of the manifest's signature in the tar.
pub const SIGNATURE: &str = "pkgproxy-bundle.json.sig";
/// Where the blobs are, by their SHA-256.
pub const BLOBS: &str = "blobs/";
/// The manifest's format.
pub const FORMAT: u32 = 1;
/// The largest manifest an import reads (about a million items).
pub const MANIFEST_LIMIT: u64 = 512 * 1024 * 1024;
/// The name in the tar of the fleet's malicious-package records.
pub const MALICIOUS: &str = "policy/malicious.tsv";
/// The largest malicious-package index an import reads (npm's 210,000
/// records take some 20 MB).
pub const MALICIOUS_LIMIT: u64 = 1024 * 1024 * 1024;

/// What a bundle holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The pkgproxy version that wrote it.
    pub pkgproxy: String,
    /// When it was written (Unix seconds).
    pub created: u64,
    /// Its items, in the order they are taken in.
    pub items: Vec<Item>,
    /// The fleet's malicious-package records it carries ([`MALICIOUS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub malicious: Option<Carried>,
}

/// A file a bundle carries besides the cache's entries, named by the
/// manifest with its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carried {
    /// Its bytes' SHA-256 (lower-case hex).
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
}

/// One cache entry in a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// The request a client makes for it; `None` for what pkgproxy fetches
    /// itself to check the next item with a URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its cache key where it was exported.
    pub key: String,
    /// Its bytes' SHA-256 (lower-case hex): `blobs/<sha256>`.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// The upstream's headers describing it.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The upstream's `ETag`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The upstream's `Last-Modified`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// When it was fetched (Unix seconds).
    pub fetched_at: u64,
    /// A side's record of an answer (a snap's store answer, replayed
    /// offline), kept as it is once the side has read it as one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub record: bool,
}

impl Item {
    /// The blob's name in the tar.
    pub fn blob_name(&self) -> String {
        format!("{BLOBS}{}", self.sha256)
    }

    /// Who people are told about: its URL, or its key.
    pub fn label(&self) -> &str {
        self.url.as_deref().unwrap_or(&self.key)
    }
}

/// Whether `sha256` is a SHA-256 in lower-case hex.
fn is_sha256(sha256: &str) -> bool {
    sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
