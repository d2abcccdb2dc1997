//! The sets of metrics pkgproxy keeps. Adding one is a variant here, its
//! name and help in `definition`, and the places that count it.

use crate::{Definition, Kind, MetricSet};

/// What a side did with its requests (one set per side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideCounter {
    /// Requests the side served through the cache or forwarded.
    Requests,
    /// Answered from the cache (fresh, revalidated or stale).
    Hits,
    /// Answered from the upstream (or with an upstream error).
    Misses,
    /// Cached entries an upstream confirmed (`304`).
    Revalidations,
    /// Stale entries served because the upstream could not confirm them.
    StaleServed,
    /// Requests refused with a `4xx`: the side's policy, offline mode, an
    /// open breaker.
    Refused,
    /// Requests pkgproxy could not answer as asked (`5xx`): the upstream
    /// failed or could not be asked, and nothing cached would do.
    Failed,
    /// Body bytes sent to clients from the cache.
    BytesFromCache,
    /// Body bytes received from upstreams.
    BytesFromUpstream,
}

impl MetricSet for SideCounter {
    const ALL: &'static [Self] = &[
        SideCounter::Requests,
        SideCounter::Hits,
        SideCounter::Misses,
        SideCounter::Revalidations,
        SideCounter::StaleServed,
        SideCounter::Refused,
        SideCounter::Failed,
        SideCounter::BytesFromCache,
        SideCounter::BytesFromUpstream,
    ];
    const KIND: Kind = Kind::Counter;
    const PROMETHEUS_PREFIX: &'static str = "";

    fn definition(self) -> Definition {
        let (name, help) = match self {
            SideCounter::Requests => ("requests", "Requests a side served: each one hit, miss, refusal or failure."),
            SideCounter::Hits => ("hits", "Requests answered from the cache."),
            SideCounter::Misses => ("misses", "Requests answered from an upstream."),
            SideCounter::Revalidations => ("revalidations", "Cached entries an upstream confirmed."),
            SideCounter::StaleServed => ("stale_served", "Stale entries served when revalidation failed."),
            SideCounter::Refused => {
                ("refused", "Requests refused with a 4xx: a side's policy, offline mode, an open breaker.")
            }
            SideCounter::Failed => {
                ("failed", "Requests answered with a 5xx: the upstream failed, nothing cached would do.")
            }
            SideCounter::BytesFromCache => ("bytes_from_cache", "Body bytes sent from the cache."),
            SideCounter::BytesFromUpstream => ("bytes_from_upstream", "Body bytes received from upstreams."),
        };
        Definition { name, help }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What went out through the one way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamCounter {
    /// HTTP requests sent upstream.
    Requests,
    /// TCP connections opened upstream (requests and tunnels).
    Connections,
    /// CONNECT tunnels opened.
    Tunnels,
    /// Connections refused by the address policy (upstreams and shadow
    /// targets alike).
    Refused,
    /// Copies sent to shadow targets (their own clients, apart from the
    /// upstream traffic above).
    ShadowRequests,
    /// TCP connections opened to shadow targets.
    ShadowConnections,
    /// Requests sent to the other nodes of the cluster (their own clients,
    /// apart from the upstream traffic above).
    PeerRequests,
    /// TCP connections opened to the other nodes of the cluster.
    PeerConnections,
}

impl MetricSet for UpstreamCounter {
    const ALL: &'static [Self] = &[
        UpstreamCounter::Requests,
        UpstreamCounter::Connections,
        UpstreamCounter::Tunnels,
        UpstreamCounter::Refused,
        UpstreamCounter::ShadowRequests,
        UpstreamCounter::ShadowConnections,
        UpstreamCounter::PeerRequests,
        UpstreamCounter::PeerConnections,
    ];
    const KIND: Kind = Kind::Counter;
    const PROMETHEUS_PREFIX: &'static str = "upstream_";

    fn definition(self) -> Definition {
        let (name, help) = match self {
            UpstreamCounter::Requests => ("requests", "HTTP requests sent upstream."),
            UpstreamCounter::Connections => ("connections", "TCP connections opened upstream."),
            UpstreamCounter::Tunnels => ("tunnels", "CONNECT tunnels opened."),
            UpstreamCounter::Refused => ("refused", "Connections refused by the address policy."),
            UpstreamCounter::ShadowRequests => ("mirror_requests", "Copies sent to mirror targets."),
            UpstreamCounter::ShadowConnections => ("mirror_connections", "TCP connections opened to mirror targets."),
            UpstreamCounter::PeerRequests => ("peer_requests", "Requests sent to the other nodes of the cluster."),
            UpstreamCounter::PeerConnections => ("peer_connections", "TCP connections opened to other nodes."),
        };
        Definition { name, help }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What one shadow (`[mirror.NAME]`) did with the copies of the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowCounter {
    /// Copies sent.
    Sent,
    /// Copies the target answered (any status).
    Answered,
    /// Copies that got no answer (refused, reset, timed out).
    Failed,
    /// Requests not copied: `max_inflight` copies were under way.
    SkippedInflight,
    /// Requests not copied: their body was larger than `max_body_size`.
    SkippedSize,
    /// Requests not copied: offline mode was in effect.
    SkippedOffline,
    /// Copies whose status was set against the upstream's.
    Compared,
    /// Of those, the ones that differed.
    Differing,
}

impl MetricSet for ShadowCounter {
    const ALL: &'static [Self] = &[
        ShadowCounter::Sent,
        ShadowCounter::Answered,
        ShadowCounter::Failed,
        ShadowCounter::SkippedInflight,
        ShadowCounter::SkippedSize,
        ShadowCounter::SkippedOffline,
        ShadowCounter::Compared,
        ShadowCounter::Differing,
    ];
    const KIND: Kind = Kind::Counter;
    const PROMETHEUS_PREFIX: &'static str = "mirror_";

    fn definition(self) -> Definition {
        let (name, help) = match self {
            ShadowCounter::Sent => ("sent", "Copies sent to a mirror."),
            ShadowCounter::Answered => ("answered", "Copies a mirror answered."),
            ShadowCounter::Failed => ("failed", "Copies that got no answer."),
            ShadowCounter::SkippedInflight => ("skipped_inflight", "Requests not copied: too many copies under way."),
            ShadowCounter::SkippedSize => ("skipped_size", "Requests not copied: body too large."),
            ShadowCounter::SkippedOffline => ("skipped_offline", "Requests not copied: offline."),
            ShadowCounter::Compared => ("compared", "Copies whose status was compared."),
            ShadowCounter::Differing => ("differing", "Compared copies whose status differed."),
        };
        Definition { name, help }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What the cache holds, read when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheGauge {
    /// Cached entries.
    Entries,
    /// Bytes of cached bodies.
    SizeBytes,
    /// Shared upstream fetches in progress.
    FetchesInProgress,
    /// Bytes the cache takes on disk: each blob once, and the index.
    DiskBytes,
    /// The quota (`[cache] max_size`; `0`: none).
    MaxSizeBytes,
    /// Free bytes on the cache's file system.
    FreeBytes,
    /// `1` while the cache's file system has less free space than
    /// `[cache] min_free`.
    DiskPressure,
}

impl MetricSet for CacheGauge {
    const ALL: &'static [Self] = &[
        CacheGauge::Entries,
        CacheGauge::SizeBytes,
        CacheGauge::FetchesInProgress,
        CacheGauge::DiskBytes,
        CacheGauge::MaxSizeBytes,
        CacheGauge::FreeBytes,
        CacheGauge::DiskPressure,
    ];
    const KIND: Kind = Kind::Gauge;
    const PROMETHEUS_PREFIX: &'static str = "cache_";

    fn definition(self) -> Definition {
        let (name, help) = match self {
            CacheGauge::Entries => ("entries", "Cached entries."),
            CacheGauge::SizeBytes => ("size_bytes", "Bytes of cached bodies."),
            CacheGauge::FetchesInProgress => ("fetches_in_progress", "Shared upstream fetches in progress."),
            CacheGauge::DiskBytes => ("disk_bytes", "Bytes the cache takes on disk (each blob once, and the index)."),
            CacheGauge::MaxSizeBytes => ("max_size_bytes", "The cache's quota (0: none)."),
            CacheGauge::FreeBytes => ("free_bytes", "Free bytes on the cache's file system."),
            CacheGauge::DiskPressure => ("disk_pressure", "1 while free space is under [cache] min_free."),
        };
        Definition { name, help }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The access log's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessLogCounter {
    /// Lines written.
    Written,
    /// Lines dropped: the writer was behind (the requests were served).
    Dropped,
}

impl MetricSet for AccessLogCounter {
    const ALL: &'static [Self] = &[AccessLogCounter::Written, AccessLogCounter::Dropped];
    const KIND: Kind = Kind::Counter;
    const PROMETHEUS_PREFIX: &'static str = "access_log_";

    fn definition(self) -> Definition {
        let (name, help) = match self {
            AccessLogCounter::Written => ("written", "Access log lines written."),
            AccessLogCounter::Dropped => ("dropped", "Access log lines dropped because the writer was behind."),
        };
        Definition { name, help }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The proxy listener's client connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCounter {
    /// Connections admitted.
    Accepted,
    /// Connections from outside `[server] allow`, refused.
    RefusedNotAllowed,
    /// Connections over `max_connections`, refused.
    RefusedFull,
    /// Connections over `max_connections_per_client`, refused.
    RefusedClientFull,
    /// Connections closed: a request's head did not arrive in time.
    HeaderTimeouts,
    /// Keep-alive connections closed after idling too long.
    IdleTimeouts,
    /// Requests refused as malformed (a URI too long, a `Transfer-Encoding`).
    Malformed,
    /// Connections closed: the client took nothing of an answer for
    /// `send_timeout`.
    SendTimeouts,
    /// HTTP/2 streams refused: the client's connections and streams being
    /// answered took `max_connections_per_client`.
    RefusedClientStreams,
    /// Bytes of cached bodies the kernel sent to clients (`sendfile(2)`),
    /// never passing through pkgproxy's memory: large hits on plain
    /// HTTP/1.1. It pins that path, which a change in how hyper hands
    /// frames over would silently turn back into copies.
    KernelSentBytes,
}

impl MetricSet for ClientCounter {
    const ALL: &'static [Self] = &[
        ClientCounter::Accepted,
        ClientCounter::RefusedNotAllowed,
        ClientCounter::RefusedFull,
        ClientCounter::RefusedClientFull,
        ClientCounter::HeaderTimeouts,
        ClientCounter::IdleTimeouts,
        ClientCounter::Malformed,
        ClientCounter::SendTimeouts,
        ClientCounter::RefusedClientStreams,
        ClientCounter::KernelSentBytes,
    ];
    const KIND: Kind = Kind::Counter;
    const PROMETHEUS_PREFIX: &'static str = "clients_";

    fn definition(self) -> Definition {
        let (name, help) = match self {
            ClientCounter::Accepted => ("accepted", "Client connections admitted."),
            ClientCounter::RefusedNotAllowed => {
                ("refused_not_allowed", "Client connections from outside [server] allow.")
            }
            ClientCounter::RefusedFull => ("refused_full", "Client connections refused: max_connections were open."),
            ClientCounter::RefusedClientFull => (
                "refused_client_full",
                "Client connections refused: max_connections_per_client were open from the address.",
            ),
            ClientCounter::HeaderTimeouts => {
                ("header_timeouts", "Connections closed: a request head did not arrive in time.")
            }
            ClientCounter::IdleTimeouts => ("idle_timeouts", "Keep-alive connections closed after idling too long."),
            ClientCounter::Malformed => {
                ("malformed", "Requests refused as malformed (URI too long, Transfer-Encoding).")
            }
            ClientCounter::SendTimeouts => {
                ("send_timeouts", "Connections closed: the client took nothing of an answer for send_timeout.")
            }
            ClientCounter::RefusedClientStreams => (
                "refused_client_streams",
                "HTTP/2 streams refused: the address's connections and streams took max_connections_per_client.",
            ),
            ClientCounter::KernelSentBytes => (
                "kernel_sent_bytes",
                "Bytes of cached bodies sent to clients by the kernel (sendfile): large hits on plain HTTP/1.1.",
            ),
        };
        Definition { name, help }
    }

    fn index(self) -> usize {
        self as usize
    }
}
