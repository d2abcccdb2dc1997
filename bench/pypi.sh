#!/usr/bin/env bash
# Python installs through pkgproxy's PyPI side, beside the installer
# fetching from the index directly: a fake simple index on 127.0.0.1 (nginx
# serving HTML pages and the wheels of a realistic requirements set, taken
# once from PyPI into PYPI_WHEELS), then
#   - `uv pip install`, `pip install` and `pip download` of the whole set
#     with empty client caches (INSTALLERS="uv pip pip-download" says which):
#     straight from the fake, through pkgproxy cold (its cache empty) and
#     warm (a second empty client cache), each REPEAT times, then the
#     medians; with PINNED=1, pkgproxy on core 0 and the installer, the
#     fake, the relay and the curl clients on core 1; with DELAY_MS=N, the
#     fake behind a relay delaying each byte N ms each way (bench/delay.py:
#     a network to the index), for the installer straight and for pkgproxy
#     alike;
#   - 50 clients of the set's largest wheel at once through a cold pkgproxy,
#     the fake sending each connection at 50 MB/s: requests to the fake,
#     when the last client was done, the others' first byte.
# PYTHON_TOOLS: the folder of the pip and uv used (default
# target/test-tools/python/bin, where ./test.sh installs them).
#   REPEAT=3 bench/pypi.sh
#   PINNED=1 DELAY_MS=10 REPEAT=3 bench/pypi.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=${REPEAT:-3}
wheels=${PYPI_WHEELS:-$HOME/.cache/pkgproxy-bench/pypi}
python_tools=${PYTHON_TOOLS:-$root/target/test-tools/python/bin}
installers=${INSTALLERS:-uv pip pip-download}
if [ "${PINNED:-0}" = 1 ]; then proxy_core="taskset -c 0"; client_core="taskset -c 1"; else proxy_core=""; client_core=""; fi
command -v nginx >/dev/null || { echo "bench/pypi.sh: needs nginx" >&2; exit 1; }
[ -x "$python_tools/pip" ] && [ -x "$python_tools/uv" ] || { echo "bench/pypi.sh: run ./test.sh once (it installs pip and uv)" >&2; exit 1; }

# The set: a web service's and a data job's dependencies, with what they
# pull in (dozens of wheels; numpy, scipy, pandas and botocore are tens of MB).
if [ ! -f "$wheels/done" ]; then
  mkdir -p "$wheels"
  printf '%s\n' numpy==2.1.3 scipy==1.14.1 pandas==2.2.3 matplotlib==3.9.2 pillow==11.0.0 \
    requests==2.32.3 flask==3.1.0 django==5.1.3 sqlalchemy==2.0.36 pydantic==2.10.2 boto3==1.35.70 \
    cryptography==44.0.0 lxml==5.3.0 pyyaml==6.0.2 rich==13.9.4 httpx==0.28.0 pytest==8.3.3 > "$wheels/wanted.txt"
  "$python_tools/pip" download --disable-pip-version-check -q --only-binary=:all: -d "$wheels" -r "$wheels/wanted.txt"
  touch "$wheels/done"
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
index_port=$(port)
pkgproxy_port=$(port)
# The port clients and pkgproxy reach the fake at: the relay's with DELAY_MS.
reached_port=$index_port
[ -z "${DELAY_MS:-}" ] || reached_port=$(port)

# The fake index: a PEP 503 page per project linking its files by SHA-256,
# and the pinned list of everything downloaded.
python3 - "$wheels" "$work/index" <<'PY'
import hashlib, os, re, sys, html
wheels, out = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(out, "files"))
projects, pinned = {}, []
for name in sorted(os.listdir(wheels)):
    if not name.endswith(".whl"):
        continue
    project, version = name.split("-")[:2]
    normal = re.sub(r"[-_.]+", "-", project).lower()
    data = open(os.path.join(wheels, name), "rb").read()
    os.link(os.path.join(wheels, name), os.path.join(out, "files", name))
    projects.setdefault(normal, []).append((name, hashlib.sha256(data).hexdigest()))
    pinned.append(f"{normal}=={version}")
