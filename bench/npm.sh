#!/usr/bin/env bash
# JavaScript installs through pkgproxy's npm side, beside npm fetching from
# the registry directly: a fake registry on 127.0.0.1 (nginx serving the
# tarballs of a realistic lockfile, taken once from the npm registry into
# NPM_TARBALLS, and each version's document), then
#   - `npm ci` of the lockfile (hundreds of packages) with an empty npm
#     cache: straight from the fake, through pkgproxy cold (its cache empty)
#     and warm (a second empty npm cache), each REPEAT times, then the
#     medians; with PINNED=1, pkgproxy on core 0 and npm, the fake, the
#     relay and the curl clients on core 1; with DELAY_MS=N, the fake
#     behind a relay delaying each byte N ms each way (bench/delay.py: a
#     network to the registry), for npm straight and for pkgproxy alike;
#   - 100 clients of one 10 MB document at once, from pkgproxy's cache, as
#     it is and gzipped: when the last was done, pkgproxy's peak RSS over
#     what it held before;
#   - 50 clients of the set's largest tarball at once through a cold
#     pkgproxy, the fake sending each connection at 50 MB/s: requests to the
#     fake, when the last client was done, the others' first byte.
#   REPEAT=3 bench/npm.sh
#   PINNED=1 DELAY_MS=10 REPEAT=3 bench/npm.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=${REPEAT:-3}
tarballs=${NPM_TARBALLS:-$HOME/.cache/pkgproxy-bench/npm}
command -v nginx >/dev/null || { echo "bench/npm.sh: needs nginx" >&2; exit 1; }
command -v npm >/dev/null || { echo "bench/npm.sh: needs npm" >&2; exit 1; }
if [ "${PINNED:-0}" = 1 ]; then proxy_core="taskset -c 0"; client_core="taskset -c 1"; else proxy_core=""; client_core=""; fi
npm_clean() { $client_core env -u npm_config_registry -u NPM_CONFIG_REGISTRY npm --userconfig /dev/null "$@"; }

# The set: a web front end's and a service's dependencies with their
# tooling, and what they pull in (about a thousand packages).
if [ ! -f "$tarballs/done" ]; then
  mkdir -p "$tarballs/project"
  cat > "$tarballs/project/package.json" <<'JSON'
{"name": "bench", "version": "1.0.0", "private": true,
 "dependencies": {"express": "4.21.2", "react": "18.3.1", "react-dom": "18.3.1", "axios": "1.7.9", "lodash": "4.17.21"},
 "devDependencies": {"webpack": "5.97.1", "webpack-cli": "5.1.4", "eslint": "8.57.1", "typescript": "5.7.2",
                     "jest": "29.7.0", "@babel/core": "7.26.0", "@babel/preset-env": "7.26.0"}}
JSON
  (cd "$tarballs/project" && npm_clean install --package-lock-only --no-audit --no-fund --registry https://registry.npmjs.org/)
  python3 - "$tarballs" <<'PY'
import json, os, sys, urllib.request, concurrent.futures
out = sys.argv[1]
lock = json.load(open(os.path.join(out, "project", "package-lock.json")))
urls = sorted({p["resolved"] for k, p in lock["packages"].items() if k and p.get("resolved", "").startswith("https://")})
def get(url):
    path = os.path.join(out, "files", url.split("://", 1)[1].split("/", 1)[1])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        with urllib.request.urlopen(url) as answer, open(path + ".part", "wb") as file:
            file.write(answer.read())
        os.rename(path + ".part", path)
list(concurrent.futures.ThreadPoolExecutor(8).map(get, urls))
print(f"{len(urls)} tarballs")
PY
  touch "$tarballs/done"
fi

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
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
pkgproxy_port=$(port)
# The port clients and pkgproxy reach the fake at: the relay's with DELAY_MS.
reached_port=$registry_port
[ -z "${DELAY_MS:-}" ] || reached_port=$(port)

# The fake registry: the tarballs at their paths, each version's document
# (its `dist` from the lockfile), and a 10 MB document of many versions.
python3 - "$tarballs" "$work/registry" "$reached_port" <<'PY'
import json, os, sys
src, out, port = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out)
for folder, _, files in os.walk(os.path.join(src, "files")):
    below = os.path.relpath(folder, src)
    os.makedirs(os.path.join(out, below), exist_ok=True)
    for file in files:
        os.link(os.path.join(folder, file), os.path.join(out, below, file))
lock = json.load(open(os.path.join(src, "project", "package-lock.json")))
count = 0
for key, package in lock["packages"].items():
    url = package.get("resolved", "")
    if not key or not url.startswith("https://"):
        continue
    path = url.split("://", 1)[1].split("/", 1)[1]
    name = path.split("/-/")[0]
    version = package["version"]
    folder = os.path.join(out, "documents", name)
    os.makedirs(folder, exist_ok=True)
    dist = {"tarball": f"http://127.0.0.1:{port}/{path}", "integrity": package["integrity"]}
    json.dump({"name": name, "version": version, "dist": dist}, open(os.path.join(folder, version), "w"))
    count += 1
