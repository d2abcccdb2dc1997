#!/usr/bin/env bash
# Hits over HTTP/2 and over TLS, pkgproxy's cargo side beside nginx
# proxy_cache (HTTP/2 on, keepalive_requests raised), both warm, measured
# from outside with h2load (nghttp2-client): a fake sparse registry on
# 127.0.0.1 (nginx serving config.json, the index and two .crate files: one
# of 4 KiB, one of 50 MiB), then for each proxy
#   - small: the 4 KiB crate, 32 connections x 10 streams, cleartext h2c
#     (prior knowledge) and h2 over TLS (ALPN), DURATION seconds each;
#   - large: the 50 MiB crate over TLS, 4 connections x 1 stream;
#   - handshakes: 2,000 new TLS connections at once, one request each.
# Both proxies use one certificate (ECDSA P-256) and one core: with PINNED=1
# (the default) the proxy runs on core 0 and h2load on core 1; nginx has one
# worker, pkgproxy one proxy thread (PINNED=0: each a worker or thread per
# core, h2load beside them). The CPU each proxy took (its
# processes' utime + stime over the run) is printed beside each figure.
#   REPEAT=3 DURATION=10 bench/h2tls.sh
#   PROXIES="nginx pkgproxy" SCENARIOS="h2c-small tls-small tls-large handshakes" bench/h2tls.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=${REPEAT:-3}
duration=${DURATION:-10}
proxies=${PROXIES:-"nginx pkgproxy"}
scenarios=${SCENARIOS:-"h2c-small tls-small tls-large handshakes"}
command -v nginx >/dev/null || { echo "bench/h2tls.sh: needs nginx" >&2; exit 1; }
command -v h2load >/dev/null || { echo "bench/h2tls.sh: needs h2load (apt-get install nghttp2-client)" >&2; exit 1; }
if [ "${PINNED:-1}" = 1 ]; then
  proxy_core="taskset -c 0"; load_core="taskset -c 1"; workers=1
else
  proxy_core=""; load_core=""; workers=auto   # pkgproxy too: a proxy thread per core
fi

# PKGPROXY_BIN: another build to measure (the one of this tree by default).
bin=${PKGPROXY_BIN:-$root/target/release/pkgproxy}
[ -n "${PKGPROXY_BIN:-}" ] || cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for conf in origin proxy; do
    if [ -f "$work/$conf.pid" ]; then kill "$(cat "$work/$conf.pid")" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
origin_port=$(port)
nginx_port=$(port)
nginx_h2c_port=$(port)
pkgproxy_port=$(port)

# The registry: two crates of random bytes, their index lines naming their
# SHA-256 (what pkgproxy checks a download against).
python3 - "$work/registry" "$origin_port" <<'PY'
import hashlib, json, os, sys
out, port = sys.argv[1], sys.argv[2]
os.makedirs(out)
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump({"dl": f"http://127.0.0.1:{port}/crates/{{crate}}/{{crate}}-{{version}}.crate"}, f)
for name, size in [("bsmall", 4096), ("blarge", 50 << 20)]:
    data = os.urandom(size)
    os.makedirs(os.path.join(out, "crates", name))
    open(os.path.join(out, "crates", name, f"{name}-1.0.0.crate"), "wb").write(data)
    folder = os.path.join(out, name[:2], name[2:4])
    os.makedirs(folder)
    line = {"name": name, "vers": "1.0.0", "deps": [], "cksum": hashlib.sha256(data).hexdigest(),
            "features": {}, "yanked": False}
    open(os.path.join(folder, name), "w").write(json.dumps(line) + "\n")
    open(os.path.join(out, f"{name}.sum"), "w").write(line["cksum"])
PY
chmod -R a+rX "$work/registry"
small_sum=$(cat "$work/registry/bsmall.sum")
large_sum=$(cat "$work/registry/blarge.sum")

# One certificate for both proxies.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
  -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null

nginx_conf() {  # $1: name, $2: server blocks
  cat > "$work/$1.conf" <<NGINX
daemon on; pid $work/$1.pid; error_log $work/$1-error.log; worker_processes $workers; worker_rlimit_nofile 16384;
events { worker_connections 16384; }
http {
  access_log off; sendfile on; tcp_nopush on; default_type application/octet-stream;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work;
  $2
}
NGINX
}
nginx_conf origin "server { listen 127.0.0.1:$origin_port; root $work/registry; }"
nginx -c "$work/origin.conf"

# nginx proxy_cache as a production set-up has it: HTTP/2 over TLS, h2c on
# a second port, connections kept for as many requests as clients send.
mkdir -p "$work/nginx-cache"
nginx_conf proxy "
  proxy_cache_path $work/nginx-cache levels=1:2 keys_zone=bench:64m max_size=10g inactive=1d use_temp_path=off;
  keepalive_requests 1000000000;
  ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem; ssl_session_cache shared:SSL:10m;
  ssl_protocols TLSv1.2 TLSv1.3;
  server {
    listen 127.0.0.1:$nginx_port ssl http2; listen 127.0.0.1:$nginx_h2c_port http2;
    location / { proxy_pass http://127.0.0.1:$origin_port; proxy_cache bench; proxy_cache_valid 200 1d;
                 proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_cache_lock on; }
  }"

