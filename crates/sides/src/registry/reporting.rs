//! What the registry side's keys name, for the page listing the cache: a
//! tag is an image's version (`docker.io/library/alpine` at `3.20`), named
//! only when its manifest is linked publicly in that repository and
//! pkgproxy pulls the registry with no account of its own; manifests and
//! layers by digest are shared by every image that names them, and are
//! summed apart.

use super::links::{Repository, Visibility};
use super::name::Digest;
use super::Registry;
use crate::role::reporting::{Named, Reporting};

impl Reporting for Registry {
    fn noun(&self) -> &'static str {
        "images"
    }

    fn others(&self) -> &'static str {
        "manifests and layers by digest, shared by the images that name them"
    }

    fn names(&self, key: &str) -> Named {
        let Some((registry, repository, tag)) = tag_of(key) else { return Named::Other };
        match self.tag_is_public(registry, repository, key) {
            true => Named::File { package: format!("{registry}/{repository}"), version: tag.to_string() },
            false => Named::Private,
        }
    }
}

impl Registry {
    /// Whether the tag held under `key` names a manifest anyone may read
    /// through `repository`: linked there publicly, and pulled with no
    /// account of pkgproxy's. Blocking: one look at the index.
    fn tag_is_public(&self, registry: &str, repository: &str, key: &str) -> bool {
        if self.config().upstream(registry).is_some_and(|upstream| upstream.credentials.is_some()) {
            return false;
        }
        let Some(entry) = self.cache.lookup(key) else { return false };
        let Ok(digest) = Digest::parse(&format!("sha256:{}", entry.sha256)) else { return false };
        Repository::new(registry, repository).visibility(&self.cache, &digest) == Some(Visibility::Public)
    }
}

/// The registry, repository and tag of a tag's key.
fn tag_of(key: &str) -> Option<(&str, &str, &str)> {
    let (registry, named) = key.strip_prefix("registry/tag/")?.split_once('/')?;
    let (repository, tag) = named.rsplit_once('/')?;
    Some((registry, repository, tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_s_key_names_its_registry_repository_and_tag() {
        assert_eq!(tag_of("registry/tag/docker.io/library/alpine/3.20"), Some(("docker.io", "library/alpine", "3.20")));
        assert_eq!(tag_of("registry/tag/ghcr.io/o/r/s/latest"), Some(("ghcr.io", "o/r/s", "latest")));
        assert_eq!(tag_of("registry/blob/sha256/ab"), None);
    }
}
