#!/usr/bin/env bash
# JVM builds through pkgproxy's Maven side, beside Maven fetching from the
# repository directly: a fake repository on 127.0.0.1 (nginx serving the
# real poms and jars of Debian's /usr/share/maven-repo, each with its
# .sha1, .sha256 and .sha512), then
#   - `mvn -B validate` of a project whose build extensions are a hundred
#     and more of those artifacts (Maven resolves each, with every pom and
#     jar it depends on, before any phase), with an empty local repository:
#     straight from the fake, through pkgproxy cold (its cache empty) and
#     warm (a second empty local repository), each REPEAT times; with
#     PINNED=1, pkgproxy on core 0 and Maven and the fake on core 1; with
#     DELAY_MS=N, the fake behind a relay delaying each byte N ms each way
#     (bench/delay.py: a network to the repository), for Maven straight
#     and for pkgproxy alike;
#   - 50 clients of the largest jar at once through a cold pkgproxy, the
#     fake sending each connection at 50 MB/s: requests to the fake, when
#     the last client was done, the others' first byte.
#   REPEAT=3 bench/maven.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=${REPEAT:-3}
source_repo=${MAVEN_REPO:-/usr/share/maven-repo}
command -v nginx >/dev/null || { echo "bench/maven.sh: needs nginx" >&2; exit 1; }
command -v mvn >/dev/null || { echo "bench/maven.sh: needs maven (./test.sh installs it)" >&2; exit 1; }
[ -d "$source_repo" ] || { echo "bench/maven.sh: needs $source_repo (Debian's maven-repo)" >&2; exit 1; }

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
repo_port=$(port)
pkgproxy_port=$(port)
reached_port=$repo_port
if [ "${PINNED:-0}" = 1 ]; then proxy_core="taskset -c 0"; client_core="taskset -c 1"; else proxy_core=""; client_core=""; fi

# The fake repository: every versioned pom and jar, copied (Debian's are
# links), each with its checksums; and the artifacts that have both.
python3 - "$source_repo" "$work/repo" "$work/candidates.txt" <<'PY'
import hashlib, os, shutil, sys
source, out, listing = sys.argv[1:4]
candidates = []
for folder, _, files in os.walk(source):
    for name in files:
        if not name.endswith((".pom", ".jar")):
            continue
        path = os.path.join(folder, name)
        relative = os.path.relpath(path, source)
        target = os.path.join(out, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        data = open(path, "rb").read()
        open(target, "wb").write(data)
        for algorithm in ("sha1", "sha256", "sha512"):
            open(f"{target}.{algorithm}", "w").write(hashlib.new(algorithm, data).hexdigest())
        parts = relative.split(os.sep)
        if name.endswith(".jar") and len(parts) >= 4 and parts[-2] != "debian":
            group, artifact, version = ".".join(parts[:-3]), parts[-3], parts[-2]
            if name == f"{artifact}-{version}.jar" and os.path.exists(os.path.join(folder, f"{artifact}-{version}.pom")):
                candidates.append(f"{group}:{artifact}:{version}")
open(listing, "w").write("\n".join(sorted(candidates)) + "\n")
print(f"fake repository: {len(candidates)} artifacts with a pom and a jar")
PY
chmod -R a+rX "$work/repo"

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
  local cache
  cache=$(mktemp -d -p "${CACHE_ROOT:-$work}" pkgproxy-cache.XXXXXX)
  printf '[[maven.repository]]\nname = "central"\nmirrors = ["http://127.0.0.1:%s"]\n' "$reached_port" > "$work/pkgproxy.toml"
  $proxy_core "$target/release/pkgproxy" -addr "127.0.0.1:$pkgproxy_port" -cache-dir "$cache" \
    -config "$work/pkgproxy.toml" -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" \
    -log-level warn > "$work/pkgproxy.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$pkgproxy_port/" && return; sleep 0.1; done
  echo "pkgproxy did not start" >&2; exit 1
}
stop_pkgproxy() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

# A project whose build extensions are `$1` (a file of group:artifact:version).
project() {
  python3 - "$1" "$2" <<'PY'
import sys
wanted, out = sys.argv[1:3]
extensions = "".join(
    f"<extension><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></extension>"
    for g, a, v in (line.split(":") for line in open(wanted).read().split())
)
open(out, "w").write(
    '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
    "<groupId>bench</groupId><artifactId>app</artifactId><version>1</version><packaging>pom</packaging>"
    f"<build><extensions>{extensions}</extensions></build></project>"
)
PY
}

