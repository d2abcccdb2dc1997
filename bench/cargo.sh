#!/usr/bin/env bash
# `cargo fetch --locked` of this repository's own Cargo.lock (its crates for
# this machine's target) with an empty CARGO_HOME, from a fake sparse
# registry on 127.0.0.1: nginx serving the index lines and .crate files
# this machine's cargo keeps of crates.io (~/.cargo/registry, copied). Straight from
# it, then through pkgproxy cold (its cache empty) and warm (a second empty
# CARGO_HOME), over HTTP/2 (cargo's h2c upgrade) and over HTTP/1.1
# (http.multiplexing = false), each REPEAT times:
#   REPEAT=3 bench/cargo.sh
#   PINNED=1 DELAY_MS=10 REPEAT=3 bench/cargo.sh
# LATENCY=10 puts the registry across a network, as crates.io is: served
# over TLS with HTTP/2, behind a relay (bench/delay.py) that delays every
# byte that many milliseconds each way, for cargo straight and for pkgproxy
# alike; DELAY_MS=10 is the same (the other benches' name for it).
# PINNED=1 puts pkgproxy on core 0 (taskset -c 0) and cargo, nginx and the
# relay on core 1, the straight runs pinned the same way.
# CACHE_ROOT=DIR keeps pkgproxy's caches on another file system: a cold
# fetch creates a file per crate and index file, and ext4 creates them
# slowly in a folder group where thousands of files were just deleted.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=${REPEAT:-3}
cargo_cache=${CARGO_HOME:-$HOME/.cargo}/registry
target=$(rustc -vV | sed -n 's/^host: //p')
command -v nginx >/dev/null || { echo "bench/cargo.sh: needs nginx" >&2; exit 1; }

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
target_dir=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
work=$(mktemp -d)
chmod 755 "$work"   # nginx's workers read the registry
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  rm -rf "$work" ${caches[@]+"${caches[@]}"}
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
registry_port=$(port)
latency=${LATENCY:-${DELAY_MS:-}}
if [ "${PINNED:-0}" = 1 ]; then proxy_core="taskset -c 0"; client_core="taskset -c 1"; else proxy_core=""; client_core=""; fi
registry_host=127.0.0.1
scheme=http
nginx_port=$registry_port
if [ -n "$latency" ]; then
  scheme=https
  nginx_port=$(port)
  # A CA of the bench's own, and the registry's certificate signed by it.
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out "$work/ca.pem" -days 1 -subj /CN=bench-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.csr" -subj /CN=bench 2>/dev/null
  printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "$registry_host" > "$work/cert.ext"
  openssl x509 -req -in "$work/cert.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 1 \
    -extfile "$work/cert.ext" -out "$work/cert.pem" 2>/dev/null
  export SSL_CERT_FILE="$work/ca.pem" CARGO_HTTP_CAINFO="$work/ca.pem"   # pkgproxy's trust, and cargo's
  $client_core python3 "$root/bench/delay.py" "$registry_port" "$nginx_port" "$latency" &
  pids+=($!)
fi

# The registry: an index file per crate cargo keeps an index cache of (its
# lines: a binary head, then VERSION NUL LINE NUL pairs), and the .crate
# files it keeps.
python3 - "$cargo_cache" "$work/registry" "$scheme://$registry_host:$registry_port" <<'PY'
import glob, json, os, re, shutil, sys
cache, out, registry = sys.argv[1], sys.argv[2], sys.argv[3]
def index_path(name):
    n = name.lower()
    return {1: f"1/{n}", 2: f"2/{n}", 3: f"3/{n[0]}/{n}"}.get(len(n), f"{n[:2]}/{n[2:4]}/{n}")
files = 0
for path in glob.glob(os.path.join(cache, "index", "index.crates.io-*", ".cache", "**", "*"), recursive=True):
    if os.path.isdir(path):
        continue
    data = open(path, "rb").read()
    parts = data[5:].split(b"\0")[1:]          # after the head and the validator
    lines = [parts[i + 1] for i in range(0, len(parts) - 1, 2) if parts[i + 1].startswith(b"{")]
    if not lines:
        continue
    name = json.loads(lines[0])["name"]
    target = os.path.join(out, "index", index_path(name))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    open(target, "wb").write(b"\n".join(lines) + b"\n")
    files += 1
crates = 0
for path in glob.glob(os.path.join(cache, "cache", "index.crates.io-*", "*.crate")):
    stem = os.path.basename(path)[: -len(".crate")]
    found = re.match(r"^([A-Za-z0-9_-]+?)-(\d+\.\d+\.\d+.*)$", stem)   # NAME-VERSION: md-5-0.11.0
    if not found:
        continue
    name, version = found.groups()
    target = os.path.join(out, "crates", name, f"{name}-{version}.crate")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(path, target)
    crates += 1
