//! Name resolution and the address policy.
//!
//! Fixed addresses (`host:port` → socket addresses) are consulted before DNS,
//! so an operator can pin a mirror and a test can send `deb.debian.org` to a
//! fake on 127.0.0.1 without touching the system. The policy refuses targets
//! on loopback, private and link-local addresses unless their host is
//! trusted: a public mirror name that resolves into the local network (DNS
//! rebinding, a hostile resolver) is not followed.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwap;

use pkgproxy_addr::local_kind;

use crate::error::UpstreamError;

/// The pinned addresses, by lower-case host and port.
type Pins = HashMap<(String, u16), Vec<SocketAddr>>;

/// Resolves `host:port` to socket addresses. Its clones share their pins,
/// so a reload ([`Resolver::adopt`]) reaches every connector at once.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    fixed: Arc<ArcSwap<Pins>>,
}

impl Resolver {
    /// Pins `host:port` to `addresses` (consulted before DNS).
    pub fn pin(&mut self, host: &str, port: u16, addresses: Vec<SocketAddr>) {
        let mut fixed = Pins::clone(&self.fixed.load());
        fixed.insert((host.to_ascii_lowercase(), port), addresses);
        self.fixed.store(Arc::new(fixed));
    }

    /// Takes `other`'s pins, from the next connection on.
    pub fn adopt(&self, other: &Resolver) {
        self.fixed.store(other.fixed.load_full());
    }

    /// The addresses of `host:port`.
    pub(crate) async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, UpstreamError> {
        if let Some(fixed) = self.fixed.load().get(&(host.to_ascii_lowercase(), port)) {
            return Ok(fixed.clone());
        }
        if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        #[allow(clippy::disallowed_methods)] // the one resolver of the program
        let found = tokio::net::lookup_host((host, port)).await;
        let addresses: Vec<SocketAddr> =
            found.map_err(|source| UpstreamError::Resolve { host: host.to_string(), source })?.collect();
        if addresses.is_empty() {
            let source = std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses");
            return Err(UpstreamError::Resolve { host: host.to_string(), source });
        }
        Ok(addresses)
    }
}

/// Which configured upstreams may be reached on local addresses, each by
/// its host and port: a host trusted on its configured port is not trusted
/// on another (a redirect or a token realm naming another port of a
/// configured host reaches a local service nobody configured). Its clones
/// share what they trust, so a reload ([`AddressPolicy::adopt`]) reaches
/// every connector at once.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    trusted: Arc<ArcSwap<HashSet<(String, u16)>>>,
}

impl AddressPolicy {
    /// Lets `host:port` resolve to loopback, private or link-local
    /// addresses (a configured archive on the local network).
    pub fn trust(&mut self, host: &str, port: u16) {
        let mut trusted = HashSet::clone(&self.trusted.load());
        trusted.insert((host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase(), port));
        self.trusted.store(Arc::new(trusted));
    }

    /// Trusts the host and port of `url` (`http://mirror.lan:8080/debian`;
    /// a scheme's own port when it names none). An error when it is not an
    /// http or https URL with a host.
    pub fn trust_url(&mut self, url: &str) -> Result<(), UpstreamError> {
        let uri: http::Uri =
            url.parse().map_err(|_| UpstreamError::BadTarget { uri: url.to_string(), reason: "not a URL" })?;
        let (host, port) = host_port(&uri)?;
        self.trust(&host, port);
        Ok(())
    }

    /// Takes what `other` trusts, from the next connection on.
    pub fn adopt(&self, other: &AddressPolicy) {
        self.trusted.store(other.trusted.load_full());
    }

    /// True when `host:port` was trusted.
    pub fn is_trusted(&self, host: &str, port: u16) -> bool {
        self.trusted.load().contains(&(host.to_ascii_lowercase(), port))
    }

    /// The addresses of `addresses` that `host:port` may be connected to,
    /// or why none may.
    pub(crate) fn allowed(
        &self,
        host: &str,
        port: u16,
        addresses: Vec<SocketAddr>,
    ) -> Result<Vec<SocketAddr>, UpstreamError> {
        if self.is_trusted(host, port) {
            return Ok(addresses);
        }
        let mut refused = None;
        let allowed: Vec<SocketAddr> = addresses
            .into_iter()
            .filter(|a| match local_kind(a.ip()) {
                Some(kind) => {
                    refused.get_or_insert((a.ip(), kind));
                    false
                }
                None => true,
            })
            .collect();
        match (allowed.is_empty(), refused) {
            (true, Some((address, kind))) => Err(UpstreamError::Forbidden { host: host.to_string(), address, kind }),
            _ => Ok(allowed),
        }
    }
}

/// The host and port a URI names (port defaulting by scheme).
pub(crate) fn host_port(uri: &http::Uri) -> Result<(String, u16), UpstreamError> {
    let bad = |reason| UpstreamError::BadTarget { uri: uri.to_string(), reason };
    let host = uri.host().ok_or_else(|| bad("no host"))?;
    let default_port = match uri.scheme_str() {
        Some("http") => 80,
        Some("https") => 443,
        _ => return Err(bad("only http:// and https:// upstreams are supported")),
    };
    let port = uri.port_u16().unwrap_or(default_port);
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn untrusted_hosts_may_not_reach_local_addresses() {
        let policy = AddressPolicy::default();
        let err = policy.allowed("deb.debian.org", 80, vec![addr("127.0.0.1:80")]).unwrap_err();
        assert!(err.is_forbidden());
        let mixed = policy.allowed("deb.debian.org", 80, vec![addr("10.0.0.1:80"), addr("151.101.2.132:80")]).unwrap();
        assert_eq!(mixed, vec![addr("151.101.2.132:80")]);
    }

    #[test]
    fn a_trusted_host_may_on_its_port_and_only_there() {
        let mut policy = AddressPolicy::default();
        policy.trust("mirror.lan", 80);
        policy.trust_url("https://[::1]/store").unwrap();
        policy.trust_url("http://10.1.2.3:8080/debian").unwrap();
        assert_eq!(policy.allowed("MIRROR.lan", 80, vec![addr("192.168.0.5:80")]).unwrap().len(), 1);
        assert!(policy.allowed("mirror.lan", 8081, vec![addr("192.168.0.5:8081")]).unwrap_err().is_forbidden());
        assert!(policy.is_trusted("::1", 443) && policy.is_trusted("10.1.2.3", 8080));
        assert!(!policy.is_trusted("10.1.2.3", 80), "another port of a configured host");
        assert!(policy.trust_url("ftp://mirror.lan/").is_err());
    }

    #[tokio::test]
    async fn pinned_addresses_win_over_dns() {
        let mut resolver = Resolver::default();
        resolver.pin("deb.debian.org", 80, vec![addr("127.0.0.1:8080")]);
        assert_eq!(resolver.resolve("DEB.debian.org", 80).await.unwrap(), vec![addr("127.0.0.1:8080")]);
        assert_eq!(resolver.resolve("127.0.0.2", 81).await.unwrap(), vec![addr("127.0.0.2:81")]);
    }
}
