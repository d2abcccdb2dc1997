#!/usr/bin/env bash
# Slow readers: CLIENTS clients (default 1,000) each reading a cached
# 100 MiB package at RATE bytes a second (default 100 KiB/s), and while
# they read, a small-hit load on the same pkgproxy. Says pkgproxy's peak
# RSS while they read, and the small hits' throughput and p99 with them
# and alone, back to back.
#
#   bench/slow_readers.sh
#   CLIENTS=200 bench/slow_readers.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clients=${CLIENTS:-1000}
rate=${RATE:-102400}
duration=${DURATION:-10s}

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
cargo build --release --locked --manifest-path "$root/Cargo.toml" -p pkgproxy-server --example slow_readers
bin=$root/target/release/pkgproxy
readers_bin=$root/target/release/examples/slow_readers

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$work/origin/debian/pool/main/b/big" "$work/origin/debian/pool/main/s/small"
head -c $((100 << 20)) /dev/urandom >"$work/origin/debian/pool/main/b/big/big_1.0_amd64.deb"
for n in $(seq 0 99); do
    head -c 4096 /dev/urandom >"$work/origin/debian/pool/main/s/small/small${n}_1.0_amd64.deb"
done
origin_port=$(free_port)
(cd "$work/origin" && exec python3 -m http.server "$origin_port" --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)

port=$(free_port)
cat >"$work/pkgproxy.toml" <<TOML
[[apt.archive]]
name = "bench"
mirrors = ["http://127.0.0.1:$origin_port/debian"]
[server]
max_connections_per_client = 100000
max_connections = 100000
TOML
ulimit -n "$(ulimit -Hn)"
"$bin" -addr "127.0.0.1:$port" -cache-dir "$work/cache" -config "$work/pkgproxy.toml" \
    -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" -log-level warn 2>"$work/log" &
pid=$!
pids+=($pid)
until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.05; done

proxy=http://127.0.0.1:$port
big=http://127.0.0.1:$origin_port/debian/pool/main/b/big/big_1.0_amd64.deb
curl -s -o /dev/null -x "$proxy" "$big"
for n in $(seq 0 99); do
    echo "http://127.0.0.1:$origin_port/debian/pool/main/s/small/small${n}_1.0_amd64.deb"
done >"$work/small-urls"
while read -r url; do curl -s -o /dev/null -x "$proxy" "$url"; done <"$work/small-urls"

kib() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$pid/status"; }

# The small-hit load: requests per second and p99.
small_hits() {
    oha -z "$duration" -c 64 --no-tui --output-format json -x "$proxy" --urls-from-file "$work/small-urls" >"$work/oha.json"
    python3 - "$work/oha.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f'{r["summary"]["requestsPerSec"]:.0f} req/s, p99 {r["latencyPercentiles"]["p99"] * 1000:.2f} ms')
PY
}

alone_before=$(small_hits)
rss_before=$(kib VmRSS)
# Peak RSS from here on (clear_refs 5 resets VmHWM).
echo 5 >"/proc/$pid/clear_refs"

# The slow readers: one process on one thread, each client a connection
# read at the rate, with a small receive buffer, as a client on a slow
# link is.
"$readers_bin" "$port" "$big" "$clients" "$rate" 60 >"$work/readers.out" &
readers=$!
pids+=($readers)
sleep 20
with_readers=$(small_hits)
rss_during=$(kib VmRSS)
wait "$readers" || true
sleep 1
echo "pkgproxy: RSS $rss_before KiB before, $rss_during KiB with $clients slow readers, peak $(kib VmHWM) KiB while they read; $(cat "$work/readers.out")"
echo "small hits alone: $alone_before; with the slow readers: $with_readers; alone again: $(small_hits)"
if grep -q -E 'WARN|ERROR' "$work/log"; then
    echo "pkgproxy said:" && grep -E 'WARN|ERROR' "$work/log" | head -5
fi
