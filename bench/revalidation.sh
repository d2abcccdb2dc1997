#!/usr/bin/env bash
# A fleet running the same install within a minute, through a warm
# pkgproxy: how many requests reach the upstream, with every client's
# `Cache-Control: max-age=0` / `no-cache` honoured as it comes
# (`[server] revalidate_floor = "0s"`, before) and shared within the
# default floor ("10s", after). Fakes on 127.0.0.1, nginx serving files
# the script makes (its access log counts the requests and records the
# headers that came with them), for five clients:
#   pip          `pip install bench-app` (11 projects resolved from a PEP 503
#                simple index: pages and small wheels), no pip cache;
#   pip-refresh  the same with `--refresh-package :all:`: since pip 26 (pypa/pip
#                #13955) what makes pip send `max-age=0` with each page, as
#                every earlier pip did unasked;
#   npm-ci       `npm ci` of a lockfile of the same 11 packages (documents
#                and .tgz tarballs), an empty npm cache;
#   npm-install  `npm install` of the same package.json with no lockfile
#                (it resolves from the documents), an empty npm cache;
#   cargo        `cargo fetch --locked` of a project of the same 11 crates
#                (a sparse index and .crate files), an empty CARGO_HOME;
#   apt          `apt-get update` against a signed repository of 3 .debs
#                (InRelease, by-hash Packages), an empty lists folder,
#                pkgproxy as apt's proxy.
# First each client once straight to the fake: the headers it sends. Then,
# for each floor, a new pkgproxy (an empty cache) and for each client: one
# priming run (cold, counted apart), then CLIENTS runs (100), client i
# started i * SPREAD / CLIENTS s (60 s) after the first, at most AT_ONCE (6)
# at a time, each with an empty client-side cache: the requests to the fake
# during them (how many were conditional, for which files), the wall time
# from the first start to the last end, and failures.
#   bench/revalidation.sh
#   CLIENTS=20 SPREAD=12 KINDS="pip apt" bench/revalidation.sh   # a quick look
# PIP: the pip to run (default target/test-tools/python/bin/pip, which
# ./test.sh installs). Every process and file the script makes is gone when
# it ends; traffic stays on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clients=${CLIENTS:-100}
spread=${SPREAD:-60}
at_once=${AT_ONCE:-6}
kinds=${KINDS:-pip pip-refresh npm-ci npm-install cargo apt}
floors=${FLOORS:-0s 10s}
pip=${PIP:-$root/target/test-tools/python/bin/pip}
for tool in nginx npm cargo apt-get apt-ftparchive dpkg-deb gpg gpgconf xz curl; do
  command -v "$tool" >/dev/null || { echo "bench/revalidation.sh: needs $tool" >&2; exit 1; }
done
[ -x "$pip" ] || { echo "bench/revalidation.sh: no pip at $pip (run ./test.sh once, or set PIP)" >&2; exit 1; }

cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin pkgproxy
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
pids=()
work="" shm=""
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ -f "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; fi
  if [ -d "$work/gnupg" ]; then GNUPGHOME=$work/gnupg gpgconf --kill gpg-agent 2>/dev/null || true; fi
  rm -rf "$work" "$shm"
}
trap cleanup EXIT
# A short path: gpg-agent's socket lives in $work/gnupg.
work=$(mktemp -d)
chmod 755 "$work"
# The clients' homes, caches and targets, in memory.
shm=$(mktemp -d -p /dev/shm pkgproxy-bench-reval.XXXXXX)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pypi_port=$(port) npm_port=$(port) cargo_port=$(port) apt_port=$(port) pkgproxy_port=$(port)
fake=$work/fake

# The fakes' files: 11 projects, packages and crates of one dependency
# graph (bench-app needs all of them), each version 1.0.0.
python3 - "$fake" "$work" "$cargo_port" <<'PY'
import base64, hashlib, io, json, os, sys, tarfile, zipfile
fake, work, cargo_port = sys.argv[1], sys.argv[2], sys.argv[3]
graph = {
    "bench-app": ["bench-web", "bench-data"],
    "bench-web": ["bench-http", "bench-templates"],
    "bench-data": ["bench-numbers", "bench-tables"],
    "bench-http": ["bench-urls", "bench-certs"],
    "bench-tables": ["bench-numbers", "bench-dates"],
    "bench-templates": ["bench-markup"],
    "bench-urls": [], "bench-certs": [], "bench-numbers": [], "bench-dates": [], "bench-markup": [],
}
version = "1.0.0"
def filler(name, size):
    """Lines that do not compress away, so a file is about `size` bytes."""
    lines, n = [], 0
    while sum(map(len, lines)) < size:
        lines.append(f"# {hashlib.sha256(f'{name} {n}'.encode()).hexdigest()}\n")
        n += 1
    return "".join(lines)
