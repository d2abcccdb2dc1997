#!/usr/bin/env bash
# What the fleet's policy costs on the hit path, and what npm's whole set
# of malicious-package records costs to hold:
#   - small tarball hits (4 KiB) and hits of a 10 MB document of 9,000
#     versions, with no [policy] and with `min_age = "3d"` in force (the
#     document's last 20 versions a day old, so it is filtered; and the
#     same document with every version old, so nothing is taken out),
#     each for DURATION with oha (as it is, and gzipped);
#   - an OSV all.zip of 210,000 MAL records (bench/osv_records.py): the
#     daemon's start until it answers, and its resident memory, with and
#     without it; then a lookup's cost (the policy crate's example).
#   DURATION=10s bench/policy.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
duration=${DURATION:-10s}
command -v nginx >/dev/null || { echo "bench/policy.sh: needs nginx" >&2; exit 1; }
command -v oha >/dev/null || { echo "bench/policy.sh: needs oha" >&2; exit 1; }
cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy --bin pkgproxyctl
work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
registry_port=$(port)

python3 - "$work/registry" "$registry_port" <<'PY'
import base64, datetime, hashlib, json, os, sys
out, port = sys.argv[1], sys.argv[2]
now = datetime.datetime.now(datetime.timezone.utc)
iso = lambda at: at.strftime("%Y-%m-%dT%H:%M:%S.000Z")
os.makedirs(os.path.join(out, "files", "small", "-"))
tarball = os.urandom(4096)
open(os.path.join(out, "files", "small", "-", "small-1.0.0.tgz"), "wb").write(tarball)
integrity = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
small = {"name": "small", "dist-tags": {"latest": "1.0.0"},
         "versions": {"1.0.0": {"name": "small", "version": "1.0.0",
                                "dist": {"tarball": f"http://127.0.0.1:{port}/small/-/small-1.0.0.tgz", "integrity": integrity}}},
         "time": {"modified": iso(now - datetime.timedelta(days=400)), "1.0.0": iso(now - datetime.timedelta(days=400))}}
os.makedirs(os.path.join(out, "documents", "small"))
json.dump(small, open(os.path.join(out, "documents", "small", "index.json"), "w"))
def big(name, fresh):
    versions, time = {}, {"created": iso(now - datetime.timedelta(days=900))}
    for n in range(9000):
        version = f"1.{n // 100}.{n % 100}"
        versions[version] = {"name": name, "version": version, "description": f"version {n} of a package with many",
                             "dependencies": {"left-pad": "^1.3.0", "lodash": "^4.17.21", "@types/node": f"^{n % 30}.0.0"},
                             "devDependencies": {d: f"^{n % 9}.{n % 7}.0" for d in ("typescript", "jest", "eslint",
                                                 "prettier", "webpack", "@babel/core", "rollup", "vite", "mocha")},
                             "scripts": {"build": "tsc -p .", "test": f"jest --ci --shard={n % 4}/4", "lint": "eslint ."},
                             "maintainers": [{"name": f"dev{m}", "email": f"dev{m}@example.com"} for m in range(4)],
                             "gitHead": f"{n:040x}", "_npmVersion": "10.9.0", "_nodeVersion": "22.11.0",
                             "engines": {"node": ">=18"}, "license": "MIT", "_hasShrinkwrap": False,
                             "dist": {"tarball": f"https://registry.npmjs.org/{name}/-/{name}-{version}.tgz",
                                      "integrity": "sha512-" + "A" * 86 + "==", "shasum": "0" * 40}}
        age = 1 if fresh and n >= 8980 else 800 - n / 12
        time[version] = iso(now - datetime.timedelta(days=age))
    time["modified"] = max(time.values())
    document = {"name": name, "dist-tags": {"latest": version}, "versions": versions, "time": time}
    os.makedirs(os.path.join(out, "documents", name))
    json.dump(document, open(os.path.join(out, "documents", name, "index.json"), "w"))
    return os.path.getsize(os.path.join(out, "documents", name, "index.json"))
