//! The CONNECT dialer: opens the upstream side of a blind tunnel through the
//! same connector, policy and counters as the transport.

use std::sync::Arc;

use tokio::net::TcpStream;

use crate::connect::Connector;
use crate::counters::{Counters, UpstreamCounter};
use crate::error::UpstreamError;
use crate::offline::Switch;
use tokio::time::Instant;

/// Opens tunnel connections.
#[derive(Debug, Clone)]
pub struct Dialer {
    connector: Connector,
    counters: Arc<Counters>,
    switch: Switch,
}

impl Dialer {
    pub(crate) fn new(connector: Connector, switch: Switch, counters: Arc<Counters>) -> Self {
        Dialer { connector, counters, switch }
    }

    /// Connects to `host:port` for a tunnel. The offline switch is asked
    /// first; a failed dial is a failure of the host, a successful one is
    /// no answer (a tunnel that connects says nothing of the host's HTTP).
    pub async fn dial(&self, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        let ticket = self
            .switch
            .admit(host, Instant::now())
            .map_err(|refusal| UpstreamError::Refused { host: host.to_string(), refusal })?;
        match self.connector.connect(host, port).await {
            Ok(stream) => {
                self.counters.increment(UpstreamCounter::Tunnels);
                drop(ticket);
                Ok(stream)
            }
            Err(error) => {
                if !error.is_forbidden() {
                    ticket.failed(None);
                }
                Err(error)
            }
        }
    }
}
