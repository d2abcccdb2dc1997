//! The small objects every node reads again and again (the offline switch,
//! the shared breakers): fetched only when changed (`If-None-Match`), so a
//! poll of an unchanged object costs the store a `304`.

use std::sync::Weak;
use std::time::Duration;

use object_store::path::Path;
use object_store::GetOptions;

use crate::tier::SharedTier;

/// Reads the object `path` names every `every` and calls `apply` with its
/// bytes whenever they changed (the first ones found included), until the
/// tier is dropped.
pub async fn watch(tier: Weak<SharedTier>, path: impl Fn(&SharedTier) -> Path, every: Duration, apply: impl Fn(&[u8])) {
    let mut seen: Option<String> = None;
    loop {
        let Some(tier) = tier.upgrade() else { return };
        let path = path(&tier);
        let options = GetOptions { if_none_match: seen.clone(), ..GetOptions::default() };
        match tier.store().get_opts(&path, options).await {
            Ok(found) => {
                let etag = found.meta.e_tag.clone();
                if let Ok(bytes) = found.bytes().await {
                    apply(&bytes);
                    seen = etag;
                }
            }
            Err(object_store::Error::NotModified { .. } | object_store::Error::NotFound { .. }) => {}
            Err(error) => tracing::debug!(%path, %error, "not read"),
        }
        drop(tier);
        tokio::time::sleep(every).await;
    }
}
