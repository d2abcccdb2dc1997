//! The forwarding role: forward-proxy requests a side takes beyond what the
//! route table gives it: blind tunnels to its upstreams' hosts (apt's
//! `https://` sources), and requests routed to another side that are its
//! own (the image files an LXD daemon sends through its proxy).

use crate::decision::Target;

/// Forward-proxy requests beyond the route table.
pub trait Forwarding: Send + Sync {
    /// Whether the side's clients may open a blind tunnel to `host`.
    fn tunnels_to(&self, _host: &str) -> bool {
        false
    }

    /// Whether the side serves a forward-proxy request for `target` that
    /// the route table gave another side.
    fn claims(&self, _target: &Target) -> bool {
        false
    }
}
