//! What goes wrong with the shared tier.

/// An error of the shared tier, with what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// `[cluster]` cannot be used as written.
    #[error("cluster: {0}")]
    Config(String),
    /// The store answered an operation with an error.
    #[error("cluster store: {what}: {source}")]
    Store {
        /// The operation and its object.
        what: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// The store does not keep the promises cluster mode rests on.
    #[error("cluster store {endpoint} cannot be used: {reason}")]
    Unfit {
        /// The store's endpoint.
        endpoint: String,
        /// Which promise it broke.
        reason: String,
    },
    /// A shared object is not what pkgproxy writes.
    #[error("cluster store: {what} is not readable: {reason}")]
    Malformed {
        /// The object.
        what: String,
        /// Why.
        reason: String,
    },
    /// The local cache could not be read for publishing.
    #[error("cluster publish of {key}: {source}")]
    Local {
        /// The cache key.
        key: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl ClusterError {
    pub(crate) fn store(what: impl Into<String>, source: object_store::Error) -> Self {
        ClusterError::Store { what: what.into(), source }
    }
}
