#!/usr/bin/env bash
# dnf installs through pkgproxy's RPM side, beside dnf fetching from the
# repository directly: a fake repository on 127.0.0.1 (nginx serving 300
# noarch packages built once with rpmbuild, kept in RPM_REPO, with
# createrepo_c's metadata, zchunk beside gzip as Fedora publishes it), then
#   - `dnf install --downloadonly` of the five top-level packages, whose
#     dependencies are the other 295, in an installroot of its own with an
#     empty dnf cache (metadata and packages all fetched): straight from
#     the fake, through pkgproxy cold (its cache empty) and warm (its cache
#     full, a second empty dnf cache), each REPEAT times, then the medians;
#     with PINNED=1, pkgproxy on core 0 and dnf and the fake on core 1;
#     with DELAY_MS=N, the fake behind a relay delaying each byte N ms each
#     way (bench/delay.py: a network to the repository), for dnf straight
#     and for pkgproxy alike;
#   - 50 clients of the largest package at once through a cold pkgproxy
#     (with `repomd.xml` alone held, then with the metadata held), the
#     fake sending each connection at 50 MB/s: requests to the fake, when
#     the last client was done, the others' first byte.
# RPM_REPO: where the fake repository is kept (default
# ~/.cache/pkgproxy-bench/rpm/repo-1); CACHE_ROOT: where pkgproxy's caches
# go (default: the temporary folder, on its disk). Every process and file
# the script makes is gone when it ends. Traffic stays on 127.0.0.1.
#   REPEAT=3 bench/rpm.sh
#   PINNED=1 DELAY_MS=10 REPEAT=3 bench/rpm.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=${REPEAT:-3}
kept=${RPM_REPO:-$HOME/.cache/pkgproxy-bench/rpm/repo-1}
for tool in nginx dnf rpmbuild createrepo_c; do
  command -v "$tool" >/dev/null || { echo "bench/rpm.sh: needs $tool (./test.sh installs it)" >&2; exit 1; }
done

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
pids=()
work="" shm="" caches=""
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ -f "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; fi
  rm -rf "$work" "$shm" "$caches"
}
trap cleanup EXIT
work=$(mktemp -d)
chmod 755 "$work"
# dnf's installroots and caches, in memory: the client's disk is not measured.
shm=$(mktemp -d -p /dev/shm pkgproxy-bench-rpm.XXXXXX)
# pkgproxy's caches: in $work, on its disk, unless CACHE_ROOT says where.
caches=$(mktemp -d -p "${CACHE_ROOT:-$work}" pkgproxy-bench-caches.XXXXXX)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
repo_port=$(port)
pkgproxy_port=$(port)
reached_port=$repo_port
if [ "${PINNED:-0}" = 1 ]; then proxy_core="taskset -c 0"; client_core="taskset -c 1"; else proxy_core=""; client_core=""; fi

# The repository, made once: 300 packages, five top-level ones (bench-app1
# to bench-app5) and 295 libraries, each required by one or two packages
# before it (a tree with shared branches: installing the five pulls in
# every one); payloads of pseudo-random bytes (they do not compress away),
# 10 KB to 2 MB log-uniform, and three of 30, 40 and 50 MB.
if [ ! -f "$kept/repodata/repomd.xml" ]; then
  build=$work/build
  mkdir -p "$build/SPECS" "$build/repo/Packages"
  python3 - "$build" 300 <<'PY'
import random, sys
top, count = sys.argv[1], int(sys.argv[2])
rng = random.Random("pkgproxy-bench-rpm")
roots = 5
names = [f"bench-app{i + 1}" for i in range(roots)] + [f"bench-lib{i:03d}" for i in range(count - roots)]
sizes = [int(10_000 * 200 ** rng.random()) for _ in names]
for i, mb in zip(rng.sample(range(roots, count), 3), (30, 40, 50)):
    sizes[i] = mb * 1_000_000
requires = {name: [] for name in names}
for i in range(roots, count):
    for j in {rng.randrange(i)} | ({rng.randrange(i)} if rng.random() < 0.5 else set()):
        requires[names[j]].append(names[i])
spec = ["Name: bench", "Version: 1.0", "Release: 1", "Summary: pkgproxy's bench repository", "License: MIT",
        "BuildArch: noarch", "%description", "pkgproxy's bench repository.", ""]
for name in names:
    spec += [f"%package -n {name}", f"Summary: {name}, of pkgproxy's bench repository"]
    spec += [f"Requires: {r}" for r in requires[name]]
    spec += [f"%description -n {name}", f"{name}, made for pkgproxy's bench.", "",
             f"%files -n {name}", f"/usr/share/{name}/data", ""]
spec += ["%install", f"python3 {top}/payloads.py %{{buildroot}}", ""]
open(f"{top}/SPECS/bench.spec", "w").write("\n".join(spec))
open(f"{top}/payloads.py", "w").write(
    "import os, random, sys\n"
    f"for name, size in {list(zip(names, sizes))!r}:\n"
    "    os.makedirs(f'{sys.argv[1]}/usr/share/{name}')\n"
    "    open(f'{sys.argv[1]}/usr/share/{name}/data', 'wb').write(random.Random(name).randbytes(size))\n")
