#!/usr/bin/env bash
# The soak, by hand (a short form runs with the test suite):
#   1. pkgproxy killed with SIGKILL at random moments, SOAK_KILLS times
#      (default 50), while SOAK_CLIENTS clients (default 50) download blobs
#      by digest from an upstream that sometimes lies; every body served
#      whole must be right, `cache verify` must find nothing bad, no
#      temporary file may be left (the test `soak::full_soak`);
#   2. warm small hits over 4,000 and 10,000 keep-alive connections beside
#      nginx proxy_cache, in the shared harness (bench/run.sh): req/s, p99
#      and peak RSS.
# Each part can be skipped: SOAK_PARTS="kills" or SOAK_PARTS="connections".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
parts=${SOAK_PARTS:-"kills connections"}

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
