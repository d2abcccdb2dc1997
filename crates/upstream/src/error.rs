//! Why an upstream request or tunnel failed, and whose fault it is.

use crate::offline::Refusal;

/// A failure of the way out.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The offline switch refused the request before anything was sent:
    /// offline mode, or the host's breaker is open.
    #[error("{host}: {refusal}")]
    Refused {
        /// The host asked for.
        host: String,
        /// Offline mode, or the host's open breaker and how long it stays open.
        refusal: Refusal,
    },
    /// No answer head came in time.
    #[error("{host} sent no answer within {after:?}")]
    Timeout {
        /// The host asked for.
        host: String,
        /// The attempt's limit that ran out.
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
        /// The connect timeout (`connect_timeout`).
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
        /// The URI as it would have been sent.
        uri: String,
        /// What is wrong with it, for people.
        reason: &'static str,
    },
}

impl UpstreamError {
    /// True when the policy refused the target before anything was sent:
    /// the request's fault, not the upstream's.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, UpstreamError::Forbidden { .. } | UpstreamError::BadTarget { .. })
    }

    /// The offline switch's refusal, when that is what this is.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            UpstreamError::Refused { refusal, .. } => Some(*refusal),
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

/// The way-out error behind a failure of hyper-util's client: the
/// connector's own error when that is the cause (its variant, with the I/O
/// cause's kind and text), else a request failure on `host`.
pub(crate) fn from_client(host: String, error: hyper_util::client::legacy::Error) -> UpstreamError {
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        if let Some(upstream) = cause.downcast_ref::<UpstreamError>() {
            return copy_connect_error(upstream, &host);
        }
        source = cause.source();
    }
    let message = match std::error::Error::source(&error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    };
    UpstreamError::Request { host, message }
}

/// A copy of the connector's error, which hyper-util owns.
fn copy_connect_error(error: &UpstreamError, host: &str) -> UpstreamError {
    let io = |source: &std::io::Error| std::io::Error::new(source.kind(), source.to_string());
    match error {
        UpstreamError::Forbidden { host, address, kind } => {
            UpstreamError::Forbidden { host: host.clone(), address: *address, kind: *kind }
        }
        UpstreamError::ConnectTimeout { host, after } => {
            UpstreamError::ConnectTimeout { host: host.clone(), after: *after }
        }
        UpstreamError::Connect { host, source } => UpstreamError::Connect { host: host.clone(), source: io(source) },
        UpstreamError::Resolve { host, source } => UpstreamError::Resolve { host: host.clone(), source: io(source) },
        UpstreamError::Tls { host, source } => UpstreamError::Tls { host: host.clone(), source: io(source) },
        other => UpstreamError::Request { host: host.to_string(), message: other.to_string() },
    }
}
