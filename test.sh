#!/usr/bin/env bash
# Runs pkgproxy's whole test suite on a fresh Debian or Ubuntu machine:
# installs the Debian packages the tests drive (the real apt-get, dpkg-deb,
# apt-ftparchive, gpg, xz, the go command, the snap command, mksquashfs,
# skopeo, containerd, lxc, npm, promtool, Maven, Gradle, dnf, rpmbuild, createrepo_c, zckdl and headless chromium, and moto's S3 server from
# PyPI) when they are missing, then checks formatting and
# lints, and runs every test.
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v apt-ftparchive >/dev/null || need+=(apt-utils)
command -v gpg >/dev/null || need+=(gnupg)
command -v xz >/dev/null || need+=(xz-utils)
command -v dpkg-deb >/dev/null || need+=(dpkg)
command -v gzip >/dev/null || need+=(gzip)
command -v go >/dev/null || need+=(golang-go)
command -v ip >/dev/null || need+=(iproute2)
command -v snap >/dev/null || need+=(snapd)
command -v mksquashfs >/dev/null || need+=(squashfs-tools)
command -v skopeo >/dev/null || need+=(skopeo)
command -v containerd >/dev/null || need+=(containerd)
command -v lxc >/dev/null || need+=(lxd-client)
command -v lintian >/dev/null || need+=(lintian)
command -v chromium >/dev/null || need+=(chromium fonts-dejavu-core)
command -v jq >/dev/null || need+=(jq)
command -v npm >/dev/null || need+=(npm)
command -v promtool >/dev/null || need+=(prometheus)   # promtool checks /metrics and the alert rules
command -v mvn >/dev/null || need+=(maven)             # setup maven's settings.xml, read by Maven
command -v gradle >/dev/null || need+=(gradle)          # setup gradle's init script, read by Debian's Gradle 4.4
command -v dnf >/dev/null || need+=(dnf)                # the RPM side's client, Debian's dnf 4
command -v rpmbuild >/dev/null || need+=(rpm)           # the packages of the RPM side's test repositories
command -v createrepo_c >/dev/null || need+=(createrepo-c)   # their metadata, zchunk's too
command -v zckdl >/dev/null || need+=(zchunk)           # zchunk's delta downloads (Debian's dnf is built without)
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)   # Debian's own pip, beside a current one
if [ ${#need[@]} -gt 0 ]; then
  echo "test.sh: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The cluster's tests run a real S3 server: moto's, from PyPI, in a
# virtual environment of the tests' own.
moto=target/test-tools/moto
if [ ! -x "$moto/bin/moto_server" ]; then
  echo "test.sh: installing moto's S3 server into $moto" >&2
  python3 -m venv "$moto"
  "$moto/bin/pip" install -q 'moto[server]==5.*'
fi

# The PyPI side's tests drive a current pip and uv, from PyPI, in a
# virtual environment of the tests' own (Debian's pip 23.0 never asks for
# core metadata; the system's is tested too).
python=target/test-tools/python
if [ ! -x "$python/bin/uv" ]; then
  echo "test.sh: installing pip and uv into $python" >&2
  python3 -m venv "$python"
  "$python/bin/pip" install -q --upgrade pip uv
fi

# The npm side's tests drive pnpm, yarn 1 and yarn 4 (Debian has none of
# them current), installed from the npm registry with the machine's npm into
# a folder of the tests' own; their install scripts are not run, the tests
# start each client's script with node.
node=target/test-tools/node
if [ ! -f "$node/node_modules/pnpm/package.json" ] || [ ! -f "$node/node_modules/yarn/bin/yarn.js" ] \
  || [ ! -f "$node/node_modules/@yarnpkg/cli-dist/bin/yarn.js" ]; then
  echo "test.sh: installing pnpm, yarn 1 and yarn 4 into $node" >&2
  mkdir -p "$node"
  npm install --prefix "$node" --no-audit --no-fund --ignore-scripts --no-save --update-notifier=false \
    --userconfig /dev/null pnpm yarn@1 @yarnpkg/cli-dist@4 >/dev/null
fi

# A CI machine builds once: incremental files and full debug information
# would be half of target/ (over 25 GB) and gain nothing there; line
# tables keep the backtraces' file names and lines.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
  export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"
fi

cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked --workspace
# A side is a folder: the test tree's toy side, built in with the `toy`
# feature, serves a file through a server and a command line that name no
# side of their own.
cargo test --locked -p pkgproxy-server --features toy --test toy_side
cargo check --locked -p pkgproxy-cli --features pkgproxy-sides/toy
# The docs' links resolve.
RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links" cargo doc --locked --no-deps --workspace --document-private-items
# The tests that need network namespaces (auto_offline) are ignored by
# default: they need root, and a kernel that lets this machine make them.
# Where it can, run them too; where it cannot, say so.
# containerd runs as root only: its test is ignored by default.
if [ "$(id -u)" -eq 0 ]; then
  cargo test --locked -p pkgproxy-cli --test it -- --ignored registry_client::containerd
else
  echo "test.sh: NOT RUN: the containerd test (it needs root)" >&2
fi
# pkgproxyctl setup on the real root (an /etc of its own in a mount
# namespace, a recording systemctl): root only.
if [ "$(id -u)" -eq 0 ] && unshare --mount true 2>/dev/null; then
  cargo test --locked -p pkgproxy-cli --test it -- --ignored setup_system::
else
  echo "test.sh: NOT RUN: the setup_system test (it needs root and mount namespaces)" >&2
fi
probe=pkgproxy-test-probe-$$
if [ "$(id -u)" -eq 0 ] && ip netns add "$probe" 2>/dev/null; then
  ip netns delete "$probe"
  cargo test --locked -p pkgproxy-cli --test it -- --ignored auto_offline::
else
  echo "test.sh: NOT RUN: the auto_offline tests (they need root and network namespaces)" >&2
fi

# The Debian package builds, and lintian finds no error in it.
command -v cargo-deb >/dev/null || cargo install --locked cargo-deb
dist/deb/check.sh