versions = {}
for n in range(9000):
    version = f"1.{n // 100}.{n % 100}"
    versions[version] = {"name": "big", "version": version, "description": f"version {n} of a package with many",
                         "dependencies": {"left-pad": "^1.3.0", "lodash": "^4.17.21", "@types/node": f"^{n % 30}.0.0"},
                         "devDependencies": {d: f"^{n % 9}.{n % 7}.0" for d in ("typescript", "jest", "eslint",
                                             "prettier", "webpack", "@babel/core", "rollup", "vite", "mocha")},
                         "scripts": {"build": "tsc -p .", "test": f"jest --ci --shard={n % 4}/4", "lint": "eslint ."},
                         "maintainers": [{"name": f"dev{m}", "email": f"dev{m}@example.com"} for m in range(4)],
                         "gitHead": f"{n:040x}", "_npmVersion": "10.9.0", "_nodeVersion": "22.11.0",
                         "engines": {"node": ">=18"}, "license": "MIT", "_hasShrinkwrap": False,
                         "dist": {"tarball": f"https://registry.npmjs.org/big/-/big-{version}.tgz",
                                  "integrity": "sha512-" + "A" * 86 + "==", "shasum": "0" * 40}}
big = {"name": "big", "dist-tags": {"latest": version}, "versions": versions,
       "time": {"modified": "2026-01-01T00:00:00.000Z"}}
os.makedirs(os.path.join(out, "documents", "big"), exist_ok=True)
json.dump(big, open(os.path.join(out, "documents", "big", "index.json"), "w"))
size = os.path.getsize(os.path.join(out, "documents", "big", "index.json"))
print(f"fake registry: {count} tarballs, {sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(src, 'files')) for f in fs) >> 20} MiB; a document of {size >> 20} MiB")
PY
chmod -R a+rX "$work/registry"
cp "$tarballs/project/package.json" "$tarballs/project/package-lock.json" "$work/"

# The fake registry, each connection's tarballs sent at `$1` bytes a second
# (0: as fast as it can).
start_nginx() {
  if [ -f "$work/nginx.pid" ]; then
    kill "$(cat "$work/nginx.pid")"
    for _ in $(seq 50); do [ -f "$work/nginx.pid" ] || break; sleep 0.1; done
  fi
  cat > "$work/nginx.conf" <<NGINX
daemon on; pid $work/nginx.pid; error_log $work/nginx-error.log; worker_processes 2;
events { worker_connections 1024; }
http {
  log_format files '\$request_uri'; access_log $work/registry.log files;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work; default_type application/json;
  server {
    listen 127.0.0.1:$registry_port; root $work/registry;
    location ~ /-/ { root $work/registry/files; types { application/octet-stream tgz; } limit_rate $1; }
    location / { root $work/registry/documents; try_files \$uri \$uri/index.json =404; }
  }
}
NGINX
  $client_core nginx -c "$work/nginx.conf"
}

start_pkgproxy() {
  local cache
  cache=$(mktemp -d -p "${CACHE_ROOT:-$work}" pkgproxy-cache.XXXXXX)
  printf '[npm]\nmirrors = ["http://127.0.0.1:%s"]\n' "$reached_port" > "$work/pkgproxy.toml"
  $proxy_core "$target/release/pkgproxy" -addr "127.0.0.1:$pkgproxy_port" -cache-dir "$cache" \
    -config "$work/pkgproxy.toml" -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" \
    -log-level warn > "$work/pkgproxy.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$pkgproxy_port/npm/" && return; sleep 0.1; done
  echo "pkgproxy did not start" >&2; exit 1
}
# The CPU time pkgproxy has used (user and system), in seconds.
cpu_seconds() {
  python3 -c "import os; f = open('/proc/${pids[-1]}/stat').read().rsplit(')', 1)[1].split(); print(f'{(int(f[11]) + int(f[12])) / os.sysconf(\"SC_CLK_TCK\"):.2f}')"
}
stop_pkgproxy() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

# `npm ci` of the lockfile from the registry `$1`, with a new npm cache and
# project folder, in memory. Prints the seconds.
install() {
  local place start end
  place=$(mktemp -d -p /dev/shm pkgproxy-bench-npm.XXXXXX)
  cp "$work/package.json" "$work/package-lock.json" "$place/"
  start=$(date +%s.%N)
  (cd "$place" && npm_clean ci --registry "$1" --cache "$place/cache" --no-audit --no-fund --ignore-scripts \
      --update-notifier=false --loglevel=error >/dev/null) || { echo "npm ci failed" >&2; rm -rf "$place"; exit 1; }
  end=$(date +%s.%N)
  rm -rf "$place"
  python3 -c "print(f'{$end - $start:.2f}')"
}

start_nginx 0
if [ -n "${DELAY_MS:-}" ]; then
  $client_core python3 "$root/bench/delay.py" "$reached_port" "$registry_port" "$DELAY_MS" &
  pids+=($!)
  sleep 0.5
