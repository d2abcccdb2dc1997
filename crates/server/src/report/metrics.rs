//! `GET /metrics` on the stats socket (and on the listener with `[status]
//! metrics = true`): the counters and timings of `/pkgproxy/v1/info` in
//! Prometheus' text format, for scraping (through a socket-to-TCP bridge,
//! or node_exporter's textfile collector fed by curl). Every name and help
//! comes from the one definition of each metric. `docs/admin.md` lists
//! every family this writes, checked against it by the tests below.

use std::fmt::Write;

use pkgproxy_control::{Info, InstanceInfo};
use std::collections::BTreeMap;

use pkgproxy_metrics::{HistogramsSnapshot, Kind, MetricSet, SideCounter, Snapshot, Timing};
use pkgproxy_sides::Learned;
use pkgproxy_upstream::offline::Mode;

/// The text exposition of `info`, with the help of what the sides learnt.
pub fn render(info: &Info, learned: &[Learned]) -> String {
    let mut out = String::new();
    render_build(&mut out, info);
    let sides: Vec<(String, &Snapshot<_>)> =
        info.sides.iter().map(|(side, snapshot)| (format!("side=\"{}\"", label(side)), snapshot)).collect();
    render_set(&mut out, &sides);
    let own: Vec<(String, &Snapshot<SideCounter>)> =
        info.own_requests.iter().map(|(side, snapshot)| (format!("side=\"{}\"", label(side)), snapshot)).collect();
    render_own(&mut out, &own);
    render_timings(&mut out, &info.timings);
    render_set(&mut out, &[(String::new(), &info.upstream)]);
    render_set(&mut out, &[(String::new(), &info.cache)]);
    render_set(&mut out, &[(String::new(), &info.access_log)]);
    render_set(&mut out, &[(String::new(), &info.clients)]);
    header(&mut out, "pkgproxy_clients_open", "Client connections open now.", Kind::Gauge);
    let _ = writeln!(out, "pkgproxy_clients_open {}", info.connections_open);
    if let Some(cluster) = &info.cluster {
        render_cluster(&mut out, cluster);
    }
    let shadows: Vec<(String, &Snapshot<_>)> =
        info.mirrors.iter().map(|shadow| (format!("mirror=\"{}\"", label(&shadow.name)), &shadow.counters)).collect();
    render_set(&mut out, &shadows);
    header(&mut out, "pkgproxy_uptime_seconds", "Seconds since start.", Kind::Gauge);
    let _ = writeln!(out, "pkgproxy_uptime_seconds {}", info.uptime_seconds);
    for count in learned {
        let name = format!("pkgproxy_{}_{}", count.group, count.name);
        header(&mut out, &name, count.help, Kind::Gauge);
        let _ = writeln!(out, "{name} {}", count.value);
    }
    header(&mut out, "pkgproxy_offline_mode", "The offline mode in effect (1 for the current one).", Kind::Gauge);
    for mode in Mode::ALL {
        let on = u8::from(mode.as_str() == info.offline.mode);
        let _ = writeln!(out, "pkgproxy_offline_mode{{mode=\"{mode}\"}} {on}");
    }
    let breakers = "pkgproxy_breakers_not_closed";
    header(&mut out, breakers, "Upstream hosts whose breaker is open or probing.", Kind::Gauge);
    let _ = writeln!(out, "{breakers} {}", info.offline.upstreams.len());
    render_policy(&mut out, &info.policy_blocked);
    render_pools(&mut out, info);
    out
}

/// Every metric of a set, one line per labelled snapshot.
fn render_set<S: MetricSet>(out: &mut String, rows: &[(String, &Snapshot<S>)]) {
    if rows.is_empty() {
        return;
    }
    for &metric in S::ALL {
        let name = metric.prometheus_name();
        header(out, &name, metric.definition().help, S::KIND);
        for (labels, snapshot) in rows {
            let value = snapshot.get(metric);
            match labels.is_empty() {
                true => _ = writeln!(out, "{name} {value}"),
                false => _ = writeln!(out, "{name}{{{labels}}} {value}"),
            }
        }
    }
}

/// The counters of pkgproxy's own requests, each named as its clients'
/// counterpart with `own_` before it (`pkgproxy_own_hits_total`).
fn render_own(out: &mut String, rows: &[(String, &Snapshot<SideCounter>)]) {
    for &metric in SideCounter::ALL {
        let name = metric.prometheus_name().replacen("pkgproxy_", "pkgproxy_own_", 1);
        let help = format!(
            "pkgproxy's own requests (check, warm, fetch-ahead, prerequisites, bundles): {}",
            metric.definition().help
        );
        header(out, &name, &help, Kind::Counter);
        for (labels, snapshot) in rows {
            let _ = writeln!(out, "{name}{{{labels}}} {}", snapshot.get(metric));
        }
    }
}

