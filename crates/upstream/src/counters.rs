//! What the way out has done, counted. Tests compare these counts with what
//! their fake upstreams saw: a connection or request the fake saw but the
//! counters did not means something reached the network another way.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, shared by the transport and the dialer.
#[derive(Debug, Default)]
pub struct Counters {
    requests: AtomicU64,
    connections: AtomicU64,
    tunnels: AtomicU64,
    refused: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// HTTP requests sent by the transport.
    pub requests: u64,
    /// TCP connections opened (by the transport's pool and by the dialer).
    pub connections: u64,
    /// CONNECT tunnels opened by the dialer.
    pub tunnels: u64,
    /// Connections refused before any was attempted (address policy).
    pub refused: u64,
}

impl Counters {
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn tunnel(&self) {
        self.tunnels.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn refusal(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
            tunnels: self.tunnels.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}
