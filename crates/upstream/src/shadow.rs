//! Copies of requests sent to shadow targets (the mirror feature). They go
//! out through here like all other traffic, but with their own clients and
//! counters: a copy never joins an upstream pool, never reports to a
//! breaker, and is never counted as upstream traffic.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::connect::{Connector, Security};
use crate::counters::{Counters, UpstreamCounter};
use crate::error::UpstreamError;
use crate::resolve::host_port;
use crate::target::FixedTarget;

/// Where copies go and how they are addressed.
#[derive(Debug, Clone)]
pub struct ShadowTarget {
    host: String,
    port: u16,
    /// The target's path prefix (no trailing slash), for reverse-proxy
    /// requests.
    prefix: String,
    security: Security,
    client: legacy::Client<FixedTarget, Full<Bytes>>,
    counters: Arc<Counters>,
}

/// A copy to send.
#[derive(Debug, Clone)]
pub struct ShadowRequest {
    /// The client's method, copied as it is.
    pub method: Method,
    /// For a forward-proxy copy, the absolute URI the client asked for (the
    /// target is then asked as a proxy); else the path and query, which go
    /// below the target's prefix.
    pub uri: String,
    /// The copy's headers: the client's, less the hop-by-hop ones, with the
    /// forwarding headers and the marker added.
    pub headers: HeaderMap,
    /// The body (empty for none).
    pub body: Bytes,
}

impl ShadowTarget {
    pub(crate) fn new(
        base: &str,
        connector: Connector,
        pool_idle: std::time::Duration,
        counters: Arc<Counters>,
    ) -> Result<Self, UpstreamError> {
        let uri: http::Uri =
            base.parse().map_err(|_| UpstreamError::BadTarget { uri: base.to_string(), reason: "not a URL" })?;
        let (host, port) = host_port(&uri)?;
        let prefix = uri.path().trim_end_matches('/').to_string();
        let security = Security::of(&uri);
        let target = FixedTarget { connector, host: host.clone(), port, security };
        #[allow(clippy::disallowed_methods)] // the client of the shadow targets, inside the one way out
        let mut builder = legacy::Client::builder(TokioExecutor::new());
        let client = builder.pool_idle_timeout(pool_idle).pool_timer(TokioTimer::new()).set_host(false).build(target);
        Ok(ShadowTarget { host, port, prefix, security, client, counters })
    }

    /// The base URL the copies go to.
    pub fn url(&self) -> String {
        format!("{}://{}:{}{}", self.scheme(), self.host, self.port, self.prefix)
    }

    fn scheme(&self) -> &'static str {
        match self.security {
            Security::Tls => "https",
            Security::Plain => "http",
        }
    }

    /// Sends `copy`, reads its answer to the end and drops it; returns the
    /// answer's status. Redirects are not followed.
    pub async fn send(&self, copy: ShadowRequest) -> Result<StatusCode, UpstreamError> {
        let uri = match copy.uri.starts_with('/') {
            true => format!("{}://{}:{}{}{}", self.scheme(), self.host, self.port, self.prefix, copy.uri),
            false => copy.uri,
        };
        let uri: http::Uri =
            uri.parse().map_err(|_| UpstreamError::BadTarget { uri: uri.clone(), reason: "not a valid URL" })?;
        let mut request = http::Request::new(Full::new(copy.body));
        *request.method_mut() = copy.method;
        *request.uri_mut() = uri;
        *request.headers_mut() = copy.headers;
        self.counters.increment(UpstreamCounter::ShadowRequests);
        let host = self.host.clone();
        let answer =
            self.client.request(request).await.map_err(|error| crate::error::from_client(host.clone(), error))?;
        let status = answer.status();
        let mut body = answer.into_body();
        while let Some(frame) = body.frame().await {
            frame.map_err(|error| UpstreamError::Request { host: host.clone(), message: error.to_string() })?;
        }
        Ok(status)
    }
}

/// Makes shadow targets, sharing one connector and one set of counters.
#[derive(Debug, Clone)]
pub struct ShadowClient {
    connector: Connector,
    pool_idle: std::time::Duration,
    counters: Arc<Counters>,
}

impl ShadowClient {
    pub(crate) fn new(connector: Connector, pool_idle: std::time::Duration, counters: Arc<Counters>) -> Self {
        ShadowClient { connector, pool_idle, counters }
    }

    /// A target at `base` (`http://host[:port][/prefix]`).
    pub fn target(&self, base: &str) -> Result<ShadowTarget, UpstreamError> {
        ShadowTarget::new(base, self.connector.clone(), self.pool_idle, Arc::clone(&self.counters))
    }
}