def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(data if isinstance(data, bytes) else data.encode())
def targz(members):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, text in members:
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()

# PyPI: a PEP 503 page per project linking its wheel by SHA-256.
for name, deps in graph.items():
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'"""{name}, of pkgproxy\'s bench."""\n' + filler(name, 8000),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {dep}>=1.0\n" for dep in deps),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: pkgproxy-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
        f"{len(text.encode())}\n" for path, text in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record
    wheel = io.BytesIO()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in files.items():
            archive.writestr(zipfile.ZipInfo(path, (2024, 1, 1, 0, 0, 0)), text)
    filename = f"{module}-{version}-py3-none-any.whl"
    write(f"{fake}/pypi/files/{filename}", wheel.getvalue())
    sha = hashlib.sha256(wheel.getvalue()).hexdigest()
    write(f"{fake}/pypi/simple/{name}/index.html",
          f'<!DOCTYPE html><html><body>\n<a href="../../files/{filename}#sha256={sha}">{filename}</a>\n</body></html>\n')

# npm: each package's document (its tarball at the npm registry's own
# address, as the registry writes it: npm moves it onto the registry it is
# pointed at), one version's document, the tarball; a project with and
# without its lockfile.
lock = {"name": "bench", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
        "packages": {"": {"name": "bench", "version": "1.0.0", "dependencies": {"bench-app": "^1.0.0"}}}}
for name, deps in graph.items():
    dependencies = {dep: "^1.0.0" for dep in deps}
    manifest = {"name": name, "version": version, "main": "index.js", "license": "MIT", "dependencies": dependencies}
    tgz = targz([("package/package.json", json.dumps(manifest, indent=2)),
                 ("package/index.js", f"module.exports = {json.dumps(name)};\n" + filler(name, 8000).replace("#", "//"))])
    write(f"{fake}/npm/files/{name}/-/{name}-{version}.tgz", tgz)
    dist = {"tarball": f"https://registry.npmjs.org/{name}/-/{name}-{version}.tgz",
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode(),
            "shasum": hashlib.sha1(tgz).hexdigest()}
    one = {**manifest, "_id": f"{name}@{version}", "dist": dist}
    document = {"_id": name, "name": name, "dist-tags": {"latest": version}, "versions": {version: one},
                "time": {"created": "2026-01-01T00:00:00.000Z", "modified": "2026-01-01T00:00:00.000Z",
                         version: "2026-01-01T00:00:00.000Z"}}
    write(f"{fake}/npm/documents/{name}/index.json", json.dumps(document))
    write(f"{fake}/npm/documents/{name}/{version}", json.dumps(one))
    lock["packages"][f"node_modules/{name}"] = {
        "version": version, "resolved": dist["tarball"], "integrity": dist["integrity"], "license": "MIT",
        **({"dependencies": dependencies} if dependencies else {})}
package = {"name": "bench", "version": "1.0.0", "private": True, "dependencies": {"bench-app": "^1.0.0"}}
write(f"{work}/npm-ci/package.json", json.dumps(package, indent=2))
write(f"{work}/npm-ci/package-lock.json", json.dumps(lock, indent=2))
write(f"{work}/npm-install/package.json", json.dumps(package, indent=2))

# cargo: a sparse index (config.json, a file per crate) and .crate files;
# a project depending on bench-app (its Cargo.lock is made below).
def index_path(name):
    return {1: f"1/{name}", 2: f"2/{name}", 3: f"3/{name[0]}/{name}"}.get(len(name), f"{name[:2]}/{name[2:4]}/{name}")
