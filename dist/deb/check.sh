#!/usr/bin/env bash
# Builds the Debian package and checks it: lintian finds no error; it holds
# both binaries, the service, the manual pages, the shell completions, the
# documentation and its configuration files (conffiles); it depends on the
# certificate authorities upstream TLS trusts; and its maintainer scripts
# enable and start the service on install, restart it after an upgrade,
# stop it on remove and remove its data on purge. They run against stand-in
# systemd tools in a mount namespace of their own (root); where systemd
# runs and PKGPROXY_TEST_INSTALL=1 says so, the package is also installed,
# upgraded and removed for real.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
deb=$("$root/dist/deb/build.sh" | tail -n 1)
lintian --fail-on error "$deb"
fail() { echo "dist/deb/check.sh: $deb: $*" >&2; exit 1; }

listed=$(dpkg-deb -c "$deb" | awk '{ print $6 }')
for path in usr/bin/pkgproxy usr/bin/pkgproxyctl usr/lib/systemd/system/pkgproxy.service \
    etc/default/pkgproxy etc/pkgproxy/pkgproxy.toml etc/logrotate.d/pkgproxy \
    usr/share/man/man8/pkgproxy.8.gz usr/share/man/man1/pkgproxyctl.1.gz \
    usr/share/bash-completion/completions/pkgproxyctl usr/share/zsh/vendor-completions/_pkgproxyctl \
    usr/share/fish/vendor_completions.d/pkgproxyctl.fish \
    usr/share/doc/pkgproxy/README.md usr/share/doc/pkgproxy/README.Debian \
    usr/share/doc/pkgproxy/examples/pkgproxy.toml usr/share/doc/pkgproxy/examples/pkgproxy.socket \
    usr/share/doc/pkgproxy/examples/pkgproxy-alerts.yml usr/share/doc/pkgproxy/examples/grafana-pkgproxy.json; do
    grep -qx "./$path" <<<"$listed" || fail "lacks $path"
done

control=$(mktemp -d)
trap 'rm -rf "$control"' EXIT
dpkg-deb -e "$deb" "$control/DEBIAN"
for conffile in /etc/default/pkgproxy /etc/pkgproxy/pkgproxy.toml /etc/logrotate.d/pkgproxy; do
    grep -qx "$conffile" "$control/DEBIAN/conffiles" || fail "$conffile is not a conffile"
done
grep -q '^Depends:.*ca-certificates' "$control/DEBIAN/control" || fail "does not depend on ca-certificates"
# The configuration shipped is every key, commented out: the defaults.
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./etc/pkgproxy/pkgproxy.toml >"$control/pkgproxy.toml"
grep -q '^# \[cluster\]' "$control/pkgproxy.toml" || fail "pkgproxy.toml does not carry every key"
if grep -q '^[^#]' "$control/pkgproxy.toml"; then fail "pkgproxy.toml sets something"; fi

# The maintainer scripts, against stand-ins for systemd's tools that record
# what they are asked, with /run/systemd/system and /var of their own.
if [ "$(id -u)" -eq 0 ] && unshare --mount true 2>/dev/null; then
    mkdir -p "$control/bin"
    for tool in deb-systemd-helper deb-systemd-invoke systemctl; do
        printf '#!/bin/sh\necho "%s $*" >> "%s/asked"\n' "$tool" "$control" >"$control/bin/$tool"
        chmod 755 "$control/bin/$tool"
    done
    PATH="$control/bin:$PATH" DEBIAN="$control/DEBIAN" LOG="$control/asked" unshare --mount --propagation private sh -ec '
        mount -t tmpfs tmpfs /run
        mkdir -p /run/systemd/system
        mount -t tmpfs tmpfs /var
        step() { echo "== $*" >> "$LOG"; }
        step install; "$DEBIAN/postinst" configure
        step upgrade; "$DEBIAN/prerm" upgrade 0.1.0-1; "$DEBIAN/postinst" configure 0.1.0-1
        step remove; "$DEBIAN/prerm" remove; "$DEBIAN/postrm" remove
        mkdir -p /var/cache/private/pkgproxy /var/lib/private/pkgproxy /var/log/pkgproxy
        step purge; "$DEBIAN/postrm" purge
        for dir in /var/cache/private/pkgproxy /var/lib/private/pkgproxy /var/log/pkgproxy; do
            if [ -e "$dir" ]; then echo "left $dir" >> "$LOG"; fi
        done
    '
    asked() { awk -v step="== $1" '$0 == step { on = 1; next } /^== / { on = 0 } on' "$control/asked"; }
    asked install | grep -qx 'deb-systemd-helper enable pkgproxy.service' || fail "install does not enable the service"
    asked install | grep -qx 'deb-systemd-invoke start pkgproxy.service' || fail "install does not start the service"
    asked upgrade | grep -qx 'deb-systemd-invoke restart pkgproxy.service' || fail "an upgrade does not restart it"
    if asked upgrade | grep -q 'stop'; then fail "an upgrade stops the service before it is unpacked"; fi
    asked remove | grep -qx 'deb-systemd-invoke stop pkgproxy.service' || fail "remove does not stop the service"
    if grep -q '^left ' "$control/asked"; then fail "purge leaves $(grep '^left ' "$control/asked")"; fi
else
    echo "dist/deb/check.sh: NOT RUN: the maintainer scripts (they need root and mount namespaces)" >&2
fi

# Installed, upgraded (the same package again) and removed, for real.
if [ "${PKGPROXY_TEST_INSTALL:-}" = 1 ] && [ -d /run/systemd/system ] && [ "$(id -u)" -eq 0 ]; then
    dpkg -i "$deb" && systemctl is-active --quiet pkgproxy || fail "the service does not run after install"
    started=$(systemctl show -p ExecMainStartTimestampMonotonic --value pkgproxy)
    dpkg -i "$deb" && systemctl is-active --quiet pkgproxy || fail "the service does not run after an upgrade"
    [ "$(systemctl show -p ExecMainStartTimestampMonotonic --value pkgproxy)" != "$started" ] || fail "not restarted"
    dpkg -r pkgproxy && ! systemctl is-active --quiet pkgproxy || fail "the service runs after remove"
    dpkg -P pkgproxy
else
    echo "dist/deb/check.sh: NOT RUN: a real install (it needs systemd running, root and PKGPROXY_TEST_INSTALL=1)" >&2
fi
echo "dist/deb/check.sh: $deb is complete, its scripts do what they should, and lintian finds no error"
