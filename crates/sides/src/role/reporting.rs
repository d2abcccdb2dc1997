//! The reporting role: what a side's cache keys name as its users think of
//! them (this key is package X version Y), for the page that lists what
//! pkgproxy holds. A side that writes it hands it out through
//! [`crate::Side::roles`]; the page takes the role alone, and a side
//! without it is shown as totals only.
//!
//! It reads the key, and at most the index's entry of a key whose name
//! alone cannot tell who may read it (a registry's tag): never a body (a
//! listing walks every key of the index). It must tell content only some
//! clients may read ([`Named::Private`]) apart, which the page never
//! shows nor counts by name.

/// What a side tells of its cache keys.
pub trait Reporting: Send + Sync {
    /// What the side's users call what it holds ("packages", "crates",
    /// "modules", "projects").
    fn noun(&self) -> &'static str;

    /// What the side calls what names no package of its own
    /// ([`Named::Other`]).
    fn others(&self) -> &'static str {
        "indexes and other metadata"
    }

    /// What `key`, one of the side's keys, names. It may look at the
    /// index for the key (blocking), never at a body.
    fn names(&self, key: &str) -> Named;
}

/// What one cache key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// A file of one version of a package (a tarball, a crate, a wheel, a
    /// module's zip, a `.deb`).
    File {
        /// The package, as its users write it.
        package: String,
        /// Its version (with what else tells its files apart, such as an
        /// architecture), when the key says.
        version: String,
    },
    /// What describes a package rather than being one of its files (its
    /// document, its page, its index file, its list of versions): summed
    /// under the package.
    Metadata {
        /// The package it describes.
        package: String,
    },
    /// What names no package (an archive's index files, a registry's
    /// `config.json`, a compressed form): summed as the side's metadata.
    Other,
    /// Content only a client's own credentials may read: never listed,
    /// never counted by name.
    Private,
}
