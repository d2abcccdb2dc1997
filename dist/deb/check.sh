#!/usr/bin/env bash
# Builds the Debian package and checks it: lintian finds no error, and it
# holds both binaries, the systemd units, the manual pages, the shell
# completions, the README and the example configuration.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
deb=$("$root/dist/deb/build.sh" | tail -n 1)
lintian --fail-on error "$deb"
listed=$(dpkg-deb -c "$deb" | awk '{ print $6 }')
for path in usr/bin/pkgproxy usr/bin/pkgproxyctl \
    lib/systemd/system/pkgproxy.service lib/systemd/system/pkgproxy.socket \
    usr/share/man/man8/pkgproxy.8.gz usr/share/man/man1/pkgproxyctl.1.gz \
    usr/share/bash-completion/completions/pkgproxyctl usr/share/zsh/vendor-completions/_pkgproxyctl \
    usr/share/fish/vendor_completions.d/pkgproxyctl.fish \
    usr/share/doc/pkgproxy/README.md usr/share/doc/pkgproxy/examples/pkgproxy.toml; do
    grep -qx "./$path" <<<"$listed" || { echo "dist/deb/check.sh: $deb lacks $path" >&2; exit 1; }
done
echo "dist/deb/check.sh: $deb is complete and lintian finds no error"
