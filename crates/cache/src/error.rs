//! Errors of the cache: what failed, on which file or key, and why.

use std::path::PathBuf;

/// An error type any body or transport error converts into.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A failure of the persistent store (disk or index).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What the store was doing ("create", "rename", ...).
        action: &'static str,
        /// The file or folder concerned.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The index database failed.
    #[error("cache index {}: {message}", path.display())]
    Index {
        /// The database file.
        path: PathBuf,
        /// What redb said.
        message: String,
    },
    /// Another process has the index open: one cache directory serves
    /// one pkgproxy at a time.
    #[error(
        "the cache directory {} is in use by another pkgproxy{}: give this one a cache directory of its own, or stop the other",
        dir.display(),
        holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
    )]
    InUse {
        /// The cache directory.
        dir: PathBuf,
        /// The process holding it, when the system says.
        holder: Option<u32>,
    },
    /// The work asked for is already being done (one scrub at a time).
    #[error("{0}")]
    Busy(&'static str),
    /// An index record could not be decoded (written by an incompatible
    /// version, or damaged).
    #[error("cache index record for {key:?} is unreadable: {message}")]
    Record {
        /// The record's key.
        key: String,
        /// The decoder's complaint.
        message: String,
    },
}

impl StoreError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io { action, path: path.into(), source }
    }

    /// The same error again, for each of the writes that shared the
    /// commit it ended (the operating system's error keeps its code).
    pub(crate) fn copy(&self) -> Self {
        match self {
            StoreError::Io { action, path, source } => {
                let source = match source.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                };
                StoreError::Io { action, path: path.clone(), source }
            }
            StoreError::Index { path, message } => StoreError::Index { path: path.clone(), message: message.clone() },
            StoreError::InUse { dir, holder } => StoreError::InUse { dir: dir.clone(), holder: *holder },
            StoreError::Busy(what) => StoreError::Busy(what),
            StoreError::Record { key, message } => StoreError::Record { key: key.clone(), message: message.clone() },
        }
    }

    /// Whether the file system had no room (or the user's quota was used
    /// up): what eviction, or passing the body through, answers.
    pub fn is_full(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => no_room(source),
            _ => false,
        }
    }
}

/// Whether `error` says the file system had no room (or the user's quota
/// was used up).
pub(crate) fn no_room(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::StorageFull || matches!(error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Why a shared fetch did not produce a cacheable body. Every waiter of the
/// fetch gets the same error.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The upstream could not be asked or did not answer (refused by the
    /// offline switch, a connect failure, a reset, a timeout before the
    /// response head). The cause is the caller's own error, kept typed for
    /// whoever maps it to an answer.
    #[error("upstream request failed: {0}")]
    Upstream(#[source] BoxError),
    /// The body broke off after the head.
    #[error("upstream body failed after {received} bytes: {message}")]
    Body {
        /// Bytes received before the failure.
        received: u64,
        /// What went wrong.
        message: String,
    },
    /// The body's length differs from what the upstream or the index promised.
    /// What arrived is not said in the message, which clients read: the
    /// body may come from a redirect's target, whose size is its own
    /// business (the log has it, from the fields).
    #[error("upstream body is not the {expected} bytes expected")]
    Length {
        /// The promised length.
        expected: u64,
        /// The length received (so far, when it overran).
        actual: u64,
    },
    /// The body does not match its published checksum (what it hashes to
    /// is left out of the message, as a body's length is).
    #[error("upstream body fails its {algorithm} check: {expected} was expected")]
    Checksum {
        /// `SHA256` or `SHA512`.
        algorithm: &'static str,
        /// The published hash (hex).
        expected: String,
        /// The hash of what arrived (hex).
        actual: String,
    },
    /// The side's check refused the complete body.
    #[error("upstream body refused: {0}")]
    Rejected(String),
    /// The body could not be stored.
    #[error("cache store failed: {0}")]
    Store(#[from] StoreError),
    /// The task leading the fetch ended without an outcome.
    #[error("shared fetch ended without an outcome")]
    Abandoned,
}