fi
direct="http://127.0.0.1:$reached_port/"
through="http://127.0.0.1:$pkgproxy_port/npm/"
echo "pinned: ${PINNED:-0}, delay: ${DELAY_MS:-0} ms each way, repeat: $repeat"
: > "$work/runs"
for run in $(seq "$repeat"); do
  : > "$work/registry.log"
  straight=$(install "$direct")
  asked_straight=$(wc -l < "$work/registry.log")
  start_pkgproxy
  : > "$work/registry.log"
  cold=$(install "$through")
  asked=$(wc -l < "$work/registry.log")
  cpu_cold=$(cpu_seconds)
  : > "$work/registry.log"
  warm=$(install "$through")
  cpu_warm=$(python3 -c "print(f'{$(cpu_seconds) - $cpu_cold:.2f}')")
  stop_pkgproxy
  echo "$straight $cold $warm" >> "$work/runs"
  echo "npm ci run $run: straight ${straight} s (${asked_straight} requests to the registry), through pkgproxy cold ${cold} s (${asked})," \
    "warm ${warm} s ($(wc -l < "$work/registry.log")); pkgproxy's CPU time cold ${cpu_cold} s, warm ${cpu_warm} s"
done
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
straight, cold, warm = (statistics.median(column) for column in zip(*runs))
print(f"npm ci medians: straight {straight:.2f} s, through pkgproxy cold {cold:.2f} s (cold / straight {cold / straight:.2f}), "
      f"warm {warm:.2f} s (straight / warm {straight / warm:.2f})")
PY

# 100 clients of a 10 MB document from pkgproxy's cache, as it is, then
# gzipped (from the compressed form made after the first gzip request).
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
start_pkgproxy
pid=${pids[-1]}
url="http://127.0.0.1:$pkgproxy_port/npm/big"
size=$(curl -s "$url" | wc -c)
curl -s -H 'Accept-Encoding: gzip' -o /dev/null "$url"
for _ in $(seq 100); do
  [ "$(curl -s -H 'Accept-Encoding: gzip' -o /dev/null -w '%{size_download}' "$url")" -lt "$size" ] && break
  sleep 0.1
done
for encoding in identity gzip; do
  before=$(rss "$pid")
  start=$(date +%s.%N)
  clients=()
  for i in $(seq 100); do
    $client_core curl -s -H "Accept-Encoding: $encoding" -o /dev/null -w '%{http_code} %{size_download}\n' "$url" > "$work/doc-$i" &
    clients+=($!)
  done
  wait "${clients[@]}"
  end=$(date +%s.%N)
  python3 - "$work" "$encoding" "$start" "$end" "$before" "$(hwm "$pid")" "$size" <<'PY'
import glob, sys
work, encoding, start, end, before, peak, size = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
rows = [open(f).read().split() for f in glob.glob(f"{work}/doc-*")]
ok = sum(1 for r in rows if r and r[0] == "200")
sent = sum(int(r[1]) for r in rows if r) / len(rows)
print(f"100 clients of a {size / 1e6:.1f} MB document, {encoding}: {ok}/100 ok, {sent / 1e6:.2f} MB each, "
      f"all done in {end - start:.2f} s; pkgproxy's RSS {before / 1024:.0f} MiB before, peak {peak / 1024:.0f} MiB")
PY
done
stop_pkgproxy

# 50 clients of the largest tarball, pkgproxy cold, the fake at 50 MB/s a
# connection.
largest=$(cd "$work/registry/files" && find -L . -name '*.tgz' -printf '%s %P\n' | sort -n | tail -1 | cut -d' ' -f2)
start_nginx 50m
start_pkgproxy
: > "$work/registry.log"
url="http://127.0.0.1:$pkgproxy_port/npm/$largest"
start=$(date +%s.%N)
clients=()
for i in $(seq 50); do
  $client_core curl -s -o /dev/null -w '%{http_code} %{time_starttransfer} %{time_total}\n' "$url" > "$work/client-$i" &
  clients+=($!)
done
wait "${clients[@]}" || true
python3 - "$work" "$largest" "$(stat -L -c %s "$work/registry/files/$largest")" <<'PY'
import glob, sys
work, name, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [open(f).read().split() for f in glob.glob(f"{work}/client-*")]
ok = sum(1 for r in rows if r and r[0] == "200")
first = sorted(float(r[1]) for r in rows if r)
total = sorted(float(r[2]) for r in rows if r)
asked = sum(1 for line in open(f"{work}/registry.log") if line.strip().endswith(name.rsplit("/", 1)[1]))
print(f"50 clients of {name} ({size / 1e6:.1f} MB), pkgproxy cold: {ok}/50 ok, {asked} request(s) for it to the registry, "
      f"last client done {total[-1]:.2f} s, first byte: first {first[0]*1000:.1f} ms, "
      f"others p50 {first[len(first)//2]*1000:.1f} ms, max {first[-1]*1000:.1f} ms")
PY
stop_pkgproxy
