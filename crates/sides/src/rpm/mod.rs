//! The RPM side (being built): dnf and yum through pkgproxy. What is here
//! so far reads an RPM repository's chain of checksums: a metalink gives
//! `repomd.xml`'s checksums ([`metalink`]), `repomd.xml` gives each
//! metadata file's ([`repomd`]). The side's routes and roles come on them.

pub mod metalink;
pub mod repomd;