/// What was built: `1`, its labels saying the version and commit.
fn render_build(out: &mut String, info: &Info) {
    let help = "pkgproxy's version and the commit it was built from (unknown when its build was not told); always 1.";
    header(out, "pkgproxy_build_info", help, Kind::Gauge);
    let (version, commit) = (label(&info.version), label(&info.commit));
    let _ = writeln!(out, "pkgproxy_build_info{{version=\"{version}\",commit=\"{commit}\"}} 1");
}

/// Each side's histograms: cumulative buckets up to `+Inf`, their sum and
/// count.
fn render_timings(out: &mut String, timings: &BTreeMap<String, HistogramsSnapshot<Timing>>) {
    for &timing in Timing::ALL {
        let name = timing.prometheus_name();
        header(out, &name, timing.definition().help, Kind::Histogram);
        for (side, histograms) in timings {
            let side = label(side);
            let histogram = histograms.get(timing);
            for (bound, count) in histogram.buckets() {
                let le = bound.map_or_else(|| "+Inf".to_string(), |bound| bound.to_string());
                let _ = writeln!(out, "{name}_bucket{{side=\"{side}\",le=\"{le}\"}} {count}");
            }
            let _ = writeln!(out, "{name}_sum{{side=\"{side}\"}} {}", histogram.sum_seconds());
            let _ = writeln!(out, "{name}_count{{side=\"{side}\"}} {}", histogram.count());
        }
    }
}

/// The requests the fleet's policy refused, by side and rule.
fn render_policy(out: &mut String, blocked: &[pkgproxy_control::BlockedCount]) {
    let name = "pkgproxy_policy_blocked_total";
    let help =
        "Client requests the fleet's policy refused, by side and rule (malicious, not_after, min_age, unknown_time).";
    header(out, name, help, Kind::Counter);
    for count in blocked {
        let (side, rule) = (label(&count.side), label(&count.rule));
        let _ = writeln!(out, "{name}{{side=\"{side}\",rule=\"{rule}\"}} {}", count.count);
    }
}

/// A per-instance gauge: its name, its help, and how to read it.
type InstanceGauge = (&'static str, &'static str, fn(&InstanceInfo) -> u64);

fn render_pools(out: &mut String, info: &Info) {
    let gauges: [InstanceGauge; 3] = [
        ("pkgproxy_upstream_instance_penalised", "1 while an upstream instance is left out of its pool.", |i| {
            u64::from(i.penalised_for_ms.is_some())
        }),
        ("pkgproxy_upstream_instance_failures", "Failures in a row of an upstream instance.", |i| {
            u64::from(i.failures)
        }),
        ("pkgproxy_upstream_instance_in_flight", "Requests in flight to an upstream instance.", |i| {
            u64::from(i.in_flight)
        }),
    ];
    for (name, help, value) in gauges {
        header(out, name, help, Kind::Gauge);
        for pool in &info.pools {
            for instance in &pool.instances {
                let (pool_name, url) = (label(&pool.name), label(&instance.url));
                let _ = writeln!(out, "{name}{{pool=\"{pool_name}\",instance=\"{url}\"}} {}", value(instance));
            }
        }
    }
}

/// A label value, escaped as the text format wants.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, help: &str, kind: Kind) {
    let kind = match kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        Kind::Histogram => "histogram",
    };
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A cluster node's gauges and counters.
fn render_cluster(out: &mut String, cluster: &pkgproxy_control::ClusterInfo) {
    header(
        out,
        "pkgproxy_cluster_degraded",
        "1 while this node works alone: its cluster store is unreachable or failing.",
        Kind::Gauge,
    );
    let _ = writeln!(out, "pkgproxy_cluster_degraded {}", u8::from(cluster.state == "degraded"));
    let counters = [
        ("pkgproxy_cluster_shared_hits_total", "Fetches answered from the cluster store.", cluster.shared_hits),
        ("pkgproxy_cluster_published_total", "Bodies this node published to the cluster store.", cluster.published),
        (
            "pkgproxy_cluster_corrupt_total",
            "Bodies read from the cluster store that did not match their hash.",
            cluster.corrupt,
        ),
        ("pkgproxy_cluster_errors_total", "Operations the cluster store failed.", cluster.errors),
    ];
    for (name, help, value) in counters {
        header(out, name, help, Kind::Counter);
        let _ = writeln!(out, "{name} {value}");
    }
}