for project, files in projects.items():
    os.makedirs(os.path.join(out, "simple", project))
    links = "".join(f'<a href="../../files/{html.escape(f)}#sha256={h}">{html.escape(f)}</a>\n' for f, h in files)
    open(os.path.join(out, "simple", project, "index.html"), "w").write(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
open(os.path.join(out, "pinned.txt"), "w").write("\n".join(sorted(set(pinned))) + "\n")
print(f"fake index: {len(projects)} projects, {sum(len(f) for f in projects.values())} wheels, "
      f"{sum(os.path.getsize(os.path.join(out, 'files', f)) for fs in projects.values() for f, _ in fs) >> 20} MiB")
PY
chmod -R a+rX "$work/index"

# The fake index, each connection's files sent at `$1` bytes a second (0:
# as fast as it can).
start_nginx() {
  if [ -f "$work/nginx.pid" ]; then
    kill "$(cat "$work/nginx.pid")"
    for _ in $(seq 50); do [ -f "$work/nginx.pid" ] || break; sleep 0.1; done
  fi
  cat > "$work/nginx.conf" <<NGINX
daemon on; pid $work/nginx.pid; error_log $work/nginx-error.log; worker_processes 2;
events { worker_connections 1024; }
http {
  log_format files '\$request_uri'; access_log $work/index.log files;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work; default_type application/octet-stream;
  server { listen 127.0.0.1:$index_port; root $work/index; location /files/ { limit_rate $1; } }
}
NGINX
  $client_core nginx -c "$work/nginx.conf"
}

start_pkgproxy() {
  local cache
  cache=$(mktemp -d -p "${CACHE_ROOT:-$work}" pkgproxy-cache.XXXXXX)
  printf '[pypi]\nmirrors = ["http://127.0.0.1:%s/simple"]\n[upstream]\ntrust = ["http://127.0.0.1:%s"]\n' \
    "$reached_port" "$reached_port" > "$work/pkgproxy.toml"
  $proxy_core "$target/release/pkgproxy" -addr "127.0.0.1:$pkgproxy_port" -cache-dir "$cache" \
    -config "$work/pkgproxy.toml" -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" \
    -log-level warn > "$work/pkgproxy.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$pkgproxy_port/pypi/simple/" >/dev/null && return; sleep 0.1; done
  echo "pkgproxy did not start" >&2; exit 1
}
# The CPU time pkgproxy has used (user and system), in seconds.
cpu_seconds() {
  python3 -c "import os; f = open('/proc/${pids[-1]}/stat').read().rsplit(')', 1)[1].split(); print(f'{(int(f[11]) + int(f[12])) / os.sysconf(\"SC_CLK_TCK\"):.2f}')"
}
stop_pkgproxy() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

# One install of the whole set with `$1` (uv, pip, or pip-download: `pip
# download` of its wheels into a folder) from the index `$2`, into a new
# folder with a new cache and temporary folder, all in memory: on a disk,
# unpacking thousands of files takes most of the time (pip took 14 s of
# system time here against 0.7 s in /dev/shm), whoever served them.
# Prints the seconds.
install() {
  local place start end
  place=$(mktemp -d -p /dev/shm pkgproxy-bench-pypi.XXXXXX)
  mkdir "$place/tmp"
  export TMPDIR=$place/tmp
  start=$(date +%s.%N)
  case $1 in
    pip) PIP_CONFIG_FILE=/dev/null $client_core "$python_tools/pip" install -q --no-input --disable-pip-version-check --no-compile \
           --no-deps --index-url "$2" --cache-dir "$place/cache" --target "$place/target" -r "$work/index/pinned.txt" ;;
    pip-download) PIP_CONFIG_FILE=/dev/null $client_core "$python_tools/pip" download -q --no-input --disable-pip-version-check \
           --no-deps --index-url "$2" --cache-dir "$place/cache" --dest "$place/target" -r "$work/index/pinned.txt" ;;
    uv) UV_NO_CONFIG=1 $client_core "$python_tools/uv" pip install -q --no-deps --index-url "$2" --cache-dir "$place/cache" \
          --python "$python_tools/python" --target "$place/target" -r "$work/index/pinned.txt" ;;
  esac || { echo "$1 install failed" >&2; rm -rf "$place"; exit 1; }
  end=$(date +%s.%N)
  unset TMPDIR
  rm -rf "$place"
  python3 -c "print(f'{$end - $start:.2f}')"
}

