//! Counters per side, read by the stats socket. Plain atomics: a hit costs
//! a few relaxed increments, no lock and no allocation.

use std::sync::atomic::{AtomicU64, Ordering};

use pkgproxy_sides::SideId;
use serde::Serialize;

/// One side's counters.
#[derive(Debug, Default)]
pub struct SideStats {
    requests: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    revalidations: AtomicU64,
    stale_served: AtomicU64,
    refused: AtomicU64,
    bytes_from_cache: AtomicU64,
    bytes_from_upstream: AtomicU64,
}

/// A side's counters at one moment, as `/pkgproxy/v1/info` shows them.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct SideSnapshot {
    /// Requests the side classified.
    pub requests: u64,
    /// Answered from the cache (fresh, revalidated or stale).
    pub hits: u64,
    /// Answered with a body from the upstream (or an upstream error).
    pub misses: u64,
    /// Conditional requests that confirmed a cached entry (`304`).
    pub revalidations: u64,
    /// Stale entries served because the upstream could not revalidate them.
    pub stale_served: u64,
    /// Requests refused by the side's policy.
    pub refused: u64,
    /// Body bytes sent to clients from cached entries.
    pub bytes_from_cache: u64,
    /// Body bytes received from upstreams.
    pub bytes_from_upstream: u64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl SideStats {
    /// A request was classified.
    pub fn request(&self) {
        add(&self.requests, 1);
    }
    /// A request was refused.
    pub fn refused(&self) {
        add(&self.refused, 1);
    }
    /// Served from the cache, `bytes` of body.
    pub fn hit(&self, bytes: u64) {
        add(&self.hits, 1);
        add(&self.bytes_from_cache, bytes);
    }
    /// A cached entry was confirmed by the upstream.
    pub fn revalidated(&self) {
        add(&self.revalidations, 1);
    }
    /// A stale entry was served in place of a failed revalidation.
    pub fn stale(&self) {
        add(&self.stale_served, 1);
    }
    /// Answered from the upstream.
    pub fn miss(&self) {
        add(&self.misses, 1);
    }
    /// Body bytes arrived from the upstream.
    pub fn upstream_bytes(&self, bytes: u64) {
        add(&self.bytes_from_upstream, bytes);
    }

    /// The counters now.
    pub fn snapshot(&self) -> SideSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SideSnapshot {
            requests: get(&self.requests),
            hits: get(&self.hits),
            misses: get(&self.misses),
            revalidations: get(&self.revalidations),
            stale_served: get(&self.stale_served),
            refused: get(&self.refused),
            bytes_from_cache: get(&self.bytes_from_cache),
            bytes_from_upstream: get(&self.bytes_from_upstream),
        }
    }
}

/// The counters of every side.
#[derive(Debug, Default)]
pub struct Stats {
    sides: [SideStats; SideId::ALL.len()],
}

impl Stats {
    /// One side's counters.
    pub fn side(&self, side: SideId) -> &SideStats {
        &self.sides[side.index()]
    }
}
