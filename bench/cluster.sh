#!/usr/bin/env bash
# Cluster mode on 127.0.0.1, with moto's S3 server (test.sh installs it) as
# the shared store:
#   hits:  small warm hits on one node for HIT_SECONDS at 64 connections
#          (oha), without [cluster] and with it: the hot path is local, so
#          the two must be equal;
#   cold:  CLIENTS clients spread over three nodes ask at once for one
#          FILE_MIB file nothing has cached, from an origin paced at
#          RATE_MIB MiB/s per connection: origin requests, and each
#          client's time to first byte, by whether its node fetched.
#   FILE_MIB=32 CLIENTS=30 RATE_MIB=64 HIT_SECONDS=10 bench/cluster.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
file_mib=${FILE_MIB:-32}
clients=${CLIENTS:-30}
rate_mib=${RATE_MIB:-64}
hit_seconds=${HIT_SECONDS:-10}
moto=${MOTO_SERVER:-$root/target/test-tools/moto/bin/moto_server}
[ -x "$moto" ] || moto=$(command -v moto_server) || { echo "bench/cluster.sh: needs moto_server (test.sh installs it)" >&2; exit 1; }
command -v oha >/dev/null || { echo "bench/cluster.sh: needs oha (cargo install oha)" >&2; exit 1; }
command -v nginx >/dev/null || { echo "bench/cluster.sh: needs nginx (the paced origin)" >&2; exit 1; }

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
cleanup_keep() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; mkdir -p /tmp/cluster-logs; cp "$work"/*.log "$work/cold.out" /tmp/cluster-logs/ 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
[ -n "${KEEP_LOGS:-}" ] && trap 'cleanup_keep' EXIT

# The origin: nginx serving a small file and the big one, paced.
mkdir -p "$work/www/debian/pool" "$work/nginx"
head -c 4096 /dev/urandom > "$work/www/debian/pool/small.deb"
head -c $((file_mib * 1024 * 1024)) /dev/urandom > "$work/www/debian/pool/big.deb"
chmod -R a+rX "$work"   # nginx's workers read as another user
cat > "$work/nginx/nginx.conf" <<CONF
daemon off; worker_processes 1; error_log $work/nginx/error.log; pid $work/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log $work/nginx/access.log;
  client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
  server { listen 127.0.0.1:18990; root $work/www; limit_rate ${rate_mib}m; }
}
CONF
nginx -c "$work/nginx/nginx.conf" & pids+=($!)
"$moto" -H 127.0.0.1 -p 18991 >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:18991/ && break; sleep 0.2; done
curl -s -X PUT http://127.0.0.1:18991/bench >/dev/null

archive='[[apt.archive]]
name = "bench"
mirrors = ["http://127.0.0.1:18990/debian"]'
node() { # name port cluster?
  local conf="$work/$1.toml"
  echo "$archive" > "$conf"
  if [ "$3" = yes ]; then
    printf '[cluster]\nendpoint = "http://127.0.0.1:18991"\nbucket = "bench"\nnode_id = "%s"\naccess_key_id = "bench"\nsecret_access_key = "bench"\n' "$1" >> "$conf"
  fi
  "$root/target/release/pkgproxy" -addr "127.0.0.1:$2" -cache-dir "$work/$1-cache" -config "$conf" \
    -stats-socket-path "$work/$1.stats" -admin-socket-path "$work/$1.admin" -auto-offline off -log-level "${LOG_LEVEL:-warn}" 2>>"$work/$1.log" &
  pids+=($!)
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$2/" && break; sleep 0.1; done
}
small=http://127.0.0.1:18990/debian/pool/small.deb
big=http://127.0.0.1:18990/debian/pool/big.deb

echo "== warm hits of a 4 KiB file, 64 connections, $hit_seconds s"
node alone 18992 no
node member 18993 yes
for port in 18992 18993; do
  curl -s -o /dev/null -x "http://127.0.0.1:$port" "$small"
  rps=$(oha -z "${hit_seconds}s" -c 64 --no-tui --output-format json -x "http://127.0.0.1:$port" "$small" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["summary"]["requestsPerSec"]))')
  [ "$port" = 18992 ] && echo "without [cluster]: $rps req/s" || echo "with [cluster]:    $rps req/s"
done

echo "== cold: $clients clients over three nodes, one ${file_mib} MiB file"
node one 18994 yes
node two 18995 yes
node three 18996 yes
: > "$work/nginx/access.log"
ports=(18994 18995 18996)
curls=()
wait_clients() { wait "${curls[@]}"; }
for i in $(seq 0 $((clients - 1))); do
  port=${ports[$((i % 3))]}
  curl -s -o /dev/null -x "http://127.0.0.1:$port" -w "$port %{http_code} %{size_download} %{time_starttransfer} %{time_total}\n" "$big" >> "$work/cold.out" &
  curls+=($!)
done
wait_clients
echo "origin requests for the file: $(grep -c 'big.deb' "$work/nginx/access.log")"
echo "clients with the whole file: $(awk -v size=$((file_mib * 1024 * 1024)) '$2 == 200 && $3 == size' "$work/cold.out" | wc -l) of $clients"
# The fetching node is the one that publishes the file (once it is whole).
fetcher=""
for _ in $(seq 100); do
  for name in one two three; do
    published=$(curl -s --unix-socket "$work/$name.stats" http://localhost/metrics | awk '/^pkgproxy_cluster_published_total/ {print $2}')
    if [ "${published:-0}" -gt 0 ]; then
      case $name in one) fetcher=18994 ;; two) fetcher=18995 ;; three) fetcher=18996 ;; esac
    fi
  done
  [ -n "$fetcher" ] && break
  sleep 0.2
done
[ -n "$fetcher" ] || { echo "no node published the file"; exit 1; }
for group in "the fetching node's" "the other nodes'"; do
  if [ "$group" = "the fetching node's" ]; then filter="\$1 == $fetcher"; else filter="\$1 != $fetcher"; fi
  awk "$filter {print \$4 * 1000}" "$work/cold.out" | sort -n | awk -v g="$group" '{v[NR]=$1} END {if (NR) printf "%s clients: first byte p50 %.0f ms, max %.0f ms (%d clients)\n", g, v[int((NR+1)/2)], v[NR], NR}'
done
echo "last client done: $(awk '{print $5}' "$work/cold.out" | sort -n | tail -1) s"
