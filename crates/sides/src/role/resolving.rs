//! The resolving role: what a build needs of a side, followed in what the
//! cache holds, for `pkgproxyctl check`, `warm` and `export`.

use crate::needs::{FirstAsk, HeldBodies, Needs, NeedsError};

/// What a build needs, followed in the cache.
pub trait Resolving: Send + Sync {
    /// What a build needs of this side, from `asked` (what its reader
    /// left the daemon to follow, [`Asked::Resolve`](crate::needs::Asked)),
    /// followed in what `held` holds: an install's packages in the held
    /// indexes, an image's blobs in its held manifest. Blocking.
    fn needs(&self, asked: serde_json::Value, held: &dyn HeldBodies) -> Result<Needs, NeedsError>;

    /// For a warm: the request to make through the side's own path before
    /// [`Resolving::needs`] follows `asked` (a snap's store answer, which
    /// only the store can give).
    fn needs_first(&self, _asked: &serde_json::Value) -> Result<Option<FirstAsk>, NeedsError> {
        Ok(None)
    }
}
