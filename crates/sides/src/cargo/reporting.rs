//! What the cargo side's keys name, for the page listing the cache: a
//! `.crate` is a crate's version, its index file is its metadata, and
//! what a client's credentials brought (or all of a registry that
//! requires them) is private.

use super::{Cargo, Space};
use crate::role::reporting::{Named, Reporting};

impl Reporting for Cargo {
    fn noun(&self) -> &'static str {
        "crates"
    }

    fn names(&self, key: &str) -> Named {
        let config = self.config();
        let Some(keyed) = config.keyed(key) else { return Named::Other };
        if keyed.space == Space::Private || self.auth_required(keyed.registry) {
            return Named::Private;
        }
        named_below(keyed.below)
    }
}

/// What a key names below its registry: `crates/NAME/VERSION/SHA256`, an
/// index file `index/.../NAME`, or `config.json`.
fn named_below(below: &str) -> Named {
    if let Some(download) = below.strip_prefix("crates/") {
        let mut parts = download.split('/');
        return match (parts.next(), parts.next()) {
            (Some(name), Some(version)) => Named::File { package: name.to_owned(), version: version.to_owned() },
            _ => Named::Other,
        };
    }
    match below.strip_prefix("index/").and_then(|file| file.rsplit('/').next()) {
        Some(name) if !name.is_empty() && name != "config.json" => Named::Metadata { package: name.to_owned() },
        _ => Named::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crate_names_its_version_and_an_index_file_its_crate() {
        let file = |package: &str, version: &str| Named::File { package: package.into(), version: version.into() };
        assert_eq!(named_below(&format!("crates/serde/1.0.229/{}", "a".repeat(64))), file("serde", "1.0.229"));
        assert_eq!(named_below("index/se/rd/serde"), Named::Metadata { package: "serde".into() });
        assert_eq!(named_below("index/1/a"), Named::Metadata { package: "a".into() });
        assert_eq!(named_below("config.json"), Named::Other);
        assert_eq!(named_below("index/config.json"), Named::Other);
    }
}
