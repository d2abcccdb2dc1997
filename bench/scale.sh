#!/usr/bin/env bash
# pkgproxy with a large cache: how long it takes to start (cleanly, and
# after a kill -9 during writes), the memory it holds, and hit throughput
# on one key and spread over every tenth key, beside nginx proxy_cache
# holding the same files, on a cache of ENTRIES entries (default one
# million) against one of a thousand.
#
#   bench/scale.sh                      # 1,000,000 entries
#   ENTRIES=100000 bench/scale.sh
#   NGINX=0 bench/scale.sh              # pkgproxy alone
#
# The cache is generated once under SCALE_DIR (default /var/tmp) and kept
# for the next run: a million small blobs take about 4.5 GB and some
# minutes to write (each is fsynced, as a download's is). The archive's
# mirror is a closed port: every request must be a hit. nginx gets the
# spread keys' files from a static origin (generated once beside the
# cache: the same bodies), its keys zone sized for them, warmed by one
# pass over them; pkgproxy is measured straight after its start (its
# entries on disk only) and after the same one pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
entries=${ENTRIES:-1000000}
base=${SCALE_DIR:-/var/tmp}
duration=${DURATION:-10s}
connections=${CONNECTIONS:-64}
with_nginx=${NGINX:-1}

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
cargo build --release --locked --manifest-path "$root/Cargo.toml" -p pkgproxy-cache --example generate_cache
bin=$root/target/release/pkgproxy
generate=$root/target/release/examples/generate_cache

work=$(mktemp -d)
pid=
nginx_pids=()
trap 'kill $pid "${nginx_pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
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
    port=$(free_port)
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

# A free port on 127.0.0.1.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Hits for $duration over the URLs in $1, through the proxy $2 (none: the
# URLs name the server); prints requests per second, p99 and the share
# answered 200.
hits() {
    local via=()
    [ -n "${2:-}" ] && via=(-x "$2")
    oha -z "$duration" -c "$connections" --no-tui --output-format json "${via[@]}" \
        --urls-from-file "$1" >"$work/oha.json"
    python3 - "$work/oha.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
codes = r.get("statusCodeDistribution", {})
total = sum(codes.values()) or 1
p99 = r["latencyPercentiles"]["p99"] * 1000
print(f'{r["summary"]["requestsPerSec"]:.0f} req/s (p99 {p99:.1f} ms, {100 * codes.get("200", 0) / total:.1f} % 200)')
PY
}

# One request for each URL in $1, 16 at a time, through the proxy $2
# (none: the URLs name the server).
one_pass() {
    local via=()
    [ -n "${2:-}" ] && via=(-x "$2")
    awk '{ print "url = \"" $0 "\"\noutput = \"/dev/null\"" }' "$1" >"$work/pass.curl"
    curl -s --parallel --parallel-max 16 "${via[@]}" -K "$work/pass.curl" 2>/dev/null
}

said() {
    if grep -q -E 'WARN|ERROR' "$work/log"; then
        echo "pkgproxy said:" && grep -E 'WARN|ERROR' "$work/log" | head -5
    fi
}

stop() {
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    said
}

measure() {
    local dir
    dir=$(cache_of "$1")
    start "$dir"
    local rss_start one spread warm
    rss_start=$(kib VmRSS)
    head -n 1 "$dir/urls" >"$work/one"
    one=$(hits "$work/one" "http://127.0.0.1:$port")
    spread=$(hits "$dir/urls" "http://127.0.0.1:$port")
    one_pass "$dir/urls" "http://127.0.0.1:$port"
    warm=$(hits "$dir/urls" "http://127.0.0.1:$port")
    printf '%9s entries: start %5s ms, RSS %6s KiB at start, peak %6s KiB; hits on one key %s; on %s keys %s, after one pass %s\n' \
        "$1" "$started_ms" "$rss_start" "$(kib VmHWM)" "$one" "$(wc -l <"$dir/urls")" "$spread" "$warm"
    stop
}

# The entries the cache holds, as pkgproxy's stats socket says.
held() {
    curl -s --unix-socket "$work/stats.sock" http://pkgproxy/pkgproxy/v1/info | python3 -c '
import json, sys
print(json.load(sys.stdin)["cache"]["entries"])'
}

