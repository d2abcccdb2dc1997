//! The toy side's rewriting role: a `.link` file names pkgproxy as its
//! client reached it. Added as this file and one line of [`Side::roles`]
//! (`rewriting: Some(self)`), with no change to the server.
//!
//! [`Side::roles`]: crate::Side::roles

use bytes::Bytes;

use super::Toy;
use crate::decision::Rewrite;
use crate::role::Rewriting;

/// What a file whose body names pkgproxy ends with.
pub(super) const LINKS: &str = ".link";

/// What a `.link` file writes where pkgproxy's address goes.
const HERE: &str = "@PKGPROXY@";

impl Rewriting for Toy {
    fn rewrite(&self, rewrite: &Rewrite, body: &[u8]) -> Option<Bytes> {
        let body = std::str::from_utf8(body).ok()?;
        Some(Bytes::from(body.replace(HERE, &rewrite.served_at.base)))
    }
}
