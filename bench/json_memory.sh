#!/usr/bin/env bash
# The memory one hostile upstream JSON answer costs pkgproxy: peak RSS
# (VmHWM) of a fresh daemon after
#   lxd:  an LXD remote whose index names one products file of MB_LXD MB
#         (default 150), the bulk of it an array no one reads;
#   snap: a store whose info answer is MB_SNAP MB (default 15, under the
#         16 MiB pkgproxy rewrites), fetched
#         once, then served from the cache to 8 clients at once (each
#         serve rewrites the answer's URLs for its client).
#
#   bench/json_memory.sh                          # the binary built from this tree
#   PKGPROXY_BIN=/path/to/pkgproxy bench/json_memory.sh   # another build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mb_lxd=${MB_LXD:-150}
mb_snap=${MB_SNAP:-15}
if [ -z "${PKGPROXY_BIN:-}" ]; then
  cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
  PKGPROXY_BIN=$root/target/release/pkgproxy
fi

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The upstreams: static files, one folder each.
mkdir -p "$work/lxd/streams/v1" "$work/store/v2/snaps/info"
cat >"$work/lxd/streams/v1/index.json" <<'JSON'
{"format": "index:1.0", "index": {"p": {"datatype": "image-downloads", "path": "streams/v1/p0.json", "products": ["x"]}}}
JSON
python3 - "$work" "$mb_lxd" "$mb_snap" <<'PY'
import sys
work, mb_lxd, mb_snap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def padded(head, mb):
    count = mb * 1_000_000 // 2
    return head + '"pad":[' + '0,' * (count - 1) + '0]}'
open(f"{work}/lxd/streams/v1/p0.json", "w").write(padded('{"format":"products:1.0","products":{},', mb_lxd))
info = '{"name":"hello","snap-id":"ID","channel-map":[],"snap":{"media":[]},'
open(f"{work}/store/v2/snaps/info/hello", "w").write(padded(info, mb_snap))
PY
lxd_port=$(port)
store_port=$(port)
(cd "$work/lxd" && exec python3 -m http.server "$lxd_port" --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)
(cd "$work/store" && exec python3 -m http.server "$store_port" --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)

run() { # run NAME CONFIG: a fresh daemon; sets $pp and $pid
  local listening
  listening=$(port)
  printf '%s' "$2" >"$work/$1.toml"
  "$PKGPROXY_BIN" -addr "127.0.0.1:$listening" -cache-dir "$work/$1-cache" -config "$work/$1.toml" \
    -stats-socket-path "$work/$1-stats.sock" -admin-socket-path "$work/$1-admin.sock" -log-level warn \
    -auto-offline off >"$work/$1.log" 2>&1 &
  pid=$!
  pids+=($pid)
  pp=127.0.0.1:$listening
  for _ in $(seq 100); do curl -s -o /dev/null "http://$pp/v2/" && return; sleep 0.1; done
  echo "pkgproxy did not start: $(cat "$work/$1.log")" >&2
  exit 1
}
hwm() { awk '/VmHWM/ {printf "%.0f MiB", $2 / 1024}' "/proc/$1/status"; }

for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$lxd_port/streams/v1/index.json" && break; sleep 0.1; done
run lxd "$(printf '[[lxd.remote]]\nname = "images"\nmirrors = ["http://127.0.0.1:%s"]\n' "$lxd_port")"
status=$(curl -s -o /dev/null -w '%{http_code}' "http://$pp/lxd/images/streams/v1/index.json")
echo "lxd: a ${mb_lxd} MB products file (index answered $status): peak RSS $(hwm "$pid")"
kill "$pid"

run snap "$(printf '[snap]\nstores = ["http://127.0.0.1:%s"]\n' "$store_port")"
info="http://$pp/snap/v2/snaps/info/hello"
status=$(curl -s -o /dev/null -w '%{http_code}' -H 'Snap-Device-Series: 16' "$info")
echo "snap: a ${mb_snap} MB info answer, one client (answered $status): peak RSS $(hwm "$pid")"
clients=()
for _ in $(seq 8); do
  curl -s -o /dev/null -H 'Snap-Device-Series: 16' "$info" &
  clients+=($!)
done
wait "${clients[@]}"
echo "snap: then 8 clients at once from the cache: peak RSS $(hwm "$pid")"
