//! One request's context on its way through the server (pingora's `CTX`):
//! who sent it, what it asked, how it was routed, and where the upstream's
//! status is reported for the shadows that compare. The gateway makes the
//! identity, the request path the rest; everything downstream reads it
//! from here rather than from side channels.

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{HeaderMap, Method};
use pkgproxy_sides::Mount;
use tokio::sync::oneshot;

use crate::stats::Requester;

/// Who sent a request, as the gateway saw it.
#[derive(Debug, Clone, Copy)]
pub struct ClientInfo {
    /// The client's address.
    pub addr: SocketAddr,
    /// The request's number in this process (logs name it).
    pub id: u64,
    /// Whether it came over TLS.
    pub secure: bool,
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
    /// The request's target as the client sent it (`None` for pkgproxy's
    /// own requests): an offline node of a cluster asks an online one for
    /// it.
    pub target: Option<&'a http::Uri>,
    /// Where fetches get their bytes instead of the upstream (an imported
    /// bundle), for the keys it holds.
    pub supply: Option<&'a dyn Supply>,
}

/// Bytes for cache keys from somewhere other than the upstream (a bundle
/// being imported). A fetch from a supply meets every check a fetch from
/// the upstream meets: only where the bytes come from changes.
pub trait Supply: Send + Sync {
    /// The source of `key`'s bytes, if this supply has them.
    fn source_for(&self, key: &str) -> Option<Box<dyn pkgproxy_cache::Source>>;
}

impl std::fmt::Debug for dyn Supply + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Supply")
    }
}

impl<'a> Exchange<'a> {
    /// A `GET` of pkgproxy's own (a prerequisite of a download, a check, a
    /// warm): no client, no headers of a client's.
    pub fn own_get(headers: &'a HeaderMap, mount: Mount, upstream_answer: &'a UpstreamAnswer) -> Self {
        Exchange { method: &Method::GET, headers, mount, upstream_answer, client: None, target: None, supply: None }
    }

    /// The same exchange with `headers` in place of the client's (its
    /// conditionals left out, for one).
    pub fn with_headers<'h>(&self, headers: &'h HeaderMap) -> Exchange<'h>
    where
        'a: 'h,
    {
        Exchange { headers, ..*self }
    }

    /// Who asked: a client of the listener, or pkgproxy itself (an exchange
    /// with no client).
    pub fn requester(&self) -> Requester {
        match self.client {
            Some(_) => Requester::Client,
            None => Requester::Pkgproxy,
        }
    }
}

/// Where the upstream's status for a request is reported, for the shadows
/// that compare. Dropped unreported (a hit, a refusal, a failure), it
/// compares nothing.
#[derive(Debug, Clone, Default)]
pub struct UpstreamAnswer(Arc<Mutex<Vec<oneshot::Sender<u16>>>>);

impl UpstreamAnswer {
    /// The upstream answered the request with `status`.
    pub fn report(&self, status: u16) {
        let waiting = std::mem::take(&mut *self.0.lock());
        for comparison in waiting {
            let _ = comparison.send(status);
        }
    }

    /// A receiver of the status, once reported.
    pub fn wait(&self) -> oneshot::Receiver<u16> {
        let (tx, rx) = oneshot::channel();
        self.0.lock().push(tx);
        rx
    }
}

/// The host (and port) the client reached pkgproxy by: the authority of an
/// absolute-form request, else its `Host`; pkgproxy's own address when it
/// named none that can be put in a URL.
pub fn host_of<'a>(
    uri: &'a http::Uri,
    headers: &'a http::HeaderMap,
    listen: std::net::SocketAddr,
) -> std::borrow::Cow<'a, str> {
    let named = match uri.authority() {
        Some(authority) => Some(authority.as_str()),
        None => headers.get(http::header::HOST).and_then(|v| v.to_str().ok()),
    };
    let usable = |host: &&str| {
        !host.is_empty()
            && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    };
    match named.filter(usable) {
        Some(host) => std::borrow::Cow::Borrowed(host),
        None => std::borrow::Cow::Owned(listen.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use http::Request;

    use super::*;

    fn parts(uri: &str, host: Option<&str>) -> http::request::Parts {
        let mut request = Request::builder().uri(uri);
        if let Some(host) = host {
            request = request.header(http::header::HOST, host);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn host(uri: &str, named: Option<&str>, listen: std::net::SocketAddr) -> String {
        let parts = parts(uri, named);
        host_of(&parts.uri, &parts.headers, listen).into_owned()
    }

    #[test]
    fn the_host_a_client_named_is_used_only_when_it_fits_in_a_url() {
        let listen: std::net::SocketAddr = "192.0.2.1:3142".parse().unwrap();
        assert_eq!(host("/snap/x", Some("proxy.lan:3142"), listen), "proxy.lan:3142");
        assert_eq!(host("/snap/x", Some("[::1]:3142"), listen), "[::1]:3142");
        assert_eq!(host("http://pkgproxy.test:3142/snap/x", Some("other"), listen), "pkgproxy.test:3142");
        for hostile in ["evil/\"x", "a b", "x@y", ""] {
            assert_eq!(host("/snap/x", Some(hostile), listen), "192.0.2.1:3142", "{hostile:?}");
        }
        assert_eq!(host("/snap/x", None, listen), "192.0.2.1:3142");
    }
}