dl = f"{registry}/crates/{{crate}}/{{crate}}-{{version}}.crate"
open(os.path.join(out, "index", "config.json"), "w").write(json.dumps({"dl": dl}))
print(f"fake registry: {files} index files, {crates} crates")
PY

listen="listen $registry_host:$nginx_port;"
if [ "$scheme" = https ]; then
  listen="listen $registry_host:$nginx_port ssl http2; ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;"
fi
cat > "$work/nginx.conf" <<NGINX
daemon on; pid $work/nginx.pid; error_log $work/nginx-error.log; worker_processes 2;
events { worker_connections 1024; }
http {
  access_log off; client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work; default_type application/octet-stream;
  server { $listen root $work/registry; etag on; }
}
NGINX
$client_core nginx -c "$work/nginx.conf"

mkdir -p "$work/project"
git -C "$root" archive HEAD | tar -x -C "$work/project"

pkgproxy_port=$(port)
caches=()
start_pkgproxy() {
  # A new folder for each cold run: deleting the last one just before would
  # make ext4 slow to create the files of the next.
  local cache
  cache=$(mktemp -d -p "${CACHE_ROOT:-$work}" pkgproxy-cache.XXXXXX)
  caches+=("$cache")
  printf '[cargo]\nindex = ["%s/index"]\n' "$scheme://$registry_host:$registry_port" > "$work/pkgproxy.toml"
  $proxy_core "$target_dir/release/pkgproxy" -addr "127.0.0.1:$pkgproxy_port" -cache-dir "$cache" \
    -config "$work/pkgproxy.toml" -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" \
    -log-level warn > "$work/pkgproxy.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$pkgproxy_port/cargo/index/config.json" >/dev/null && return; sleep 0.1; done
  echo "pkgproxy did not start" >&2; exit 1
}
# The CPU time pkgproxy has used (user and system), in seconds.
cpu_seconds() {
  python3 -c "import os; f = open('/proc/${pids[-1]}/stat').read().rsplit(')', 1)[1].split(); print(f'{(int(f[11]) + int(f[12])) / os.sysconf(\"SC_CLK_TCK\"):.2f}')"
}
stop_pkgproxy() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

# One fetch with a new CARGO_HOME whose registry is $1; HTTP/1.1 when $2 is
# "http1". Prints the seconds it took. The CARGO_HOME is in memory: on a
# disk, cargo's own file writes take most of the time (15 s of system time
# here against 0.6 s in /dev/shm), whatever serves it.
fetch() {
  local home="${CARGO_HOMES:-/dev/shm}/pkgproxy-bench-home-$RANDOM$RANDOM"
  mkdir -p "$home"
  printf '[source.crates-io]\nreplace-with = "bench"\n[source.bench]\nregistry = "sparse+%s"\n[net]\nretry = 0\n' "$1" > "$home/config.toml"
  [ "$2" = http1 ] && printf '[http]\nmultiplexing = false\n' >> "$home/config.toml"
  local start end
  start=$(date +%s.%N)
  CARGO_HOME="$home" $client_core cargo fetch --locked --target "$target" --manifest-path "$work/project/Cargo.toml" -q \
    || { echo "cargo fetch failed" >&2; exit 1; }
  end=$(date +%s.%N)
  rm -rf "$home"
  python3 -c "print(f'{$end - $start:.2f}')"
}

direct="$scheme://$registry_host:$registry_port/index/"
through="http://127.0.0.1:$pkgproxy_port/cargo/index/"
packages=$(grep -c '^source = "registry+' "$root/Cargo.lock")
echo "Cargo.lock: $packages packages from crates.io; target $target"
echo "pinned: ${PINNED:-0}, delay: ${latency:-0} ms each way, repeat: $repeat"
for protocol in http2 http1; do
  : > "$work/runs"
  for run in $(seq "$repeat"); do
    straight=$(fetch "$direct" "$protocol")
    start_pkgproxy
    cold=$(fetch "$through" "$protocol")
    cpu_cold=$(cpu_seconds)
    warm=$(fetch "$through" "$protocol")
    cpu_warm=$(python3 -c "print(f'{$(cpu_seconds) - $cpu_cold:.2f}')")
    stop_pkgproxy
    echo "$straight $cold $warm" >> "$work/runs"
    echo "$protocol run $run: straight ${straight} s, through pkgproxy cold ${cold} s, warm ${warm} s;" \
      "pkgproxy's CPU time cold ${cpu_cold} s, warm ${cpu_warm} s"
  done
  python3 - "$work/runs" "$protocol" <<'PY'
import statistics, sys
runs = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
straight, cold, warm = (statistics.median(column) for column in zip(*runs))
print(f"{sys.argv[2]} medians: straight {straight:.2f} s, through pkgproxy cold {cold:.2f} s (cold / straight {cold / straight:.2f}), "
      f"warm {warm:.2f} s (straight / warm {straight / warm:.2f})")
PY
done
