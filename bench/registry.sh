#!/usr/bin/env bash
# The registry side beside CNCF distribution 2.8 as a pull-through cache
# (Debian's docker-registry), both in front of the test kit's fake Docker
# Hub (token dance, blobs behind a 307 to a CDN port) on 127.0.0.1:
#   cold: CLIENTS clients ask at once for one LAYER_MIB layer nothing has
#         cached: the hub's CDN fetches and bytes, the last client's finish,
#         the other clients' first byte;
#   warm: the same layer again and again from CONNECTIONS connections for
#         WARM_SECONDS (oha).
#   LAYER_MIB=100 CLIENTS=20 CONNECTIONS=8 WARM_SECONDS=10 bench/registry.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
layer_mib=${LAYER_MIB:-100}
clients=${CLIENTS:-20}
connections=${CONNECTIONS:-8}
warm_seconds=${WARM_SECONDS:-10}
command -v docker-registry >/dev/null || { echo "bench/registry.sh: needs docker-registry (Debian's package)" >&2; exit 1; }
command -v oha >/dev/null || { echo "bench/registry.sh: needs oha (cargo install oha)" >&2; exit 1; }

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy --bin pkgproxy-fakehub
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

"$root/target/release/pkgproxy-fakehub" "$layer_mib" > "$work/hub.out" &
pids+=($!)
for _ in $(seq 100); do grep -q '^HUB' "$work/hub.out" 2>/dev/null && break; sleep 0.2; done
read -r _ hub digest layer_bytes cdn < "$work/hub.out"
echo "fake hub at $hub, layer $digest ($layer_mib MiB)"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Each start sets $listening to the port the proxy listens on.
start_pkgproxy() {
  listening=$(port)
  printf '[upstream]\ntrust = ["%s"]\n[[registry.upstream]]\nname = "docker.io"\nmirrors = ["%s"]\n' "$cdn" "$hub" > "$work/pkgproxy.toml"
  "$root/target/release/pkgproxy" -addr "127.0.0.1:$listening" -cache-dir "$work/pkgproxy-cache" -config "$work/pkgproxy.toml" \
    -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" -log-level warn > "$work/pkgproxy.log" 2>&1 &
  pids+=($!)
}

start_distribution() {
  listening=$(port)
  cat > "$work/distribution.yml" <<YAML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $work/distribution-store}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$listening}
proxy: {remoteurl: "$hub"}
YAML
  docker-registry serve "$work/distribution.yml" > "$work/distribution.log" 2>&1 &
  pids+=($!)
}

wait_up() { for _ in $(seq 100); do curl -fs "http://127.0.0.1:$1/v2/" >/dev/null 2>&1 && return; sleep 0.2; done; echo "not up on $1" >&2; exit 1; }

counts() { curl -s "$hub/_counts"; }

measure() {
  local name=$1 p=$2
  wait_up "$p"
  local url="http://127.0.0.1:$p/v2/library/big/blobs/$digest"
  local before after
  before=$(counts)
  local fetching=()
  for i in $(seq "$clients"); do
    curl -s -o /dev/null -w '%{http_code} %{time_starttransfer} %{time_total} %{size_download}\n' "$url" > "$work/$name.client.$i" &
    fetching+=($!)
  done
  wait "${fetching[@]}"
  after=$(counts)
  python3 - "$name" "$work" "$clients" "$before" "$after" "$layer_bytes" <<'PY'
import json, statistics, sys
name, work, clients, before, after, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5]), int(sys.argv[6])
rows = [open(f"{work}/{name}.client.{i}").read().split() for i in range(1, clients + 1)]
ok = sum(1 for r in rows if r[0] == "200" and int(r[3]) == size)
firsts = sorted(float(r[1]) for r in rows)
totals = [float(r[2]) for r in rows]
fetches = after["cdn_fetches"] - before["cdn_fetches"]
mb = (after["cdn_bytes"] - before["cdn_bytes"]) / 1e6
print(f"| {name} | {fetches} | {mb:.0f} | {max(totals):.2f} s | {statistics.median(firsts[1:])*1000:.0f} / {max(firsts[1:])*1000:.0f} ms | {ok}/{clients} |")
PY
  oha -z "${warm_seconds}s" -c "$connections" --no-tui --output-format json "$url" > "$work/$name.warm.json" 2>/dev/null || true
  python3 - "$name" "$work" <<'PY'
import json, sys
name, work = sys.argv[1], sys.argv[2]
r = json.load(open(f"{work}/{name}.warm.json"))
s = r["summary"]
print(f"WARM | {name} | {s['requestsPerSec']:.1f} req/s | {s.get('sizePerSec', 0)/1e9:.2f} GB/s | success {s['successRate']:.2f} |")
PY
}

echo "| proxy | CDN fetches | CDN MB | last client done | others' first byte p50 / max | complete |"
echo "|---|---:|---:|---:|---:|---:|"
start_pkgproxy; measure pkgproxy "$listening"
start_distribution; measure distribution "$listening"
