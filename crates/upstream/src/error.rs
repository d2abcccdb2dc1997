//! Why an upstream request or tunnel failed, and whose fault it is.

/// A failure of the way out.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The name did not resolve.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The host asked for.
        host: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// The host resolved only to addresses the policy forbids.
    #[error("refusing to connect to {host} ({address}): {reason}")]
    Forbidden {
        /// The host asked for.
        host: String,
        /// The address it resolved to.
        address: std::net::IpAddr,
        /// Why the address is forbidden.
        reason: &'static str,
    },
    /// No connection could be made.
    #[error("cannot connect to {host}: {source}")]
    Connect {
        /// The host asked for.
        host: String,
        /// The last connect error.
        #[source]
        source: std::io::Error,
    },
    /// The connect took too long.
    #[error("connecting to {host} timed out after {secs} s")]
    ConnectTimeout {
        /// The host asked for.
        host: String,
        /// The limit.
        secs: u64,
    },
    /// The request failed after the connection was made (reset, bad answer).
    #[error("request to {host} failed: {message}")]
    Request {
        /// The host asked for.
        host: String,
        /// What the HTTP client said.
        message: String,
    },
    /// The request's URI cannot be sent (no host, an unsupported scheme).
    #[error("cannot send a request to {uri}: {reason}")]
    BadTarget {
        /// The URI.
        uri: String,
        /// Why.
        reason: &'static str,
    },
}

impl UpstreamError {
    /// True when the policy refused the target before anything was sent:
    /// the request's fault, not the upstream's.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, UpstreamError::Forbidden { .. } | UpstreamError::BadTarget { .. })
    }
}
