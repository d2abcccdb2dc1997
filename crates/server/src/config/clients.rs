//! `[server]`'s limits on the proxy listener's clients: who may connect,
//! how many connections (and HTTP/2 streams) at once, and how long a
//! connection may take to ask, stay idle or take its answer. pkgproxy listens on every interface by default: these
//! keep one misbehaving host from taking every file descriptor, and a
//! pkgproxy on a public address from being an open cache for the internet.

use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

use super::file::ServerSection;

/// How long a client may take to send a request's head, from its
/// connection or from the first byte of the head.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a keep-alive connection may wait for its next request.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a client may take nothing of an answer it was sent: an
/// HTTP/1.1 write that makes no progress, an HTTP/2 connection whose
/// streams wait on its flow-control window (see `gateway::http2`).
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// Client connections from one address, by default.
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: usize = 512;

/// How much of an IPv6 address names one client, by default: a network
/// hands a host a /64, in which it may take as many addresses as it likes
/// (what rate limiters count by too).
pub const DEFAULT_IPV6_CLIENT_PREFIX: u8 = 64;

/// Client connections in all, when the file limit is not known.
pub const DEFAULT_MAX_CONNECTIONS: usize = 8192;

/// The client networks served by default: loopback, the private ranges
/// (RFC 1918, shared address space, unique local) and link-local.
pub const DEFAULT_ALLOW: [&str; 9] = [
    "127.0.0.0/8",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "::1/128",
    "fc00::/7",
    "fe80::/10",
];

/// The limits, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientLimits {
    /// See [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// See [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// See [`DEFAULT_SEND_TIMEOUT`].
    pub send_timeout: Duration,
    /// Client connections open at once; beyond, new ones get a `503`.
    pub max_connections: usize,
    /// The same, from one client: one IPv4 address, or the IPv6 addresses
    /// that share their first `ipv6_client_prefix` bits. An HTTP/2
    /// connection's streams being answered count too, one each.
    pub max_connections_per_client: usize,
    /// See [`DEFAULT_IPV6_CLIENT_PREFIX`].
    pub ipv6_client_prefix: u8,
    /// The networks served; others get a `403`.
    pub allow: Vec<IpNet>,
}

/// A `[server]` client setting that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClientsError {
    /// An `allow` entry that is not a network.
    #[error("server.allow entry {0:?}: not an address or a network such as 10.0.0.0/8 or fd00::/8")]
    Allow(String),
    /// An `ipv6_client_prefix` longer than an address.
    #[error("server.ipv6_client_prefix {0}: an IPv6 prefix is 0 to 128 bits")]
    Prefix(u8),
}

impl ClientLimits {
    /// The limits `section` sets, the defaults elsewhere.
    pub fn new(section: &ServerSection) -> Result<Self, ClientsError> {
        let allow = match &section.allow {
            Some(entries) => entries.iter().map(|entry| network(entry)).collect::<Result<Vec<_>, _>>()?,
            None => DEFAULT_ALLOW.iter().map(|entry| network(entry)).collect::<Result<Vec<_>, _>>()?,
        };
        Ok(ClientLimits {
            header_read_timeout: section.header_read_timeout.unwrap_or(DEFAULT_HEADER_READ_TIMEOUT),
            idle_timeout: section.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT),
            send_timeout: section.send_timeout.unwrap_or(DEFAULT_SEND_TIMEOUT),
            max_connections: section.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS).max(1),
            max_connections_per_client: section
                .max_connections_per_client
                .unwrap_or(DEFAULT_MAX_CONNECTIONS_PER_CLIENT)
                .max(1),
            ipv6_client_prefix: match section.ipv6_client_prefix.unwrap_or(DEFAULT_IPV6_CLIENT_PREFIX) {
                prefix @ 0..=128 => prefix,
                prefix => return Err(ClientsError::Prefix(prefix)),
            },
            allow,
        })
    }

    /// Who a connection from `address` counts against: an IPv4 address
    /// (also as `::ffff:a.b.c.d`), or the IPv6 network of its first
    /// `ipv6_client_prefix` bits.
    pub fn client_of(&self, address: IpAddr) -> IpAddr {
        match address.to_canonical() {
            IpAddr::V6(v6) => ipnet::Ipv6Net::new(v6, self.ipv6_client_prefix)
                .map_or(IpAddr::V6(v6), |network| IpAddr::V6(network.network())),
            v4 => v4,
        }
    }

    /// Whether a client at `address` is served (an IPv4 client of a
    /// dual-stack listener shows as `::ffff:a.b.c.d`: it counts as IPv4).
    pub fn allows(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.allow.iter().any(|network| network.contains(&address))
    }
}

/// The most client connections for a file limit of `open_files`: half of
/// what is left after a reserve for the cache's files and the logs, the
/// other half for upstream connections and held blobs.
pub fn connections_for_file_limit(open_files: u64) -> usize {
    const RESERVE: u64 = 256;
    usize::try_from(open_files.saturating_sub(RESERVE) / 2).unwrap_or(usize::MAX).clamp(64, 1 << 20)
}

/// `entry` as a network: `10.0.0.0/8`, or one address (`192.0.2.7`).
fn network(entry: &str) -> Result<IpNet, ClientsError> {
    let entry = entry.trim();
    entry
        .parse::<IpNet>()
        .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
        .map(|network| network.trunc())
        .map_err(|_| ClientsError::Allow(entry.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(allow: Option<&[&str]>) -> ClientLimits {
        let section = ServerSection {
            allow: allow.map(|entries| entries.iter().map(|entry| entry.to_string()).collect()),
            ..ServerSection::default()
        };
        ClientLimits::new(&section).unwrap()
    }

    #[test]
    fn by_default_loopback_and_private_networks_are_served_and_public_ones_are_not() {
        let limits = limits(None);
        for served in
            ["127.0.0.1", "10.1.2.3", "192.168.1.9", "172.31.0.1", "169.254.1.1", "::1", "fd12::1", "::ffff:10.0.0.7"]
        {
            assert!(limits.allows(served.parse().unwrap()), "{served}");
        }
        for refused in ["8.8.8.8", "172.32.0.1", "2001:db8::1", "::ffff:8.8.8.8"] {
            assert!(!limits.allows(refused.parse().unwrap()), "{refused}");
        }
        assert_eq!(
            (limits.header_read_timeout, limits.idle_timeout, limits.send_timeout),
            (DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_SEND_TIMEOUT)
        );
    }

    #[test]
    fn allow_takes_networks_and_single_addresses_and_names_a_bad_entry() {
        let limits = limits(Some(&["127.0.0.1", "203.0.113.0/24", "0.0.0.0/0"][..2]));
        assert!(limits.allows("127.0.0.1".parse().unwrap()));
        assert!(!limits.allows("127.0.0.2".parse().unwrap()));
        assert!(limits.allows("203.0.113.77".parse().unwrap()));
        let section = ServerSection { allow: Some(vec!["10.0.0.0/33".into()]), ..ServerSection::default() };
        assert_eq!(ClientLimits::new(&section).unwrap_err(), ClientsError::Allow("10.0.0.0/33".into()));
        let section = ServerSection { ipv6_client_prefix: Some(129), ..ServerSection::default() };
        assert_eq!(ClientLimits::new(&section).unwrap_err(), ClientsError::Prefix(129));
    }

    #[test]
    fn the_connection_cap_follows_the_file_limit() {
        assert_eq!(connections_for_file_limit(1024), 384);
        assert_eq!(connections_for_file_limit(65536), 32640);
        assert_eq!(connections_for_file_limit(100), 64);
    }
}
