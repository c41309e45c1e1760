#!/usr/bin/env bash
# Build (once per machine) the Debian root that tests/fixtures/systemd_host.py boots as systemd test hosts.
#
# The root lives in $PDCTL_TEST_ROOT (default /var/cache/pdctl-test-root) and is valid only while its stamp file
# holds this script's recipe: a missing, half-built or older root is rebuilt from nothing. A lock (flock) makes a
# second caller wait for the first instead of building twice. Needs root, debootstrap and the Debian mirror apt uses.
# Prints the root's path on success. `--check` only says (exit 0/1) whether the cached root is valid.
set -euo pipefail

ROOT=${PDCTL_TEST_ROOT:-/var/cache/pdctl-test-root}
MIRROR=${PDCTL_TEST_ROOT_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# systemd + sshd for the host itself; the libraries the host's bind-mounted Python and its packages link against
PACKAGES=systemd,systemd-sysv,dbus,openssh-server,procps,iproute2,coreutils,libffi8,libssl3,libsqlite3-0,\
libreadline8,libexpat1,libgomp1,libuuid1,zlib1g,libbz2-1.0,liblzma5,libncursesw6,libstdc++6
RECIPE="pdctl-test-root v2 $SUITE minbase $PACKAGES"
STAMP="$ROOT/.pdctl-test-root-stamp"

valid() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$RECIPE" ] && [ -x "$ROOT/usr/lib/systemd/systemd" ] \
    && [ -x "$ROOT/usr/sbin/sshd" ] && [ -f "$ROOT/etc/systemd/system/multi-user.target.wants/pdctl-test-sshd.service" ]
}

if [ "${1:-}" = "--check" ]; then valid; exit; fi
[ "$(id -u)" = 0 ] || { echo "build_test_root.sh: needs root" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "build_test_root.sh: debootstrap is not installed" >&2; exit 2; }

mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock 9
if valid; then echo "$ROOT"; exit 0; fi

rm -rf "$ROOT.new" "$ROOT"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT.new" "$MIRROR" >"$ROOT.build.log" 2>&1 || {
  echo "build_test_root.sh: debootstrap failed; log tail:" >&2; tail -20 "$ROOT.build.log" >&2; exit 1; }

R="$ROOT.new"
# Each host brings its own host key and config (bind-mounted at /pdctl-test): none is shared through the root.
rm -f "$R"/etc/ssh/ssh_host_*
# No console login prompt; the distribution's sshd is replaced by the test one below.
for u in console-getty.service getty@tty1.service serial-getty@console.service ssh.service ssh.socket \
         systemd-networkd.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer; do
  ln -sf /dev/null "$R/etc/systemd/system/$u"
done
cat >"$R/etc/systemd/system/pdctl-test-sshd.service" <<'EOF'
[Unit]
Description=sshd of a pdctl systemd test host
ConditionPathExists=/pdctl-test/sshd_config

[Service]
ExecStartPre=/usr/bin/mkdir -p /run/sshd
ExecStart=/usr/sbin/sshd -D -e -f /pdctl-test/sshd_config
Restart=on-failure

[Install]
WantedBy=multi-user.target
EOF
mkdir -p "$R/etc/systemd/system/multi-user.target.wants" "$R/pdctl-test"
ln -sf ../pdctl-test-sshd.service "$R/etc/systemd/system/multi-user.target.wants/pdctl-test-sshd.service"
rm -f "$R/etc/hostname"   # the host is named by nspawn -M
: >"$R/etc/machine-id"
rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/*
echo "$RECIPE" >"$R/.pdctl-test-root-stamp"
mv "$R" "$ROOT"
echo "$ROOT"