for name, deps in graph.items():
    toml = f'[package]\nname = "{name}"\nversion = "{version}"\nedition = "2021"\n\n[dependencies]\n'
    toml += "".join(f'{dep} = "1.0"\n' for dep in deps)
    crate = targz([(f"{name}-{version}/Cargo.toml", toml),
                   (f"{name}-{version}/src/lib.rs", f"pub const NAME: &str = {json.dumps(name)};\n"
                    + filler(name, 8000).replace("#", "//"))])
    write(f"{fake}/cargo/crates/{name}/{name}-{version}.crate", crate)
    line = {"name": name, "vers": version, "cksum": hashlib.sha256(crate).hexdigest(), "features": {}, "yanked": False,
            "deps": [{"name": dep, "req": "^1.0", "features": [], "optional": False, "default_features": True,
                      "target": None, "kind": "normal"} for dep in deps]}
    write(f"{fake}/cargo/index/{index_path(name)}", json.dumps(line) + "\n")
write(f"{fake}/cargo/index/config.json",
      json.dumps({"dl": f"http://127.0.0.1:{cargo_port}/crates/{{crate}}/{{crate}}-{{version}}.crate"}))
write(f"{work}/cargo/Cargo.toml",
      '[package]\nname = "bench-project"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nbench-app = "1.0"\n')
write(f"{work}/cargo/src/lib.rs", "")
PY

# apt: three tiny .debs, Packages (plain, .gz, .xz) for binary-amd64 and
# binary-all with by-hash copies, a Release saying Acquire-By-Hash, signed
# into InRelease and Release.gpg with a throwaway key.
repo=$fake/apt/debian
mkdir -p "$repo/pool/main" "$work/debs" "$work/gnupg"
chmod 700 "$work/gnupg"
for name in bench-hello bench-tools bench-docs; do
  mkdir -p "$work/debs/$name/DEBIAN" "$work/debs/$name/usr/share/$name"
  chmod 755 "$work/debs/$name/DEBIAN"
  printf 'Package: %s\nVersion: 1.0-1\nArchitecture: all\nMaintainer: pkgproxy bench <b@example.invalid>\nInstalled-Size: 8\nDescription: %s, of pkgproxy'"'"'s bench\n' \
    "$name" "$name" > "$work/debs/$name/DEBIAN/control"
  head -c 4096 /dev/urandom > "$work/debs/$name/usr/share/$name/payload"
  dpkg-deb -Znone --root-owner-group --build "$work/debs/$name" "$repo/pool/main/${name}_1.0-1_all.deb" >/dev/null
done
(
  cd "$repo"
  apt-ftparchive packages pool/main > "$work/Packages" 2>/dev/null
  for arch in amd64 all; do
    dir=dists/testing/main/binary-$arch
    mkdir -p "$dir/by-hash/SHA256" "$dir/by-hash/SHA512"
    cp "$work/Packages" "$dir/Packages"
    gzip -9 -n -c "$dir/Packages" > "$dir/Packages.gz"
    xz -c "$dir/Packages" > "$dir/Packages.xz"
    for file in Packages Packages.gz Packages.xz; do
      cp "$dir/$file" "$dir/by-hash/SHA256/$(sha256sum "$dir/$file" | cut -d' ' -f1)"
      cp "$dir/$file" "$dir/by-hash/SHA512/$(sha512sum "$dir/$file" | cut -d' ' -f1)"
    done
  done
  release=()
  for field in Origin=pkgproxy-bench Label=pkgproxy-bench Suite=testing Codename=testing \
    "Architectures=amd64 all" Components=main Acquire-By-Hash=yes; do
    release+=(-o "APT::FTPArchive::Release::$field")
  done
  apt-ftparchive "${release[@]}" release dists/testing > "$work/Release"
  mv "$work/Release" dists/testing/Release
)
gpg_() { GNUPGHOME=$work/gnupg gpg --batch --yes --quiet "$@"; }
gpg_ --passphrase '' --quick-gen-key 'pkgproxy bench <b@example.invalid>' ed25519 sign never 2>/dev/null
gpg_ --export > "$work/keyring.gpg"
gpg_ --clearsign --output "$repo/dists/testing/InRelease" "$repo/dists/testing/Release"
gpg_ --armor --detach-sign --output "$repo/dists/testing/Release.gpg" "$repo/dists/testing/Release"
GNUPGHOME=$work/gnupg gpgconf --kill gpg-agent
chmod -R a+rX "$fake"

