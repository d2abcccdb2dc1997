//! Which kind of address an IP is, as far as pkgproxy's address policy is
//! concerned: loopback, link-local, private or not unicast at all (a
//! "local" address), or public.
//!
//! It lives apart so that the way out, which enforces the policy, and the
//! sides, which name it in their refusals, share one classification while
//! the sides link no networking code.

#![forbid(unsafe_code)]

use std::net::IpAddr;

/// Why an address counts as local. Public addresses have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalKind {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `169.254.0.0/16`, `fe80::/10`: cloud metadata services live here.
    LinkLocal,
    /// RFC 1918, shared address space (`100.64.0.0/10`), `fc00::/7`.
    Private,
    /// Unspecified, broadcast or multicast: nothing to connect to.
    NotUnicast,
}

impl LocalKind {
    /// The words used in refusals: "127.0.0.1 is a loopback address".
    pub fn as_str(self) -> &'static str {
        match self {
            LocalKind::Loopback => "loopback address",
            LocalKind::LinkLocal => "link-local address",
            LocalKind::Private => "private address",
            LocalKind::NotUnicast => "not a unicast address",
        }
    }
}

impl std::fmt::Display for LocalKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why `ip` counts as local, or `None` for a public address. An
/// IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
pub fn local_kind(ip: IpAddr) -> Option<LocalKind> {
    match ip {
        IpAddr::V4(v4) => {
            let [first, second, ..] = v4.octets();
            if v4.is_loopback() {
                Some(LocalKind::Loopback)
            } else if v4.is_link_local() {
                Some(LocalKind::LinkLocal)
            } else if v4.is_private() || first == 100 && (second & 0xc0) == 64 {
                Some(LocalKind::Private)
            } else if v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast() {
                Some(LocalKind::NotUnicast)
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return local_kind(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some(LocalKind::Loopback)
            } else if first & 0xffc0 == 0xfe80 {
                Some(LocalKind::LinkLocal)
            } else if first & 0xfe00 == 0xfc00 {
                Some(LocalKind::Private)
            } else if v6.is_unspecified() || v6.is_multicast() {
                Some(LocalKind::NotUnicast)
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_addresses_are_recognised() {
        let kind = |ip: &str| local_kind(ip.parse().unwrap());
        for (ip, expected) in [
            ("127.0.0.1", LocalKind::Loopback),
            ("::1", LocalKind::Loopback),
            ("::ffff:127.0.0.1", LocalKind::Loopback),
            ("169.254.169.254", LocalKind::LinkLocal),
            ("fe80::1", LocalKind::LinkLocal),
            ("10.1.2.3", LocalKind::Private),
            ("172.16.0.1", LocalKind::Private),
            ("192.168.1.1", LocalKind::Private),
            ("100.64.0.1", LocalKind::Private),
            ("fd00::1", LocalKind::Private),
            ("0.0.0.0", LocalKind::NotUnicast),
            ("255.255.255.255", LocalKind::NotUnicast),
            ("ff02::1", LocalKind::NotUnicast),
        ] {
            assert_eq!(kind(ip), Some(expected), "{ip}");
        }
        for public in ["151.101.2.132", "2a04:4e42::644", "8.8.8.8", "100.128.0.1"] {
            assert_eq!(kind(public), None, "{public} should be public");
        }
    }
}
