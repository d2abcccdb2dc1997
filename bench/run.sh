#!/usr/bin/env bash
# Builds pkgproxy in release mode and measures it in the shared benchmark
# harness (../shared/bench, or $BENCH_HARNESS) beside nginx proxy_cache and
# the other anchors, in one run. Extra settings pass through to the harness:
#   PROXIES="origin nginx pkgproxy" SCENARIOS="small large cold" bench/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
harness=${BENCH_HARNESS:-$root/../shared/bench}
[ -x "$harness/run.sh" ] || { echo "bench/run.sh: no harness at $harness (set BENCH_HARNESS)" >&2; exit 1; }

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy

export PKGPROXY_BIN="$root/target/release/pkgproxy"
export PKGPROXY_ARGS='-addr 127.0.0.1:{port} -cache-dir {cache} -config {conf} -stats-socket-path {dir}/stats.sock -admin-socket-path {dir}/admin.sock -log-level warn'
# The harness's origin is a configured archive: it lives on 127.0.0.1. The
# load generator is one address: the per-client connection cap is lifted.
export PKGPROXY_CONF='[[apt.archive]]
name = "bench"
mirrors = ["{origin}/debian"]
[server]
max_connections_per_client = 100000
max_connections = 100000'
export PROXIES=${PROXIES:-"origin nginx pkgproxy"}
cd "$harness"
exec ./run.sh