# The fakes: one nginx, a port each, one access log recording the headers
# that ask for a fresh copy or revalidate (Last-Modified and ETag on
# every file, so pkgproxy's revalidations can be conditional).
cat > "$work/nginx.conf" <<NGINX
daemon on; pid $work/nginx.pid; error_log $work/nginx-error.log; worker_processes 1;
events { worker_connections 1024; }
http {
  log_format asked '\$server_port\t\$status\t\$request_method\t\$request_uri\t\$http_cache_control\t\$http_pragma\t\$http_if_none_match\t\$http_if_modified_since';
  access_log $work/fake.log asked;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work;
  types { text/html html; application/json json; }
  default_type application/octet-stream;
  server { listen 127.0.0.1:$pypi_port; root $fake/pypi; }
  server {
    listen 127.0.0.1:$npm_port;
    location ~ /-/ { root $fake/npm/files; }
    location / { root $fake/npm/documents; default_type application/json; try_files \$uri \$uri/index.json =404; }
  }
  server { listen 127.0.0.1:$cargo_port; root $fake/cargo; }
  server { listen 127.0.0.1:$apt_port; root $fake/apt; }
}
NGINX
: > "$work/fake.log"
nginx -c "$work/nginx.conf"

npm_clean() { env -u npm_config_registry -u NPM_CONFIG_REGISTRY npm --userconfig /dev/null "$@"; }

# One run of client `$1` in the new folder `$2`, through pkgproxy, or
# straight to the fake when `$3` is "straight". Its output goes to stdout.
run_client() {
  local kind=$1 place=$2 mode=${3:-through}
  mkdir -p "$place/tmp"
  case $kind in
    pip | pip-refresh)
      local index="http://127.0.0.1:$pkgproxy_port/pypi/simple/" refresh=()
      [ "$mode" = straight ] && index="http://127.0.0.1:$pypi_port/simple/"
      [ "$kind" = pip-refresh ] && refresh=(--refresh-package :all:)
      TMPDIR=$place/tmp PIP_CONFIG_FILE=/dev/null "$pip" install -q --no-input --disable-pip-version-check \
        --no-compile --no-cache-dir --index-url "$index" --target "$place/target" ${refresh[@]+"${refresh[@]}"} bench-app ;;
    npm-ci | npm-install)
      local registry="http://127.0.0.1:$pkgproxy_port/npm/" command=ci
      [ "$mode" = straight ] && registry="http://127.0.0.1:$npm_port/"
      [ "$kind" = npm-install ] && command=install
      cp "$work/$kind"/package*.json "$place/"
      (cd "$place" && TMPDIR=$place/tmp npm_clean "$command" --registry "$registry" --cache "$place/cache" \
        --no-audit --no-fund --ignore-scripts --update-notifier=false --loglevel=error) ;;
    cargo)
      local index="http://127.0.0.1:$pkgproxy_port/cargo/index/"
      [ "$mode" = straight ] && index="http://127.0.0.1:$cargo_port/index/"
      mkdir -p "$place/home"
      cp -r "$work/cargo" "$place/project"
      printf '[source.crates-io]\nreplace-with = "bench"\n[source.bench]\nregistry = "sparse+%s"\n[net]\nretry = 0\n' \
        "$index" > "$place/home/config.toml"
      CARGO_HOME=$place/home cargo fetch --locked --manifest-path "$place/project/Cargo.toml" -q ;;
    apt)
      # The sandbox of crates/testkit/src/aptclient.rs: nothing of the
      # system's apt read or written. Straight, the fake is apt's proxy
      # (nginx serves a proxy's absolute-form requests): the requests
      # apt sends pkgproxy.
      local proxy="http://127.0.0.1:$pkgproxy_port/"
      [ "$mode" = straight ] && proxy="http://127.0.0.1:$apt_port/"
      mkdir -p "$place"/etc/apt/{apt.conf.d,sources.list.d,preferences.d,trusted.gpg.d} \
        "$place"/var/lib/apt/lists/partial "$place"/var/cache/apt/archives/partial "$place"/var/lib/dpkg "$place"/var/log/apt
      : > "$place/var/lib/dpkg/status"
      echo "deb [signed-by=$work/keyring.gpg] http://127.0.0.1:$apt_port/debian testing main" > "$place/etc/apt/sources.list"
      cat > "$place/apt.conf" <<APT