start_nginx 0
if [ -n "${DELAY_MS:-}" ]; then
  $client_core python3 "$root/bench/delay.py" "$reached_port" "$index_port" "$DELAY_MS" &
  pids+=($!)
  sleep 0.5
fi
direct="http://127.0.0.1:$reached_port/simple/"
through="http://127.0.0.1:$pkgproxy_port/pypi/simple/"
echo "pinned: ${PINNED:-0}, delay: ${DELAY_MS:-0} ms each way, repeat: $repeat"
for installer in $installers; do
  : > "$work/runs"
  for run in $(seq "$repeat"); do
    : > "$work/index.log"
    straight=$(install "$installer" "$direct")
    asked_straight=$(wc -l < "$work/index.log")
    start_pkgproxy
    : > "$work/index.log"
    cold=$(install "$installer" "$through")
    asked=$(wc -l < "$work/index.log")
    cpu_cold=$(cpu_seconds)
    warm=$(install "$installer" "$through")
    asked_warm=$(( $(wc -l < "$work/index.log") - asked ))
    cpu_warm=$(python3 -c "print(f'{$(cpu_seconds) - $cpu_cold:.2f}')")
    stop_pkgproxy
    echo "$straight $cold $warm" >> "$work/runs"
    echo "$installer run $run: straight ${straight} s ($asked_straight requests to the fake), through pkgproxy cold ${cold} s ($asked)," \
      "warm ${warm} s ($asked_warm); pkgproxy's CPU time cold ${cpu_cold} s, warm ${cpu_warm} s"
  done
  python3 - "$work/runs" "$installer" <<'PY'
import statistics, sys
runs = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
straight, cold, warm = (statistics.median(column) for column in zip(*runs))
print(f"{sys.argv[2]} medians: straight {straight:.2f} s, through pkgproxy cold {cold:.2f} s (cold / straight {cold / straight:.2f}), "
      f"warm {warm:.2f} s (straight / warm {straight / warm:.2f})")
PY
done

# 50 clients of the largest wheel, pkgproxy cold, the fake at 50 MB/s a
# connection.
largest=$(ls -S "$work/index/files" | head -1)
sha=$(sha256sum "$work/index/files/$largest" | cut -c1-64)
start_nginx 50m
start_pkgproxy
: > "$work/index.log"
url="http://127.0.0.1:$pkgproxy_port/pypi/packages/${sha:0:2}/${sha:2:2}/${sha:4}/$largest"
start=$(date +%s.%N)
clients=()
for i in $(seq 50); do
  $client_core curl -s -o /dev/null -w '%{http_code} %{time_starttransfer} %{time_total}\n' "$url" > "$work/client-$i" &
  clients+=($!)
done
wait "${clients[@]}" || true
python3 - "$work" "$largest" "$(stat -c %s "$work/index/files/$largest")" "$start" <<'PY'
import glob, sys
work, name, size, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
rows = [open(f).read().split() for f in glob.glob(f"{work}/client-*")]
ok = sum(1 for r in rows if r and r[0] == "200")
first = sorted(float(r[1]) for r in rows if r)
total = sorted(float(r[2]) for r in rows if r)
asked = sum(1 for line in open(f"{work}/index.log") if line.strip().endswith(name))
print(f"50 clients of {name} ({size >> 20} MiB), pkgproxy cold: {ok}/50 ok, {asked} request(s) for it to the index, "
      f"last client done {total[-1]:.2f} s, first byte: first {first[0]*1000:.1f} ms, "
      f"others p50 {first[len(first)//2]*1000:.1f} ms, max {first[-1]*1000:.1f} ms")
PY
stop_pkgproxy
