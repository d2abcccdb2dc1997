//! `GET /metrics` on the stats socket: the counters of `/pkgproxy/v1/info`
//! in Prometheus' text format, for scraping (through a socket-to-TCP
//! bridge, or node_exporter's textfile collector fed by curl).

use std::fmt::Write;

use pkgproxy_upstream::offline::Mode;

use super::info::{Info, InstanceInfo};
use crate::shadow::ShadowReport;
use crate::stats::SideSnapshot;

/// A per-side counter: its name, its help, and how to read it.
type SideCounter = (&'static str, &'static str, fn(&SideSnapshot) -> u64);

/// The text exposition of `info`.
pub fn render(info: &Info) -> String {
    let mut out = String::new();
    let sides: Vec<_> = info.sides.iter().collect();
    let per_side: [SideCounter; 8] = [
        ("requests_total", "Requests a side classified.", |s| s.requests),
        ("hits_total", "Requests answered from the cache.", |s| s.hits),
        ("misses_total", "Requests answered from an upstream.", |s| s.misses),
        ("revalidations_total", "Cached entries an upstream confirmed.", |s| s.revalidations),
        ("stale_served_total", "Stale entries served when revalidation failed.", |s| s.stale_served),
        ("refused_total", "Requests refused by a side's policy.", |s| s.refused),
        ("bytes_from_cache_total", "Body bytes sent from the cache.", |s| s.bytes_from_cache),
        ("bytes_from_upstream_total", "Body bytes received from upstreams.", |s| s.bytes_from_upstream),
    ];
    for (name, help, value) in per_side {
        header(&mut out, name, help, "counter");
        for (side, snapshot) in &sides {
            let _ = writeln!(out, "pkgproxy_{name}{{side=\"{side}\"}} {}", value(snapshot));
        }
    }
    let single: [(&str, &str, &str, u64); 10] = [
        ("uptime_seconds", "Seconds since start.", "gauge", info.uptime_seconds),
        ("cache_entries", "Cached entries.", "gauge", info.cache.entries),
        ("cache_size_bytes", "Bytes of cached bodies.", "gauge", info.cache.size_bytes),
        ("fetches_in_progress", "Shared upstream fetches in progress.", "gauge", info.cache.fetches_in_progress),
        ("upstream_requests_total", "HTTP requests sent upstream.", "counter", info.upstream.requests),
        ("upstream_connections_total", "TCP connections opened upstream.", "counter", info.upstream.connections),
        ("upstream_tunnels_total", "CONNECT tunnels opened.", "counter", info.upstream.tunnels),
        ("upstream_refused_total", "Connections refused by the address policy.", "counter", info.upstream.refused),
        ("apt_index_suites", "Suites whose Release the apt index knows.", "gauge", info.apt_index.suites),
        ("apt_index_pool_files", "Pool files the apt index knows.", "gauge", info.apt_index.pool_files),
    ];
    for (name, help, kind, value) in single {
        header(&mut out, name, help, kind);
        let _ = writeln!(out, "pkgproxy_{name} {value}");
    }
    header(&mut out, "offline_mode", "The offline mode in effect (1 for the current one).", "gauge");
    for mode in Mode::ALL {
        let on = u8::from(mode.as_str() == info.offline.mode);
        let _ = writeln!(out, "pkgproxy_offline_mode{{mode=\"{mode}\"}} {on}");
    }
    header(&mut out, "breakers_not_closed", "Upstream hosts whose breaker is open or probing.", "gauge");
    let _ = writeln!(out, "pkgproxy_breakers_not_closed {}", info.offline.upstreams.len());
    render_pools(&mut out, info);
    render_mirrors(&mut out, info);
    out
}

/// A per-mirror counter: its name, its help, and how to read it.
type MirrorCounter = (&'static str, &'static str, fn(&ShadowReport) -> u64);

fn render_mirrors(out: &mut String, info: &Info) {
    let counters: [MirrorCounter; 8] = [
        ("mirror_sent_total", "Copies sent to a mirror.", |m| m.sent),
        ("mirror_answered_total", "Copies a mirror answered.", |m| m.answered),
        ("mirror_failed_total", "Copies that got no answer.", |m| m.failed),
        ("mirror_skipped_inflight_total", "Requests not copied: too many copies under way.", |m| m.skipped_inflight),
        ("mirror_skipped_size_total", "Requests not copied: body too large.", |m| m.skipped_size),
        ("mirror_skipped_offline_total", "Requests not copied: offline.", |m| m.skipped_offline),
        ("mirror_compared_total", "Copies whose status was compared.", |m| m.compared),
        ("mirror_differing_total", "Compared copies whose status differed.", |m| m.differing),
    ];
    for (name, help, value) in counters {
        header(out, name, help, "counter");
        for mirror in &info.mirrors {
            let _ = writeln!(out, "pkgproxy_{name}{{mirror=\"{}\"}} {}", label(&mirror.name), value(mirror));
        }
    }
}

/// A per-instance gauge: its name, its help, and how to read it.
type InstanceGauge = (&'static str, &'static str, fn(&InstanceInfo) -> u64);

fn render_pools(out: &mut String, info: &Info) {
    let gauges: [InstanceGauge; 3] = [
        ("upstream_instance_penalised", "1 while an upstream instance is left out of its pool.", |i| {
            u64::from(i.penalised_for_ms.is_some())
        }),
        ("upstream_instance_failures", "Failures in a row of an upstream instance.", |i| u64::from(i.failures)),
        ("upstream_instance_in_flight", "Requests in flight to an upstream instance.", |i| u64::from(i.in_flight)),
    ];
    for (name, help, value) in gauges {
        header(out, name, help, "gauge");
        for pool in &info.pools {
            for instance in &pool.instances {
                let (pool_name, url) = (label(&pool.name), label(&instance.url));
                let _ = writeln!(out, "pkgproxy_{name}{{pool=\"{pool_name}\",instance=\"{url}\"}} {}", value(instance));
            }
        }
    }
}

/// A label value, escaped as the text format wants.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP pkgproxy_{name} {help}");
    let _ = writeln!(out, "# TYPE pkgproxy_{name} {kind}");
}
