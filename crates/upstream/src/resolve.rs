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

/// Which hosts may be reached on local addresses. Its clones share what
/// they trust, so a reload ([`AddressPolicy::adopt`]) reaches every
/// connector at once.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    trusted: Arc<ArcSwap<HashSet<String>>>,
}

impl AddressPolicy {
    /// Lets `host` resolve to loopback, private or link-local addresses (a
    /// configured archive on the local network).
    pub fn trust(&mut self, host: &str) {
        let mut trusted = HashSet::clone(&self.trusted.load());
        trusted.insert(host.to_ascii_lowercase());
        self.trusted.store(Arc::new(trusted));
    }

    /// Takes what `other` trusts, from the next connection on.
    pub fn adopt(&self, other: &AddressPolicy) {
        self.trusted.store(other.trusted.load_full());
    }

    /// True when `host` was trusted.
    pub fn is_trusted(&self, host: &str) -> bool {
        self.trusted.load().contains(&host.to_ascii_lowercase())
    }

    /// The addresses of `addresses` that `host` may be connected to, or why
    /// none may.
    pub(crate) fn allowed(&self, host: &str, addresses: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, UpstreamError> {
        if self.is_trusted(host) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn untrusted_hosts_may_not_reach_local_addresses() {
        let policy = AddressPolicy::default();
        let err = policy.allowed("deb.debian.org", vec![addr("127.0.0.1:80")]).unwrap_err();
        assert!(err.is_forbidden());
        let mixed = policy.allowed("deb.debian.org", vec![addr("10.0.0.1:80"), addr("151.101.2.132:80")]).unwrap();
        assert_eq!(mixed, vec![addr("151.101.2.132:80")]);
    }

    #[test]
    fn trusted_hosts_may() {
        let mut policy = AddressPolicy::default();
        policy.trust("mirror.lan");
        assert_eq!(policy.allowed("MIRROR.lan", vec![addr("192.168.0.5:80")]).unwrap().len(), 1);
    }

    #[tokio::test]
    async fn pinned_addresses_win_over_dns() {
        let mut resolver = Resolver::default();
        resolver.pin("deb.debian.org", 80, vec![addr("127.0.0.1:8080")]);
        assert_eq!(resolver.resolve("DEB.debian.org", 80).await.unwrap(), vec![addr("127.0.0.1:8080")]);
        assert_eq!(resolver.resolve("127.0.0.2", 81).await.unwrap(), vec![addr("127.0.0.2:81")]);
    }
}
