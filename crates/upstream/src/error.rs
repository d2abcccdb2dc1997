//! Why an upstream request or tunnel failed, and whose fault it is.

/// A failure of the way out.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The offline switch refused the request before anything was sent:
    /// offline mode, or the host's breaker is open.
    #[error("{host}: pkgproxy is offline")]
    Offline {
        /// The host asked for.
        host: String,
        /// How long until the host may be tried (`None` in offline mode).
        retry_after: Option<std::time::Duration>,
    },
    /// No answer head came in time.
    #[error("{host} sent no answer within {after:?}")]
    Timeout {
        /// The host asked for.
        host: String,
        /// The limit.
        after: std::time::Duration,
    },
    /// The body stopped coming.
    #[error("{host} sent no body bytes for {after:?} (after {received} bytes)")]
    Stalled {
        /// The host asked for.
        host: String,
        /// The idle limit.
        after: std::time::Duration,
        /// Body bytes received before the stall.
        received: u64,
    },
    /// Every instance of a pool was tried for the request, and each failed
    /// (or the request's deadline ran out first).
    #[error("{} of {pool} failed: {}", instances(attempts.len()), attempts.join("; "))]
    AllFailed {
        /// The pool's name.
        pool: String,
        /// What happened on each attempt, in order.
        attempts: Vec<String>,
    },
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
    #[error("refusing to connect to {host} ({address}): {kind}")]
    Forbidden {
        /// The host asked for.
        host: String,
        /// The address it resolved to.
        address: std::net::IpAddr,
        /// Which kind of local address it is.
        kind: pkgproxy_addr::LocalKind,
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
    /// The TLS handshake failed (a certificate that does not verify, ...).
    #[error("TLS with {host} failed: {source}")]
    Tls {
        /// The host asked for.
        host: String,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The connect took too long.
    #[error("connecting to {host} timed out after {after:?}")]
    ConnectTimeout {
        /// The host asked for.
        host: String,
        /// The limit.
        after: std::time::Duration,
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

    /// For a refusal by the offline switch, the time until the host may be
    /// tried (itself `None` in offline mode).
    pub fn refusal(&self) -> Option<Option<std::time::Duration>> {
        match self {
            UpstreamError::Offline { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// "all N instances", or "the only instance".
fn instances(count: usize) -> String {
    match count {
        1 => "the only instance".to_string(),
        n => format!("all {n} instances"),
    }
}
