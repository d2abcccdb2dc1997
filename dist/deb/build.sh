#!/usr/bin/env bash
# Builds pkgproxy's Debian package: the release binaries, their manual
# pages and shell completions (generated from the flags), then `cargo deb`
# (the metadata is in crates/cli/Cargo.toml). Prints the package's path.
#   dist/deb/build.sh    # needs cargo-deb: cargo install cargo-deb
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
command -v cargo-deb >/dev/null || { echo "dist/deb/build.sh: cargo-deb is missing (cargo install cargo-deb)" >&2; exit 1; }

# The commit pkgproxy_build_info and `info` name, when this is a checkout.
PKGPROXY_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
export PKGPROXY_COMMIT
cargo build --release --locked --bin pkgproxy --bin pkgproxyctl
out=target/dist
rm -rf "$out"
mkdir -p "$out"
ctl=target/release/pkgproxyctl
"$ctl" manpage pkgproxy | gzip -9n >"$out/pkgproxy.8.gz"
"$ctl" manpage pkgproxyctl | gzip -9n >"$out/pkgproxyctl.1.gz"
"$ctl" completions bash >"$out/pkgproxyctl"
"$ctl" completions zsh >"$out/_pkgproxyctl"
"$ctl" completions fish >"$out/pkgproxyctl.fish"
# The unit the package enables and starts (the socket is installed beside
# it, not enabled).
mkdir -p "$out/units"
cp dist/systemd/pkgproxy.service "$out/units/"
# /etc/pkgproxy/pkgproxy.toml: every key, commented out (the defaults).
{
  echo "# pkgproxy's configuration: every key, with its default or a typical value,"
  echo "# commented out: uncomment a key with its [section] header. Read at start"
  echo "# and on systemctl reload pkgproxy; see pkgproxy(8)."
  echo
  sed -e 's/^\([^#]\)/# \1/' crates/server/src/config/example.toml
} >"$out/pkgproxy.toml"
cargo deb --locked --no-build -p pkgproxy-cli 2>&1 | tail -n 1
