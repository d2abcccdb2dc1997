//! A connector that takes every request to one target, whatever its URI
//! names: a mirror's shadow target, a cluster peer. A request whose URI
//! names another origin goes to the target as to a forward proxy (hyper
//! then sends the absolute URI), never to the origin it names.

use std::task::{Context, Poll};

use crate::connect::{Connector, Opening, Peer, Security, UpstreamIo};
use crate::error::UpstreamError;

/// Connects every request to the target, whatever its URI names: for a
/// forward-proxy copy the URI is the origin's, and the connection is marked
/// as one to a proxy so hyper sends the absolute URI.
#[derive(Debug, Clone)]
pub(crate) struct FixedTarget {
    pub(crate) connector: Connector,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) security: Security,
}

impl tower_service::Service<http::Uri> for FixedTarget {
    type Response = UpstreamIo;
    type Error = UpstreamError;
    type Future = Opening;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let target = self.clone();
        Box::pin(async move {
            let peer = match uri.host() == Some(target.host.as_str()) && uri.port_u16() == Some(target.port) {
                true => Peer::Origin,
                false => Peer::ForwardProxy,
            };
            target.connector.open(&target.host, target.port, target.security, peer).await
        })
    }
}