Dir "$place/";
Dir::State::status "$place/var/lib/dpkg/status";
Dir::Etc::Parts "$place/etc/apt/apt.conf.d";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
APT::Sandbox::User "root";
Acquire::Languages "none";
APT::Update::Error-Mode "any";
Acquire::http::Proxy "$proxy";
Acquire::https::Proxy "DIRECT";
APT
      env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY -u no_proxy -u NO_PROXY -u all_proxy -u ALL_PROXY \
        APT_CONFIG="$place/apt.conf" LC_ALL=C DEBIAN_FRONTEND=noninteractive apt-get -q update ;;
  esac
}

# One run of `$1`, its output kept in `$2`.log, its folder removed: exits
# as the client did.
one() {
  local place
  place=$(mktemp -d -p "$shm" "$1.XXXXXX")
  local status=0
  run_client "$1" "$place" "${3:-through}" > "$2.log" 2>&1 || status=$?
  rm -rf "$place"
  return "$status"
}

# The requests the fake was asked since the last call, moved into `$1`.
take_log() { cp "$work/fake.log" "$1"; : > "$work/fake.log"; }

# CLIENTS runs of `$1`, client i started i * SPREAD / CLIENTS s after the
# first, at most AT_ONCE at a time (a client is started late when AT_ONCE
# are running), into the folder `$2`: each client's `STATUS START END` (ms).
fleet() (
  local kind=$1 out=$2 start i due now
  mkdir -p "$out"
  start=$(date +%s%3N)
  for ((i = 0; i < clients; i++)); do
    due=$((start + i * spread * 1000 / clients))
    now=$(date +%s%3N)
    if ((due > now)); then sleep "$(printf '%d.%03d' $(((due - now) / 1000)) $(((due - now) % 1000)))"; fi
    while (($(jobs -rp | wc -l) >= at_once)); do wait -n || true; done
    (
      began=$(date +%s%3N)
      status=0
      one "$kind" "$out/client-$i" || status=$?
      echo "$status $began $(date +%s%3N)" > "$out/client-$i.result"
    ) &
  done
  wait
  echo "$start" > "$out/start"
)

start_pkgproxy() {
  local cache
  cache=$(mktemp -d -p "$work" pkgproxy-cache.XXXXXX)
  cat > "$work/pkgproxy.toml" <<TOML
[server]
revalidate_floor = "$1"

[pypi]
mirrors = ["http://127.0.0.1:$pypi_port/simple"]

[npm]
mirrors = ["http://127.0.0.1:$npm_port"]

[cargo]
index = ["http://127.0.0.1:$cargo_port/index"]

[[apt.archive]]
name = "local"
mirrors = ["http://127.0.0.1:$apt_port/debian"]

[upstream]
trust = ["http://127.0.0.1:$pypi_port"]
TOML
  "$target/release/pkgproxy" -addr "127.0.0.1:$pkgproxy_port" -cache-dir "$cache" \
    -config "$work/pkgproxy.toml" -stats-socket-path "$work/stats.sock" -admin-socket-path "$work/admin.sock" \
    -log-level warn >> "$work/pkgproxy.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$pkgproxy_port/" && return; sleep 0.1; done
  echo "pkgproxy did not start" >&2; cat "$work/pkgproxy.log" >&2; exit 1
}
stop_pkgproxy() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

# The lockfile of the cargo project, resolved straight from the fake.
home=$(mktemp -d -p "$shm" cargo-lock.XXXXXX)
printf '[source.crates-io]\nreplace-with = "bench"\n[source.bench]\nregistry = "sparse+http://127.0.0.1:%s/index/"\n' \
  "$cargo_port" > "$home/config.toml"
CARGO_HOME=$home cargo generate-lockfile -q --manifest-path "$work/cargo/Cargo.toml"
rm -rf "$home"
: > "$work/fake.log"

# Straight to the fake, once each: what each client sends.
results=$work/results
mkdir -p "$results"
for kind in $kinds; do
  one "$kind" "$results/$kind-straight" straight || { cat "$results/$kind-straight.log" >&2; exit 1; }
  take_log "$results/$kind-straight.asked"
done

echo "$clients clients of each over ${spread} s, at most $at_once at once; floors: $floors"
for floor in $floors; do
  start_pkgproxy "$floor"
  for kind in $kinds; do
    : > "$work/fake.log"
    one "$kind" "$results/$kind-$floor-prime" || { cat "$results/$kind-$floor-prime.log" >&2; exit 1; }
    take_log "$results/$kind-$floor-prime.asked"
    fleet "$kind" "$results/$kind-$floor"
    take_log "$results/$kind-$floor.asked"
    echo "$kind, floor $floor: done ($(wc -l < "$results/$kind-$floor.asked") requests to the fake)"
  done
  stop_pkgproxy
