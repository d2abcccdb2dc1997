//! The CONNECT dialer: opens the upstream side of a blind tunnel through the
//! same connector, policy and counters as the transport.

use std::sync::Arc;

use tokio::net::TcpStream;

use crate::connect::Connector;
use crate::counters::Counters;
use crate::error::UpstreamError;

/// Opens tunnel connections.
#[derive(Debug, Clone)]
pub struct Dialer {
    connector: Connector,
    counters: Arc<Counters>,
}

impl Dialer {
    pub(crate) fn new(connector: Connector, counters: Arc<Counters>) -> Self {
        Dialer { connector, counters }
    }

    /// Connects to `host:port` for a tunnel.
    pub async fn dial(&self, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        let stream = self.connector.connect(host, port).await?;
        self.counters.tunnel();
        Ok(stream)
    }
}
