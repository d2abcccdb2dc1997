//! What the npm side's keys name, for the page listing the cache: a
//! tarball is a package's version, its documents are its metadata, and
//! what a client's token brought is private.

use super::keys::{KeyKind, Keyed, Space};
use super::{packed, Npm};
use crate::role::reporting::{Named, Reporting};

impl Reporting for Npm {
    fn noun(&self) -> &'static str {
        "packages"
    }

    fn names(&self, key: &str) -> Named {
        if key.starts_with(&packed::prefix("")) {
            return Named::Other;
        }
        let config = self.config();
        let Some(keyed) = Keyed::parse(&config, key) else { return Named::Other };
        if keyed.space == Space::Private {
            return Named::Private;
        }
        match keyed.kind {
            KeyKind::Tarball(tarball) => Named::File { package: tarball.name.to_string(), version: tarball.version },
            KeyKind::Document(name, _) | KeyKind::Version(name, _) => Named::Metadata { package: name.to_string() },
        }
    }
}