# The start after a crash: the generator adds entries to the cache of $1
# entries (a fsynced blob, then an index commit, 500 keys at a time) and
# is killed with SIGKILL in the middle; pkgproxy then starts on what it
# left. The index file's size is said too: its length, and the blocks it
# holds on disk (the file grows ahead of its pages, the tail unwritten).
crash() {
    local dir before after
    dir=$(cache_of "$1")
    start "$dir"
    before=$(held)
    stop
    "$generate" "$dir/cache" "$((before + 200000))" "$work/crash-urls" >"$work/generate.log" 2>&1 &
    local writer=$!
    sleep 8
    kill -9 "$writer"
    wait "$writer" 2>/dev/null || true
    start "$dir"
    after=$(held)
    local length on_disk
    length=$(stat -c %s "$dir/cache/index.redb")
    on_disk=$(du -B1 "$dir/cache/index.redb" | cut -f1)
    printf '%9s entries: start after kill -9 during writes %5s ms (%s entries before the writes, %s after); index file %s bytes long, %s on disk (%s an entry)\n' \
        "$1" "$started_ms" "$before" "$after" "$length" "$on_disk" "$((on_disk / after))"
    stop
}

# The spread keys' files under a static origin in $1/origin, generated
# once: the bodies the cache holds (see the cache crate's generate_cache
# example).
origin_of() {
    local dir=$1
    if [ ! -f "$dir/origin.generated" ]; then
        rm -rf "$dir/origin"
        python3 - "$dir/urls" "$dir/origin" <<'PY'
import os, re, sys
urls, root = sys.argv[1], sys.argv[2]
for url in open(urls):
    path = url.strip().split("/", 3)[3]
    n = int(re.search(r"/pkg(\d+)_", path).group(1))
    size = 200 + (n * 7919) % 3800
    line = f"package {n}\n".encode()
    body = (line * (size // len(line) + 1))[:size]
    target = os.path.join(root, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as f:
        f.write(body)
PY
        touch "$dir/origin.generated"
    fi
}

# nginx proxy_cache (the benchmark harness's settings) in front of a static
# nginx holding the spread keys' files, warmed by one pass, then hits
# spread over the same keys.
nginx_spread() {
    local dir origin_port proxy_port keys
    dir=$(cache_of "$1")
    origin_of "$dir"
    keys=$(wc -l <"$dir/urls")
    origin_port=$(free_port)
    proxy_port=$(free_port)
    local n=$work/nginx
    mkdir -p "$n/cache"
    # nginx's workers run as another user: they write its cache.
    chmod 0755 "$work"
    chmod -R 0777 "$n"
    local common="default_type application/octet-stream;
  client_body_temp_path $n/tmp_body; proxy_temp_path $n/tmp_proxy;
  fastcgi_temp_path $n/tmp_fcgi; uwsgi_temp_path $n/tmp_uwsgi; scgi_temp_path $n/tmp_scgi;
  sendfile on; tcp_nopush on; tcp_nodelay on; keepalive_requests 1000000; keepalive_timeout 120s;"
    cat >"$n/origin.conf" <<EOF
worker_processes auto; daemon off; pid $n/origin.pid; error_log $n/origin.err warn;
events { worker_connections 8192; }
http { $common access_log off;
  server { listen 127.0.0.1:$origin_port; root $dir/origin; } }
EOF
    # About 8,000 keys a megabyte of keys zone: 16 MiB per 100,000, and more.
    cat >"$n/proxy.conf" <<EOF
worker_processes auto; daemon off; pid $n/proxy.pid; error_log $n/proxy.err warn;
events { worker_connections 8192; }
http { $common access_log $n/access.log;
  proxy_cache_path $n/cache levels=1:2 keys_zone=pkg:$((keys / 5000 + 8))m max_size=64g inactive=30d use_temp_path=off;
  upstream origin { server 127.0.0.1:$origin_port; keepalive 64; }
  server { listen 127.0.0.1:$proxy_port; proxy_http_version 1.1; proxy_set_header Connection "";
    proxy_cache pkg; proxy_cache_lock on;
    location / { proxy_pass http://origin; proxy_cache_valid 200 30d; } } }
EOF
    nginx -c "$n/origin.conf" -e "$n/origin.err" &
    nginx_pids+=($!)
    nginx -c "$n/proxy.conf" -e "$n/proxy.err" &
    nginx_pids+=($!)
    until curl -s -o /dev/null "http://127.0.0.1:$proxy_port/"; do sleep 0.05; done
    sed "s#^http://127.0.0.1:9/#http://127.0.0.1:$proxy_port/#" "$dir/urls" >"$n/urls"
    one_pass "$n/urls"
    local cached spread
    cached=$(find "$n/cache" -type f | wc -l)
    spread=$(hits "$n/urls")
    printf '%9s keys through nginx proxy_cache (%s files cached by the pass): hits %s\n' "$keys" "$cached" "$spread"
    kill "${nginx_pids[@]}"
    wait "${nginx_pids[@]}" 2>/dev/null || true
    nginx_pids=()
    rm -rf "$n"
}

measure 1000
measure "$entries"
if [ "$with_nginx" = 1 ]; then nginx_spread "$entries"; fi
crash "$entries"
