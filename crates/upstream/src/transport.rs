//! The upstream HTTP transport: a pooled HTTP/1.1 client over the
//! [`Connector`](crate::connect::Connector). Every upstream request of every
//! side goes through [`Transport::send`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::connect::{host_port, Connector};
use crate::counters::Counters;
use crate::error::UpstreamError;
use crate::offline::Switch;
use tokio::time::Instant;

/// The body type of upstream requests (pkgproxy only sends `GET` and `HEAD`).
pub type TransportBody = Empty<Bytes>;

/// The one HTTP client of the program.
#[derive(Debug, Clone)]
pub struct Transport {
    client: Client<Connector, TransportBody>,
    counters: Arc<Counters>,
    switch: Switch,
    head_timeout: Duration,
}

impl Transport {
    pub(crate) fn new(
        connector: Connector,
        pool_idle_timeout: Duration,
        head_timeout: Duration,
        switch: Switch,
        counters: Arc<Counters>,
    ) -> Self {
        #[allow(clippy::disallowed_methods)] // the one HTTP client of the program
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(pool_idle_timeout)
            .pool_timer(TokioTimer::new())
            .pool_max_idle_per_host(32)
            .build(connector);
        Transport { client, counters, switch, head_timeout }
    }

    /// Sends `request` (absolute URI) and returns the answer's head; the body
    /// streams from the returned response.
    ///
    /// The offline switch is asked first, before any name is resolved, and
    /// told how the request ended: the head's status, a transport error or a
    /// timeout. A request dropped before its head arrived (its client left)
    /// tells it nothing.
    pub async fn send(&self, request: http::Request<TransportBody>) -> Result<http::Response<Incoming>, UpstreamError> {
        let (host, _) = host_port(request.uri())?;
        let ticket = self
            .switch
            .admit(&host, Instant::now())
            .map_err(|refusal| UpstreamError::Offline { host: host.clone(), retry_after: refusal.retry_after })?;
        self.counters.request();
        match tokio::time::timeout(self.head_timeout, self.client.request(request)).await {
            Ok(Ok(answer)) => {
                ticket.answered_with(answer.status(), answer.headers());
                Ok(answer)
            }
            Ok(Err(error)) => {
                ticket.failed(None);
                Err(request_error(host, error))
            }
            Err(_) => {
                ticket.failed(None);
                Err(UpstreamError::Timeout { host, secs: self.head_timeout.as_secs() })
            }
        }
    }
}

/// Unwraps hyper-util's error to the connector's own, when that is the cause.
fn request_error(host: String, error: hyper_util::client::legacy::Error) -> UpstreamError {
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        if let Some(upstream) = cause.downcast_ref::<UpstreamError>() {
            return clone_connect_error(upstream, &host);
        }
        source = cause.source();
    }
    let message = match std::error::Error::source(&error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    };
    UpstreamError::Request { host, message }
}

fn clone_connect_error(error: &UpstreamError, host: &str) -> UpstreamError {
    match error {
        UpstreamError::Forbidden { host, address, reason } => {
            UpstreamError::Forbidden { host: host.clone(), address: *address, reason }
        }
        UpstreamError::ConnectTimeout { host, secs } => {
            UpstreamError::ConnectTimeout { host: host.clone(), secs: *secs }
        }
        other => UpstreamError::Request { host: host.to_string(), message: other.to_string() },
    }
}
