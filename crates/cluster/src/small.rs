//! The bucket's small objects (index entries, leases, members, the switch,
//! the breakers), read within a bound per kind. Every node reads them, some
//! every few seconds: one made huge (by tampering, a broken node or a
//! misdirected upload) must not make every node hold it. A larger one is
//! malformed, and read no further than its bound.

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use object_store::GetResult;

/// The kinds of small objects, each with its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Small {
    /// An index object: an entry, its headers among it.
    Index,
    /// A lease.
    Lease,
    /// A node's announcement.
    Member,
    /// The cluster's offline switch.
    Switch,
    /// The breakers the cluster shares (one per host).
    Breakers,
}

impl Small {
    /// The most bytes an object of this kind may have.
    pub const fn limit(self) -> u64 {
        match self {
            Small::Index => 1024 * 1024,
            Small::Lease | Small::Member | Small::Switch => 16 * 1024,
            Small::Breakers => 1024 * 1024,
        }
    }
}

/// Why a small object was not read.
#[derive(Debug, thiserror::Error)]
pub enum SmallError {
    /// Larger than its kind may be.
    #[error("{size} bytes or more, beyond the {limit} bytes it may have")]
    Oversized {
        /// Its size as far as it was read (or as the store says).
        size: u64,
        /// Its kind's bound.
        limit: u64,
    },
    /// The store broke off.
    #[error("{0}")]
    Store(#[from] object_store::Error),
}

/// The bytes of `found`, an object of kind `kind`: refused before any is
/// read when the store says it is larger than the bound, and cut off at
/// the bound when its body is longer than the store said.
pub async fn read(found: GetResult, kind: Small) -> Result<Bytes, SmallError> {
    let limit = kind.limit();
    if found.meta.size > limit {
        return Err(SmallError::Oversized { size: found.meta.size, limit });
    }
    let mut bytes = BytesMut::with_capacity(found.meta.size as usize);
    let mut stream = found.into_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(SmallError::Oversized { size: (bytes.len() + chunk.len()) as u64, limit });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.freeze())
}