open(f"{top}/repo/roots.txt", "w").write(" ".join(names[:roots]) + "\n")
PY
  echo "making the fake repository once (rpmbuild, createrepo_c) into $kept"
  HOME=$build rpmbuild --quiet -bb --define "_topdir $build" --define '_binary_payload w1.gzdio' \
    --define '__os_install_post %{nil}' --define '_build_id_links none' "$build/SPECS/bench.spec"
  mv "$build"/RPMS/noarch/*.rpm "$build/repo/Packages/"
  createrepo_c --quiet --no-database --zck "$build/repo"
  mkdir -p "$(dirname "$kept")"
  rm -rf "$kept"
  mv "$build/repo" "$kept"
  rm -rf "$build"
fi
# The fake's copy: links to the kept files, readable by nginx's workers.
mkdir "$work/repo"
cp -al "$kept/." "$work/repo/" 2>/dev/null || cp -a "$kept/." "$work/repo/"
chmod -R a+rX "$work/repo"
read -r -a roots < "$work/repo/roots.txt"
packages=$(find "$work/repo/Packages" -name '*.rpm' | wc -l)
echo "fake repository: $packages packages, $(du -sm --apparent-size "$work/repo/Packages" | cut -f1) MiB; dnf is asked for ${roots[*]}"

# The fake, each connection's files sent at `$1` bytes a second (0: as fast
# as it can).
start_nginx() {
  if [ -f "$work/nginx.pid" ]; then
    kill "$(cat "$work/nginx.pid")"
    for _ in $(seq 50); do [ -f "$work/nginx.pid" ] || break; sleep 0.1; done
  fi
  cat > "$work/nginx.conf" <<NGINX
daemon on; pid $work/nginx.pid; error_log $work/nginx-error.log; worker_processes 1;
events { worker_connections 1024; }
http {
  log_format files '\$status \$request_uri'; access_log $work/repo.log files;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work; default_type application/octet-stream;
  server { listen 127.0.0.1:$repo_port; root $work/repo; location / { limit_rate $1; } }
}
NGINX
  $client_core nginx -c "$work/nginx.conf"
}

start_pkgproxy() {
  cache=$(mktemp -d -p "$caches" pkgproxy-cache.XXXXXX)
  # Eviction is not measured: a disk nearly full (under min_free's 5 %)
  # would have pkgproxy evict what the warm run asks.
  printf '[cache]\nmin_free = "1GiB"\n\n[[rpm.repository]]\nname = "local"\nmirrors = ["http://127.0.0.1:%s"]\n' \
    "$reached_port" > "$work/pkgproxy.toml"
  $proxy_core "$target/release/pkgproxy" -addr "127.0.0.1:$pkgproxy_port" -cache-dir "$cache" \
    -config "$work/pkgproxy.toml" -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" \
    -log-level warn >> "$work/pkgproxy.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$pkgproxy_port/" && return; sleep 0.1; done
  echo "pkgproxy did not start" >&2; exit 1
}
# The CPU time pkgproxy has used (user and system), in seconds.
cpu_seconds() {
  python3 -c "import os; f = open('/proc/${pids[-1]}/stat').read().rsplit(')', 1)[1].split(); print(f'{(int(f[11]) + int(f[12])) / os.sysconf(\"SC_CLK_TCK\"):.2f}')"
}
stop_pkgproxy() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; rm -rf "$cache"; }

# `dnf ARGS...` with the repository at `$1`, in a new installroot with a new,
# empty cache (as the tests' sandbox: its own reposdir, --releasever=1, no
# plugins); `install` is `install --downloadonly` into a new folder, whose
# packages it counts in $downloaded. Its output in $work/dnf.log.
sandbox_dnf() {
  local place status=0
  place=$(mktemp -d -p "$shm" dnf.XXXXXX)
  mkdir -p "$place/repos" "$place/root" "$place/cache" "$place/downloads"
  printf '[local]\nname=local\nbaseurl=%s\ngpgcheck=0\nmetadata_expire=0\n' "$1" > "$place/repos/local.repo"
  shift
  if [ "$1" = install ]; then shift; set -- install --downloadonly "--downloaddir=$place/downloads" "$@"; fi
  $client_core dnf -y --releasever=1 --setopt=install_weak_deps=0 --setopt=skip_if_unavailable=False \
    "--installroot=$place/root" "--setopt=reposdir=$place/repos" "--setopt=cachedir=$place/cache" \
    --setopt=keepcache=1 '--disableplugin=*' "$@" > "$work/dnf.log" 2>&1 || status=$?
  downloaded=$(find "$place/downloads" -name '*.rpm' | wc -l)
  rm -rf "$place"
  return "$status"
}

# One `dnf install --downloadonly` of the top-level packages (all 300
# come) through the repository at `$1`. Prints the seconds.
install() {
  local start end
  start=$(date +%s.%N)
  sandbox_dnf "$1" install "${roots[@]}" ||
    { tail -20 "$work/dnf.log" >&2; return 1; }
  end=$(date +%s.%N)
  [ "$downloaded" = "$packages" ] || { echo "dnf downloaded $downloaded packages of $packages" >&2; tail -20 "$work/dnf.log" >&2; return 1; }
  python3 -c "print(f'{$end - $start:.2f}')"
}

start_nginx 0
if [ -n "${DELAY_MS:-}" ]; then
  reached_port=$(port)
  $client_core python3 "$root/bench/delay.py" "$reached_port" "$repo_port" "$DELAY_MS" &
  pids+=($!)
  sleep 0.5
fi
direct="http://127.0.0.1:$reached_port/"
through="http://127.0.0.1:$pkgproxy_port/rpm/local/"
echo "pinned: ${PINNED:-0}, delay: ${DELAY_MS:-0} ms each way, repeat: $repeat"

: > "$work/runs"
for run in $(seq "$repeat"); do
  : > "$work/repo.log"
  straight=$(install "$direct")
  asked_straight=$(wc -l < "$work/repo.log")
  start_pkgproxy
  : > "$work/repo.log"
  cold=$(install "$through")
  asked=$(wc -l < "$work/repo.log")
  cpu_cold=$(cpu_seconds)
  warm=$(install "$through")
  asked_warm=$(( $(wc -l < "$work/repo.log") - asked ))
  cpu_warm=$(python3 -c "print(f'{$(cpu_seconds) - $cpu_cold:.2f}')")
  stop_pkgproxy
  echo "$straight $cold $warm" >> "$work/runs"
  echo "run $run: straight ${straight} s ($asked_straight requests to the fake), through pkgproxy cold ${cold} s ($asked)," \
    "warm ${warm} s ($asked_warm); pkgproxy's CPU time cold ${cpu_cold} s, warm ${cpu_warm} s"
done
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
if not runs:
    sys.exit()
straight, cold, warm = (statistics.median(column) for column in zip(*runs))
print(f"medians: straight {straight:.2f} s, through pkgproxy cold {cold:.2f} s (cold / straight {cold / straight:.2f}), "
      f"warm {warm:.2f} s (straight / warm {straight / warm:.2f})")
PY

# 50 clients of the largest package at once through a cold pkgproxy, the
# fake at 50 MB/s a connection: first with only `repomd.xml` held (pkgproxy
# fetches the primary metadata, once, to learn the package's checksum,
# then the package), then with the metadata held, fetched by one dnf
# before (as a fleet's machines do before they ask for a package). (A
# package is refused by a pkgproxy that holds no `repomd.xml` above it.)
largest=$(cd "$work/repo" && find Packages -name '*.rpm' -printf '%s %P\n' | sort -n | tail -1 | cut -d' ' -f2)
largest=Packages/$largest
clients() {
  local url="${through}$largest" clients=() i
  : > "$work/repo.log"
  for i in $(seq 50); do
    $client_core curl -s -o /dev/null -w '%{http_code} %{time_starttransfer} %{time_total}\n' "$url" > "$work/client-$i" &
    clients+=($!)
  done
  wait "${clients[@]}" || true
  python3 - "$work" "$largest" "$(stat -c %s "$work/repo/$largest")" "$1" <<'PY'
import glob, sys
work, name, size, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = [open(f).read().split() for f in glob.glob(f"{work}/client-*")]
ok = sum(1 for r in rows if r and r[0] == "200")
first = sorted(float(r[1]) for r in rows if r)
total = sorted(float(r[2]) for r in rows if r)
log = [line.split()[1] for line in open(f"{work}/repo.log") if line.strip()]
asked = sum(1 for path in log if path.endswith("/" + name))
print(f"50 clients of {name} ({size / 2**20:.1f} MiB), {label}: {ok}/50 ok, {asked} request(s) for it to the fake "
      f"({len(log) - asked} for metadata), last client done {total[-1]:.2f} s, first byte: first {first[0]*1000:.1f} ms, "
      f"others p50 {first[len(first)//2]*1000:.1f} ms, max {first[-1]*1000:.1f} ms")
PY
}
start_nginx 50m
start_pkgproxy
curl -fs -o /dev/null "${through}repodata/repomd.xml"
clients "repomd.xml alone held"
stop_pkgproxy
start_pkgproxy
sandbox_dnf "$through" makecache || { tail -20 "$work/dnf.log" >&2; exit 1; }
clients "the metadata held"
stop_pkgproxy
if grep -q WARN "$work/pkgproxy.log"; then
  echo "pkgproxy warned $(grep -c WARN "$work/pkgproxy.log") time(s), the first:"
  grep -m 3 WARN "$work/pkgproxy.log" | cut -c1-300
fi