done

python3 - "$results" "$kinds" "$floors" "$clients" <<'PY'
import collections, glob, os, statistics, sys
results, kinds, floors, clients = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
names = {"pip": "pip install", "pip-refresh": "pip install --refresh-package :all:", "npm-ci": "npm ci", "npm-install": "npm install", "cargo": "cargo fetch",
         "apt": "apt-get update"}

def what(path):
    """The kind of file a path of the fakes is."""
    path = path.split("?")[0]
    if "/simple/" in path: return "pages"
    if path.startswith("/files/"): return "wheels"
    if path.endswith(".tgz"): return "tarballs"
    if path.startswith("/index/config.json"): return "config.json"
    if path.startswith("/index/"): return "index files"
    if path.endswith(".crate"): return "crates"
    if path.endswith("/InRelease"): return "InRelease"
    if "/by-hash/" in path: return "by-hash"
    if "/dists/" in path: return "dists (by name)"
    if path.endswith(".deb"): return ".debs"
    if path.count("/") == 2: return "version documents"
    return "documents"

def asked(file):
    rows = []
    for line in open(file):
        port, status, method, uri, cache_control, pragma, inm, ims = line.rstrip("\n").split("\t")
        if "://" in uri:  # a proxy's absolute form (apt straight to the fake)
            uri = "/" + uri.split("://", 1)[1].split("/", 1)[1]
        rows.append({"status": status, "method": method, "what": what(uri), "cache_control": cache_control,
                     "pragma": pragma, "conditional": inm != "-" or ims != "-"})
    return rows

print()
print("What each client sends, straight to the fake (requests with Cache-Control / Pragma, by kind of file):")
for kind in kinds:
    by = collections.defaultdict(list)
    for row in asked(f"{results}/{kind}-straight.asked"):
        by[row["what"]].append(row)
    parts = []
    for what_, rows in by.items():
        headers = collections.Counter(
            ", ".join(h for h in (f"Cache-Control: {r['cache_control']}" if r["cache_control"] != "-" else "",
                                  f"Pragma: {r['pragma']}" if r["pragma"] != "-" else "") if h) or "none"
            for r in rows)
        parts.append(f"{what_} {len(rows)} ({'; '.join(f'{h} x{n}' for h, n in headers.items())})")
    print(f"  {names[kind]}: " + ", ".join(parts))

def summary(rows):
    by = collections.Counter(r["what"] for r in rows)
    conditional = collections.Counter(r["what"] for r in rows if r["conditional"])
    return ", ".join(f"{w} {n}" + (f" ({conditional[w]} cond.)" if conditional[w] else "") for w, n in by.most_common())

print()
header = ("client", "floor", "prime: requests", f"{clients} clients: requests", "conditional", "304",
          "of which files", "wall", "client p50", "failed")
table = [header]
for kind in kinds:
    for floor in floors:
        prime = asked(f"{results}/{kind}-{floor}-prime.asked")
        rows = asked(f"{results}/{kind}-{floor}.asked")
        done = [open(f).read().split() for f in glob.glob(f"{results}/{kind}-{floor}/client-*.result")]
        start = int(open(f"{results}/{kind}-{floor}/start").read())
        failed = sum(1 for d in done if d[0] != "0") + (clients - len(done))
        wall = (max(int(d[2]) for d in done) - start) / 1000
        p50 = statistics.median((int(d[2]) - int(d[1])) / 1000 for d in done)
        table.append((names[kind], floor, str(len(prime)), str(len(rows)), str(sum(r["conditional"] for r in rows)),
                      str(sum(r["status"] == "304" for r in rows)), summary(rows) or "-", f"{wall:.1f} s",
                      f"{p50:.2f} s", str(failed)))
print("| " + " | ".join(table[0]) + " |")
print("|" + "|".join("---" if i in (0, 1, 6) else "---:" for i in range(len(header))) + "|")
for row in table[1:]:
    print("| " + " | ".join(row) + " |")
failures = [f for f in glob.glob(f"{results}/*/client-*.result") if open(f).read().split()[0] != "0"]
for f in failures[:3]:
    print(f"\n{f[:-len('.result')]}.log:\n" + open(f[:-len(".result")] + ".log").read()[-2000:])
PY
