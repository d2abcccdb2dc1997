#!/usr/bin/env bash
# Runs pkgproxy's whole test suite on a fresh Debian or Ubuntu machine:
# installs the Debian packages the tests drive (the real apt-get, dpkg-deb,
# apt-ftparchive, gpg, xz, the go command) when they are missing, then checks
# formatting and lints, and runs every test.
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v apt-ftparchive >/dev/null || need+=(apt-utils)
command -v gpg >/dev/null || need+=(gnupg)
command -v xz >/dev/null || need+=(xz-utils)
command -v dpkg-deb >/dev/null || need+=(dpkg)
command -v gzip >/dev/null || need+=(gzip)
command -v go >/dev/null || need+=(golang-go)
if [ ${#need[@]} -gt 0 ]; then
  echo "test.sh: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked --workspace
# The tests that need root (auto_offline: network namespaces) are ignored by
# default; as root, run them too.
if [ "$(id -u)" -eq 0 ]; then
  cargo test --locked -p pkgproxy-cli --test it -- --ignored auto_offline::
fi