start_nginx() { $proxy_core nginx -c "$work/proxy.conf"; }
stop_nginx() {
  kill "$(cat "$work/proxy.pid")"
  for _ in $(seq 50); do [ -f "$work/proxy.pid" ] || break; sleep 0.1; done
}
start_pkgproxy() {
  mkdir -p "$work/pkgproxy-cache"
  cat > "$work/pkgproxy.toml" <<TOML
[cargo]
index = ["http://127.0.0.1:$origin_port/"]
[server]
tls_cert = "$work/cert.pem"
tls_key = "$work/key.pem"
max_connections = 100000
max_connections_per_client = 100000
TOML
  $proxy_core "$bin" -addr "127.0.0.1:$pkgproxy_port" -cache-dir "$work/pkgproxy-cache" \
    -config "$work/pkgproxy.toml" -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" \
    -log-level warn > "$work/pkgproxy.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$pkgproxy_port/" && return; sleep 0.1; done
  echo "pkgproxy did not start" >&2; exit 1
}
stop_pkgproxy() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

# The proxy's processes' CPU so far, in clock ticks.
proxy_pids() {
  case $1 in
    nginx) pgrep -f "nginx.*$work/proxy.conf"; pgrep -P "$(cat "$work/proxy.pid")" ;;
    pkgproxy) echo "${pids[-1]}" ;;
  esac
}
cpu_ticks() {
  local total=0 pid
  for pid in $(proxy_pids "$1" | sort -u); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$total"
}

# The URLs each proxy serves the crates at.
urls() {  # $1: proxy, $2: crate, $3: its checksum, $4: scheme
  case $1 in
    nginx)
      local p=$nginx_port; [ "$4" = http ] && p=$nginx_h2c_port
      echo "$4://127.0.0.1:$p/crates/$2/$2-1.0.0.crate" ;;
    pkgproxy) echo "$4://127.0.0.1:$pkgproxy_port/cargo/crates/$2/1.0.0/$3" ;;
  esac
}

check() {  # $1: proxy, $2: URL, $3: the checksum its body must have
  [ "$(curl -ksS --http2-prior-knowledge "$2" | sha256sum | cut -d' ' -f1)" = "$3" ] || { echo "$1: $2 is not the crate" >&2; curl -ksSv --http2-prior-knowledge -o /dev/null "$2" >&2; cat "$work"/*error.log >&2; exit 1; }
}
warm() {  # $1: proxy; each crate once by each scheme
  local scheme
  [ "$1" = pkgproxy ] && curl -fsS -o /dev/null "http://127.0.0.1:$pkgproxy_port/cargo/index/bs/ma/bsmall"
  for scheme in http https; do
    check "$1" "$(urls "$1" bsmall "$small_sum" "$scheme")" "$small_sum"
    check "$1" "$(urls "$1" blarge "$large_sum" "$scheme")" "$large_sum"
  done
}

# One h2load run; prints "req/s MB/s proxy-CPU-seconds CPU-seconds-per-GB cipher".
measure() {  # $1: proxy, $2..: h2load arguments
  local proxy=$1 before after out failed
  shift
  before=$(cpu_ticks "$proxy")
  out=$($load_core h2load "$@" 2>&1) || { echo "$out" >&2; exit 1; }
  after=$(cpu_ticks "$proxy")
  failed=$(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) failed.*/\1/p')
  [ "${failed:-1}" = 0 ] || { echo "$out" >&2; echo "$proxy: failed requests" >&2; exit 1; }
  python3 - "$out" "$((after - before))" "$(getconf CLK_TCK)" <<'PY'
import re, sys
out, ticks, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seconds, rps = (float(x) for x in re.search(r"finished in ([0-9.]+)s, ([0-9.]+) req/s", out).groups())
rate = re.search(r"req/s, ([0-9.]+)([KMG]?B)/s", out)
mb = float(rate.group(1)) * {"B": 1e-6, "KB": 1e-3, "MB": 1, "GB": 1e3}[rate.group(2)]
cipher = re.search(r"Cipher: (\S+)", out)
cpu = ticks / hz
print(f"{rps:.0f} {mb:.1f} {cpu:.2f} {cpu / (mb * seconds / 1000):.2f} {cipher.group(1) if cipher else '-'}")
PY
}

scenario() {  # $1: proxy, $2: scenario
  case $2 in
    h2c-small) measure "$1" -D "$duration" -c 32 -m 10 "$(urls "$1" bsmall "$small_sum" http)" ;;
    tls-small) measure "$1" -D "$duration" -c 32 -m 10 "$(urls "$1" bsmall "$small_sum" https)" ;;
    tls-large) measure "$1" -n 200 -c 4 -m 1 "$(urls "$1" blarge "$large_sum" https)" ;;
    # A new TLS connection for each request: the handshake's cost.
    handshakes) measure "$1" -n 2000 -c 2000 -m 1 "$(urls "$1" bsmall "$small_sum" https)" ;;
  esac
}

ulimit -n "$(ulimit -Hn)"
echo "pinned: ${PINNED:-1}, repeat: $repeat, duration: ${duration}s, $(nproc) cores, $(h2load --version 2>&1 | head -1)"
printf '| proxy | scenario | req/s | MB/s | proxy CPU s | CPU s per GB | cipher |\n|---|---|---|---|---|---|---|\n'
for proxy in $proxies; do
  "start_$proxy"
  warm "$proxy"
  for scenario in $scenarios; do
    for _ in $(seq "$repeat"); do
      read -r rps mb cpu per_gb cipher < <(scenario "$proxy" "$scenario")
      printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$proxy" "$scenario" "$rps" "$mb" "$cpu" "$per_gb" "$cipher"
    done
  done
  "stop_$proxy"
done