# One build of the project in `$2` through the repository `$1`, with a new
# local repository in memory. Prints the seconds; its output in $work/mvn.log.
build() {
  local place start end status
  place=$(mktemp -d -p /dev/shm pkgproxy-bench-maven.XXXXXX)
  printf '<settings><mirrors><mirror><id>bench</id><mirrorOf>*</mirrorOf><url>%s</url></mirror></mirrors></settings>' "$1" > "$place/settings.xml"
  echo '<settings/>' > "$place/global.xml"
  start=$(date +%s.%N)
  status=0
  (cd "$2" && HOME=$place $client_core mvn -B -q -s "$place/settings.xml" -gs "$place/global.xml" \
     "-Dmaven.repo.local=$place/repository" validate) > "$work/mvn.log" 2>&1 || status=$?
  end=$(date +%s.%N)
  rm -rf "$place"
  [ "$status" = 0 ] || return "$status"
  python3 -c "print(f'{$end - $start:.2f}')"
}

# The build: every candidate Maven resolves from the fake (one whose pom
# names what Debian does not ship is dropped, as Maven names it).
start_nginx 0
if [ -n "${DELAY_MS:-}" ]; then
  reached_port=$(port)
  $client_core python3 "$root/bench/delay.py" "$reached_port" "$repo_port" "$DELAY_MS" &
  pids+=($!)
  sleep 0.5
fi
direct="http://127.0.0.1:$reached_port/"
through="http://127.0.0.1:$pkgproxy_port/maven/central/"
# Maven stops at the first extension it cannot resolve: the list is found
# once (a few minutes) and kept in MAVEN_BUILD.
kept=${MAVEN_BUILD:-$HOME/.cache/pkgproxy-bench/maven/wanted.txt}
mkdir -p "$work/project" "$(dirname "$kept")"
if [ -s "$kept" ]; then cp "$kept" "$work/wanted.txt"; else cp "$work/candidates.txt" "$work/wanted.txt"; fi
for _ in $(seq 400); do
  project "$work/wanted.txt" "$work/project/pom.xml"
  if build "$direct" "$work/project" >/dev/null; then break; fi
  failing=$({ grep -o 'Plugin [^ ]* or one of its dependencies could not be resolved' "$work/mvn.log" || true; } | awk '{print $2}' | sort -u)
  [ -n "$failing" ] || { tail -40 "$work/mvn.log" >&2; exit 1; }
  grep -v -x -F -f <(echo "$failing") "$work/wanted.txt" > "$work/kept.txt" || true
  mv "$work/kept.txt" "$work/wanted.txt"
done
cp "$work/wanted.txt" "$kept"
: > "$work/repo.log"
build "$direct" "$work/project" >/dev/null
files=$(grep -c -E '^200 .*\.(pom|jar)$' "$work/repo.log" || true)
echo "the build: $(wc -l < "$work/wanted.txt") extensions, $files poms and jars fetched by Maven (and their .sha1)"

for run in $(seq "$repeat"); do
  straight=$(build "$direct" "$work/project")
  start_pkgproxy
  : > "$work/repo.log"
  cold=$(build "$through" "$work/project")
  asked=$(wc -l < "$work/repo.log")
  warm=$(build "$through" "$work/project")
  asked_warm=$(( $(wc -l < "$work/repo.log") - asked ))
  stop_pkgproxy
  echo "run $run: straight ${straight} s, through pkgproxy cold ${cold} s ($asked requests to the fake), warm ${warm} s ($asked_warm)"
done

# 50 clients of the largest jar, pkgproxy cold, the fake at 50 MB/s a
# connection.
largest=$(cd "$work/repo" && find . -name '*.jar' -printf '%s %P\n' | sort -n | tail -1 | cut -d' ' -f2)
start_nginx 50m
start_pkgproxy
: > "$work/repo.log"
url="http://127.0.0.1:$pkgproxy_port/maven/central/$largest"
start=$(date +%s.%N)
clients=()
for i in $(seq 50); do
  curl -s -o /dev/null -w '%{http_code} %{time_starttransfer} %{time_total}\n' "$url" > "$work/client-$i" &
  clients+=($!)
done
wait "${clients[@]}" || true
python3 - "$work" "$largest" "$(stat -c %s "$work/repo/$largest")" <<'PY'
import glob, sys
work, name, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [open(f).read().split() for f in glob.glob(f"{work}/client-*")]
ok = sum(1 for r in rows if r and r[0] == "200")
first = sorted(float(r[1]) for r in rows if r)
total = sorted(float(r[2]) for r in rows if r)
asked = sum(1 for line in open(f"{work}/repo.log") if line.strip().endswith("/" + name))
print(f"50 clients of {name} ({size / 2**20:.1f} MiB), pkgproxy cold: {ok}/50 ok, {asked} request(s) for it to the fake, "
      f"last client done {total[-1]:.2f} s, first byte: first {first[0]*1000:.1f} ms, "
      f"others p50 {first[len(first)//2]*1000:.1f} ms, max {first[-1]*1000:.1f} ms")
PY
stop_pkgproxy
