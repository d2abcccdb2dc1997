//! The small objects every node reads again and again (the offline switch,
//! the shared breakers): fetched only when changed (`If-None-Match`), so a
//! poll of an unchanged object costs the store a `304`.

use std::sync::Weak;
use std::time::Duration;

use object_store::path::Path;
use object_store::GetOptions;

use crate::small::{self, Small, SmallError};
use crate::tier::SharedTier;

/// Reads the object `path` names (of kind `kind`) every `every` and calls
/// `apply` with its bytes whenever they changed (the first ones found
/// included), until the tier is dropped. One larger than its kind may be is
/// left unread, and said.
pub async fn watch(
    tier: Weak<SharedTier>,
    path: impl Fn(&SharedTier) -> Path,
    kind: Small,
    every: Duration,
    apply: impl Fn(&[u8]),
) {
    let mut seen: Option<String> = None;
    loop {
        let Some(tier) = tier.upgrade() else { return };
        let path = path(&tier);
        let options = GetOptions { if_none_match: seen.clone(), ..GetOptions::default() };
        match tier.store().get_opts(&path, options).await {
            Ok(found) => {
                let etag = found.meta.e_tag.clone();
                match small::read(found, kind).await {
                    Ok(bytes) => {
                        apply(&bytes);
                        seen = etag;
                    }
                    Err(error @ SmallError::Oversized { .. }) => {
                        // Said once per version of it, not every poll.
                        tracing::warn!(%path, %error, "not read: too large");
                        seen = etag;
                    }
                    Err(error) => tracing::debug!(%path, %error, "not read"),
                }
            }
            Err(object_store::Error::NotModified { .. } | object_store::Error::NotFound { .. }) => {}
            Err(error) => tracing::debug!(%path, %error, "not read"),
        }
        drop(tier);
        tokio::time::sleep(every).await;
    }
}
