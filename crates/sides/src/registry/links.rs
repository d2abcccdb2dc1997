//! Which repository is known to hold which content, and who may read it
//! there.
//!
//! A registry scopes content to repositories: Docker Hub serves a blob only
//! under a repository that holds it, and a private repository's blobs only
//! to its readers. The cache keeps one copy of each digest whatever named
//! it, so without more a known digest would leak a private layer through
//! any public name. A link `(registry, repository, digest)` records that the
//! upstream served the digest under that repository (or named it in a
//! manifest it served there), and to whom: anyone (public) or only clients
//! with credentials (private). Cached content is served under a repository
//! without asking upstream only through a public link; anything else is
//! confirmed upstream first. Links are cache entries, so they outlive a
//! restart.

use pkgproxy_cache::{Cache, Class};

use super::name::Digest;

/// Who may read content under a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Anyone: pkgproxy's own token (anonymous, or its configured account)
    /// pulls it.
    Public,
    /// Only clients whose own credentials the registry accepts.
    Private,
}

/// The entry header a link's visibility is kept in.
const HEADER: &str = "visibility";

impl Visibility {
    fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Private => "private",
        }
    }
}

/// The links of one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    prefix: String,
}

impl Repository {
    /// The links of `repository` on `registry`.
    pub fn new(registry: &str, repository: &str) -> Repository {
        Repository { prefix: format!("registry/link/{registry}/{repository}") }
    }

    /// The key of the link to `digest`.
    pub fn key(&self, digest: &Digest) -> String {
        format!("{}/{}/{}", self.prefix, digest.algorithm, digest.hex)
    }

    /// Who may read `digest` here, when it is linked.
    pub fn visibility(&self, cache: &Cache, digest: &Digest) -> Option<Visibility> {
        let entry = cache.lookup(&self.key(digest))?;
        let value = entry.headers.iter().find(|(name, _)| name == HEADER).map(|(_, value)| value.as_str());
        Some(match value {
            Some("public") => Visibility::Public,
            _ => Visibility::Private,
        })
    }

    /// Links every one of `digests` here, readable as `visibility`, in one
    /// commit. A failure is logged: the next request confirms upstream
    /// instead. Blocking.
    pub fn link(&self, cache: &Cache, digests: &[Digest], visibility: Visibility) {
        if digests.is_empty() {
            return;
        }
        let mut keys: Vec<String> = digests.iter().map(|digest| self.key(digest)).collect();
        if visibility == Visibility::Public {
            keys.extend(digests.iter().map(public_key));
        }
        let headers = vec![(HEADER.to_string(), visibility.as_str().to_string())];
        if let Err(error) = cache.mark(&keys, headers, Class::Immutable) {
            tracing::warn!(%error, repository = self.prefix, "cannot record which content a repository holds");
        }
    }
}

/// The key of the mark that `digest` is linked publicly somewhere: content
/// anyone may read through some repository, which a node of a cluster may
/// hand its peers.
fn public_key(digest: &Digest) -> String {
    format!("registry/public/{}/{}", digest.algorithm, digest.hex)
}

/// Whether `digest` is linked publicly under some repository. Blocking.
pub fn public_anywhere(cache: &Cache, digest: &Digest) -> bool {
    cache.lookup(&public_key(digest)).is_some()
}

/// The digests `manifest` names: an image's config, layers and subject, an
/// index's manifests.
pub fn named_in(manifest: &serde_json::Value) -> Vec<Digest> {
    let descriptors = ["layers", "manifests", "blobs"]
        .iter()
        .filter_map(|field| manifest.get(field)?.as_array())
        .flatten()
        .chain(["config", "subject"].iter().filter_map(|field| manifest.get(field)));
    descriptors.filter_map(|descriptor| Digest::parse(descriptor.get("digest")?.as_str()?).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

    #[test]
    fn a_manifest_names_its_config_layers_subject_and_an_index_its_manifests() {
        let image = json!({"schemaVersion": 2, "config": {"digest": A}, "layers": [{"digest": B}, {"digest": "md5:x"}],
            "subject": {"digest": C}});
        let named: Vec<String> = named_in(&image).iter().map(Digest::to_string).collect();
        assert_eq!(named, [B, A, C]);
        let index = json!({"schemaVersion": 2, "manifests": [{"digest": A}, {"digest": B}]});
        assert_eq!(named_in(&index).len(), 2);
        assert!(named_in(&json!({"schemaVersion": 2})).is_empty());
    }

    #[test]
    fn a_link_says_who_may_read_the_content_and_is_per_repository() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), std::sync::Arc::new(pkgproxy_cache::SystemClock)).unwrap();
        let (a, b) = (Digest::parse(A).unwrap(), Digest::parse(B).unwrap());
        let public = Repository::new("docker.io", "library/hello");
        let secret = Repository::new("docker.io", "secret/app");
        public.link(&cache, std::slice::from_ref(&a), Visibility::Public);
        secret.link(&cache, &[a.clone(), b.clone()], Visibility::Private);
        assert_eq!(public.visibility(&cache, &a), Some(Visibility::Public));
        assert_eq!(public.visibility(&cache, &b), None, "not linked under this name");
        assert_eq!(secret.visibility(&cache, &a), Some(Visibility::Private));
        assert_eq!(Repository::new("ghcr.io", "library/hello").visibility(&cache, &a), None, "per registry");
        assert!(public_anywhere(&cache, &a), "a is public under library/hello");
        assert!(!public_anywhere(&cache, &b), "b is linked only privately");
    }
}
