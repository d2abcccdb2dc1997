#!/usr/bin/env bash
# pkgproxy with a large cache: how long it takes to start, the memory it
# holds, and hit throughput, on a cache of ENTRIES entries (default one
# million) against one of a thousand.
#
#   bench/scale.sh                      # 1,000,000 entries
#   ENTRIES=100000 bench/scale.sh
#
# The cache is generated once under SCALE_DIR (default /var/tmp) and kept
# for the next run: a million small blobs take about 4.5 GB and some
# minutes to write (each is fsynced, as a download's is). The archive's
# mirror is a closed port: every request must be a hit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
entries=${ENTRIES:-1000000}
base=${SCALE_DIR:-/var/tmp}
duration=${DURATION:-10s}
connections=${CONNECTIONS:-64}

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
cargo build --release --locked --manifest-path "$root/Cargo.toml" -p pkgproxy-cache --example generate_cache
bin=$root/target/release/pkgproxy
generate=$root/target/release/examples/generate_cache

work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
# The free space kept is lowered: a benchmark machine's disk may be fuller
# than the default 5 % allows, and eviction would empty the cache.
cat >"$work/pkgproxy.toml" <<'TOML'
[cache]
min_free = "1GiB"

[[apt.archive]]
name = "bench"
mirrors = ["http://127.0.0.1:9/debian"]
TOML

# Generates (or reuses) a cache of $1 entries; prints its folder.
cache_of() {
    local dir=$base/pkgproxy-scale-$1
    if [ ! -f "$dir/generated" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        "$generate" "$dir/cache" "$1" "$dir/urls" >&2
        touch "$dir/generated"
    fi
    echo "$dir"
}

# Starts pkgproxy on the cache in $1; sets pid, port, and started_ms (from
# exec to answering on its port).
start() {
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    sync
    local t0 t1
    t0=$(date +%s%N)
    "$bin" -addr "127.0.0.1:$port" -cache-dir "$1/cache" -config "$work/pkgproxy.toml" \
        -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" -log-level warn \
        2>"$work/log" &
    pid=$!
    until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.002; done
    t1=$(date +%s%N)
    started_ms=$(( (t1 - t0) / 1000000 ))
}

kib() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$pid/status"; }

# Hits for $duration over the URLs in $1; prints requests per second and
# the share answered 200.
hits() {
    oha -z "$duration" -c "$connections" --no-tui --output-format json -x "http://127.0.0.1:$port" \
        --urls-from-file "$1" >"$work/oha.json"
    python3 - "$work/oha.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
codes = r.get("statusCodeDistribution", {})
total = sum(codes.values()) or 1
print(f'{r["summary"]["requestsPerSec"]:.0f} req/s, {100 * codes.get("200", 0) / total:.1f} % answered 200')
PY
}

measure() {
    local dir
    dir=$(cache_of "$1")
    start "$dir"
    local rss_start
    rss_start=$(kib VmRSS)
    head -n 1 "$dir/urls" >"$work/one"
    local one spread
    one=$(hits "$work/one")
    spread=$(hits "$dir/urls")
    printf '%9s entries: start %5s ms, RSS %6s KiB at start, peak %6s KiB; hits on one key %s; on %s keys %s\n' \
        "$1" "$started_ms" "$rss_start" "$(kib VmHWM)" "$one" "$(wc -l <"$dir/urls")" "$spread"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    if grep -q -E 'WARN|ERROR' "$work/log"; then
        echo "pkgproxy said:" && grep -E 'WARN|ERROR' "$work/log" | head -5
    fi
}

measure 1000
measure "$entries"
