//! Where things live in the bucket, under the configured prefix:
//! `blobs/sha256/ab/<hex>` for bodies, named by their hash, and
//! `idx/<sha256 of the cache key>.json` for the entries that name them
//! (hashed, so any key is a valid object name), and `lease/<same>.json`
//! for the fetch of a key under way on one node.

use object_store::path::Path;
use sha2::{Digest, Sha256};

/// The bucket's layout under one prefix.
#[derive(Debug, Clone)]
pub struct Layout {
    prefix: String,
}

impl Layout {
    /// The layout under `prefix` (may be empty).
    pub fn new(prefix: &str) -> Self {
        Layout { prefix: prefix.trim_matches('/').to_owned() }
    }

    fn path(&self, rest: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(rest)
        } else {
            Path::from(format!("{}/{rest}", self.prefix))
        }
    }

    /// The body whose SHA-256 is `sha256` (lower-case hex).
    pub fn blob(&self, sha256: &str) -> Path {
        let fan = sha256.get(..2).unwrap_or("00");
        self.path(&format!("blobs/sha256/{fan}/{sha256}"))
    }

    /// The index object of cache key `key`.
    pub fn index(&self, key: &str) -> Path {
        self.path(&format!("idx/{}.json", hex::encode(Sha256::digest(key.as_bytes()))))
    }

    /// The lease of the fetch of cache key `key`.
    pub fn lease(&self, key: &str) -> Path {
        self.path(&format!("lease/{}.json", hex::encode(Sha256::digest(key.as_bytes()))))
    }

    /// Where the leases are.
    pub fn leases(&self) -> Path {
        self.path("lease")
    }

    /// The cluster's offline switch.
    pub fn cluster_mode(&self) -> Path {
        self.path("cluster/offline.json")
    }

    /// The breakers the cluster shares.
    pub fn breakers(&self) -> Path {
        self.path("cluster/breakers.json")
    }

    /// Where the nodes announce themselves.
    pub fn members(&self) -> Path {
        self.path("nodes")
    }

    /// The announcement of node `node`.
    pub fn member(&self, node: &str) -> Path {
        self.path(&format!("nodes/{node}.json"))
    }

    /// The self-test's probe objects.
    pub fn probe(&self, name: &str) -> Path {
        self.path(&format!("probe/{name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_fanned_out_by_hash_under_the_prefix() {
        let layout = Layout::new("/ci/pkgproxy/");
        let sha = "ab".repeat(32);
        assert_eq!(layout.blob(&sha).as_ref(), format!("ci/pkgproxy/blobs/sha256/ab/{sha}"));
        let index = layout.index("apt/deb.debian.org/debian/pool/main/h/hello/hello_2.10.deb");
        assert!(index.as_ref().starts_with("ci/pkgproxy/idx/") && index.as_ref().ends_with(".json"));
        assert_eq!(Layout::new("").blob(&sha).as_ref(), format!("blobs/sha256/ab/{sha}"));
    }
}
