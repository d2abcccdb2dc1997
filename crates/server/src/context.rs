//! One request's context on its way through the server (pingora's `CTX`):
//! who sent it, what it asked, how it was routed, and where the upstream's
//! status is reported for the shadows that compare. The gateway makes the
//! identity, the request path the rest; everything downstream reads it
//! from here rather than from side channels.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, Method};
use pkgproxy_sides::Mount;
use tokio::sync::oneshot;

/// Who sent a request, as the gateway saw it.
#[derive(Debug, Clone, Copy)]
pub struct ClientInfo {
    /// The client's address.
    pub addr: SocketAddr,
    /// The request's number in this process (logs name it).
    pub id: u64,
}

/// What the client asked, as far as serving it is concerned.
#[derive(Debug)]
pub struct Exchange<'a> {
    /// The client's method.
    pub method: &'a Method,
    /// The client's headers (conditionals, `Range`, `User-Agent`).
    pub headers: &'a HeaderMap,
    /// How the request reached its side: it decides how copies of its
    /// upstream requests are addressed.
    pub mount: Mount,
    /// Where the upstream's status is reported, for shadows that compare.
    pub upstream_answer: &'a UpstreamAnswer,
    /// Who asked (`None` for pkgproxy's own requests).
    pub client: Option<ClientInfo>,
}

/// Where the upstream's status for a request is reported, for the shadows
/// that compare. Dropped unreported (a hit, a refusal, a failure), it
/// compares nothing.
#[derive(Debug, Clone, Default)]
pub struct UpstreamAnswer(Arc<Mutex<Vec<oneshot::Sender<u16>>>>);

impl UpstreamAnswer {
    /// The upstream answered the request with `status`.
    pub fn report(&self, status: u16) {
        let waiting = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        for comparison in waiting {
            let _ = comparison.send(status);
        }
    }

    /// A receiver of the status, once reported.
    pub fn wait(&self) -> oneshot::Receiver<u16> {
        let (tx, rx) = oneshot::channel();
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }
}
