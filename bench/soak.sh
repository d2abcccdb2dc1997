#!/usr/bin/env bash
# The soak, by hand (a short form runs with the test suite):
#   1. pkgproxy killed with SIGKILL at random moments, SOAK_KILLS times
#      (default 50), while SOAK_CLIENTS clients (default 50) download blobs
#      by digest from an upstream that sometimes lies; every body served
#      whole must be right, `cache verify` must find nothing bad, no
#      temporary file may be left (the test `soak::full_soak`);
#   2. warm small hits over 4,000 and 10,000 keep-alive connections beside
#      nginx proxy_cache, in the shared harness (bench/run.sh): req/s, p99
#      and peak RSS;
#   3. SLOW_CLIENTS (default 1,000) clients reading one cached 100 MiB file
#      at 1 to 4 MB/s, and ten unthrottled ones from 5 s on: the RSS every
#      2 s and the fast clients' times.
# Parts are chosen with SOAK_PARTS (default "kills connections slow").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
parts=${SOAK_PARTS:-"kills connections slow"}

if [[ " $parts " == *" kills "* ]]; then
  echo "== kill -9 soak: ${SOAK_KILLS:-50} kills, ${SOAK_CLIENTS:-50} clients"
  (cd "$root" && SOAK_KILLS=${SOAK_KILLS:-50} SOAK_CLIENTS=${SOAK_CLIENTS:-50} \
    cargo test --release --locked -p pkgproxy-cli --test it soak::full_soak -- --ignored --nocapture)
fi

if [[ " $parts " == *" connections "* ]]; then
  for conns in ${SOAK_CONNECTIONS:-4000 10000}; do
    echo "== warm small hits over $conns keep-alive connections"
    SMALL_CONNS=$conns SCENARIOS=small REPEAT=${REPEAT:-1} PROXIES=${PROXIES:-"nginx pkgproxy"} "$root/bench/run.sh"
  done
fi

if [[ " $parts " == *" slow "* ]]; then
  clients=${SLOW_CLIENTS:-1000}
  echo "== $clients slow readers of one 100 MiB file"
  (cd "$root" && cargo build --release --locked --bin pkgproxy)
  work=$(mktemp -d)
  trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
  mkdir -p "$work/www/debian/pool"
  head -c $((100 * 1024 * 1024)) /dev/urandom >"$work/www/debian/pool/big.deb"
  (cd "$work/www" && exec python3 -m http.server 18999 --bind 127.0.0.1 >/dev/null 2>&1) &
  printf '[[apt.archive]]\nname = "local"\nmirrors = ["http://127.0.0.1:18999/debian"]\n[server]\nmax_connections_per_client = 100000\n' >"$work/conf.toml"
  "$root/target/release/pkgproxy" -addr 127.0.0.1:3997 -cache-dir "$work/cache" -config "$work/conf.toml" \
    -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" -auto-offline off -log-level warn &
  daemon=$!
  sleep 1
  url=http://127.0.0.1:18999/debian/pool/big.deb
  curl -s -x http://127.0.0.1:3997 -o /dev/null -w "cold miss %{http_code} in %{time_total} s\n" "$url"
  curl -s -x http://127.0.0.1:3997 -o /dev/null -w "one hit alone in %{time_total} s\n" "$url"
  (while kill -0 "$daemon" 2>/dev/null; do echo "rss_kib $(awk '/VmRSS/ {print $2}' /proc/$daemon/status)"; sleep 2; done) &
  sampler=$!
  slow=()
  for i in $(seq 1 "$clients"); do
    curl -s -x http://127.0.0.1:3997 --limit-rate $((1024 + (i % 4) * 1024))K -o /dev/null \
      -w "slow %{http_code} %{size_download} %{time_total}\n" "$url" >>"$work/slow.out" &
    slow+=($!)
  done
  sleep 5
  for i in $(seq 1 10); do
    curl -s -x http://127.0.0.1:3997 -o /dev/null -w "fast %{http_code} %{size_download} %{time_total}\n" "$url"
  done
  wait "${slow[@]}"
  kill "$sampler"
  echo "slow clients: $(grep -c '^slow 200 104857600 ' "$work/slow.out") of $clients got the whole file;" \
    "the slowest took $(awk '{print $4}' "$work/slow.out" | sort -n | tail -1) s"
  kill "$daemon"
  wait "$daemon" || true
fi
