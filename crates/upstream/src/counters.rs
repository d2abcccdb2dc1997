//! What the way out has done, counted (the counters are defined with the
//! others, in `pkgproxy-metrics`). Tests compare these counts with what
//! their fake upstreams saw: a connection or request the fake saw but the
//! counters did not means something reached the network another way.

pub use pkgproxy_metrics::UpstreamCounter;

/// The way out's counters, shared by the transport, the dialer and the
/// shadow client.
pub type Counters = pkgproxy_metrics::Counters<UpstreamCounter>;
