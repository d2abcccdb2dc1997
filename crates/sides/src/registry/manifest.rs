//! The manifest verifier: what a manifest must be before it is kept, and
//! what is recorded once it is (the manifest under its digest, and the
//! repository's links to it and to what it names).

use std::io::Read;

use pkgproxy_cache::{BodyHashes, BodyReader, Cache, Class, Verifier};

use super::links::{self, Visibility};
use super::name::Digest;

/// The checks of a manifest, and what is recorded once it is kept: the
/// manifest under its digest too (when fetched by tag), and the repository's
/// links to it and to what it names.
#[derive(Debug)]
pub(super) struct Manifest {
    pub(super) cache: Cache,
    pub(super) keep_by_digest: bool,
    pub(super) links: Option<(links::Repository, Visibility)>,
}

impl Verifier for Manifest {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, hashes: &BodyHashes) -> Result<(), String> {
        if hashes.size > MANIFEST_LIMIT {
            return Err(format!("a manifest of {} bytes is larger than the {MANIFEST_LIMIT} taken", hashes.size));
        }
        let mut manifest = Vec::new();
        body.read_to_end(&mut manifest).map_err(|error| format!("cannot read the manifest: {error}"))?;
        let manifest: serde_json::Value =
            serde_json::from_slice(&manifest).map_err(|_| "the manifest is not JSON".to_string())?;
        match manifest.get("schemaVersion").and_then(serde_json::Value::as_u64) {
            Some(2) => Ok(()),
            Some(1) => Err("schema 1 manifests are refused: their digest does not cover their signatures".into()),
            _ => Err("the manifest has no schemaVersion 2".into()),
        }
    }

    fn learns(&self) -> bool {
        true
    }

    fn committed(&self, body: &mut BodyReader<'_>, hashes: &BodyHashes) {
        let mut bytes = Vec::new();
        if body.take(MANIFEST_LIMIT).read_to_end(&mut bytes).is_err() || bytes.len() as u64 != hashes.size {
            return;
        }
        let parsed = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_default();
        if self.keep_by_digest {
            let media_type = parsed.get("mediaType").and_then(|media| media.as_str());
            let headers = media_type.into_iter().map(|media| ("content-type".to_string(), media.to_string())).collect();
            let key = format!("registry/manifest/sha256/{}", hashes.sha256);
            if let Err(error) = self.cache.put(&key, &bytes, headers, Class::Immutable) {
                tracing::warn!(%error, key, "cannot keep a manifest under its digest");
            }
        }
        if let Some((links, visibility)) = &self.links {
            let itself = Digest { algorithm: "sha256", hex: hashes.sha256.clone() };
            let mut named = links::named_in(&parsed);
            named.push(itself);
            links.link(&self.cache, &named, *visibility);
        }
    }
}

/// The largest manifest kept (as registries and clients limit them).
pub(super) const MANIFEST_LIMIT: u64 = 4 * 1024 * 1024;