sizes = [big("big", True), big("bigold", False)]
print(f"documents of {sizes[0] >> 20} and {sizes[1] >> 20} MiB")
PY
chmod -R a+rX "$work/registry"
cat > "$work/nginx.conf" <<NGINX
daemon on; pid $work/nginx.pid; error_log $work/nginx-error.log; worker_processes 1;
events { worker_connections 1024; }
http {
  access_log off; client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work; default_type application/json;
  server {
    listen 127.0.0.1:$registry_port;
    location ~ /-/ { root $work/registry/files; types { application/octet-stream tgz; } }
    location / { root $work/registry/documents; try_files \$uri \$uri/index.json =404; }
  }
}
NGINX
nginx -c "$work/nginx.conf"

# Starts pkgproxy with the configuration `$1` in a cache of its own; its port
# in $pkgproxy_port, its pid in $pkgproxy_pid, its start in $started_s.
start_pkgproxy() {
  pkgproxy_port=$(port)
  local dir=$work/p-$pkgproxy_port
  mkdir -p "$dir"
  printf '%s\n' "$1" > "$dir/conf.toml"
  local begun=$(date +%s.%N)
  "$root/target/release/pkgproxy" -addr "127.0.0.1:$pkgproxy_port" -cache-dir "$dir/cache" -config "$dir/conf.toml" \
    -stats-socket-path "$dir/stats.sock" -admin-socket-path "$dir/admin.sock" -log-level warn &
  pkgproxy_pid=$!
  pids+=("$pkgproxy_pid")
  for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$pkgproxy_port/npm/" && break; sleep 0.05; done
  started_s=$(python3 -c "print(f'{$(date +%s.%N) - $begun:.2f}')")
}
stop_pkgproxy() { kill "$pkgproxy_pid"; wait "$pkgproxy_pid" 2>/dev/null || true; }
resident_mib() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
rate() {
  oha -z "$duration" -c "$2" --no-tui --output-format json "${@:3}" "$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)
s = r["summary"]
rate, size, codes = s["requestsPerSec"], s.get("sizePerSec") or 0, r.get("statusCodeDistribution")
print(f"{rate:.0f} req/s, {size / 1e6:.0f} MB/s, statuses {codes}")'
}
npm_conf="[npm]
mirrors = [\"http://127.0.0.1:$registry_port/\"]
[server]
max_connections_per_client = 100000"
echo "== hits (${duration} each)"
for mode in none min_age; do
  conf=$npm_conf
  [ "$mode" = min_age ] && conf="$conf
[policy]
min_age = \"3d\""
  start_pkgproxy "$conf"
  base=http://127.0.0.1:$pkgproxy_port/npm
  # The document first: it gives the tarball's integrity.
  for path in small small/-/small-1.0.0.tgz big bigold; do curl -s -o /dev/null "$base/$path"; done
  # The compressed forms are made in the background after a first ask.
  for path in big bigold; do curl -s -o /dev/null -H 'Accept-Encoding: gzip' "$base/$path"; done
  sleep 2
  echo "-- policy: $mode"
  echo "small tarball hits, 32 connections: $(rate "$base/small/-/small-1.0.0.tgz" 32)"
  for encoding in identity gzip; do
    echo "10 MB document, a day-old version (filtered under min_age), $encoding, 8 connections: $(rate "$base/big" 8 -H "Accept-Encoding: $encoding")"
    echo "10 MB document, every version old, $encoding, 8 connections: $(rate "$base/bigold" 8 -H "Accept-Encoding: $encoding")"
  done
  echo "served bytes of the filtered document: $(curl -s "$base/big" | wc -c)"
  stop_pkgproxy
done

echo "== npm's malicious-package records at scale"
python3 "$root/bench/osv_records.py" "$work/all.zip" 210000
start_pkgproxy "$npm_conf"
echo "without records: ready in ${started_s} s, resident $(resident_mib "$pkgproxy_pid") MiB"
stop_pkgproxy
start_pkgproxy "$npm_conf
[policy]
osv = [\"$work/all.zip\"]"
echo "with 210,000 records: ready in ${started_s} s, resident $(resident_mib "$pkgproxy_pid") MiB"
"$root/target/release/pkgproxyctl" --admin-socket-path "$work/p-$pkgproxy_port/admin.sock" policy 2>/dev/null | grep osv || true
stop_pkgproxy
cargo run --release --locked -q --manifest-path "$root/Cargo.toml" -p pkgproxy-policy --example osv_lookup -- "$work/all.zip"
