#!/usr/bin/env bash
# Install everything pdctl, the bundled engine and the tests need, on a fresh machine. Idempotent.
# torch goes first and pinned: anything that pulled a bare "torch" would fetch a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ] || ! command -v systemd-analyze >/dev/null 2>&1 \
   || ! command -v ip >/dev/null 2>&1 || ! command -v tmux >/dev/null 2>&1 \
   || ! command -v systemd-nspawn >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1 \
   || ! ldconfig -p 2>/dev/null | grep 'libibverbs\.so\.1' >/dev/null; then  # no -q: under pipefail an early exit SIGPIPEs ldconfig
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # tmux: the screen test drives pdctl in a real 80x24 terminal
    # systemd-container + debootstrap: the systemd test hosts (tests/fixtures/systemd_host.py)
    # libibverbs1: the Mooncake transfer engine's wheel links it even where no RDMA device exists (it then moves
    # the KV over TCP)
    apt-get install -y -qq openssh-server openssh-client systemd iproute2 tmux systemd-container debootstrap \
        libibverbs1 >/dev/null
  else
    echo "install.sh: not root: install openssh-server, systemd, iproute2, tmux, systemd-container, debootstrap and" \
         "libibverbs1 yourself for the SSH/netns/screen/systemd-host tests and the mooncake backend" >&2
  fi
fi

# Debian's prometheus and prometheus-alertmanager: promtool and amtool for the alerting tests, the servers for
# tests/fixtures/prometheus.py and tests/fixtures/alertmanager.py (each test starts its own on free loopback ports).
# The packages' own services must not run: a policy-rc.d (unless one is there already) stops their postinst starting
# them, and they are disabled so no boot starts them either; --no-install-recommends keeps
# prometheus-node-exporter (another service, on 9100) out.
# install_quiet_service PACKAGE SERVICE: install PACKAGE with SERVICE neither started nor enabled
install_quiet_service() {
  export DEBIAN_FRONTEND=noninteractive
  local own_policy= rc=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && own_policy=1
  fi
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$1" >/dev/null; } || rc=$?
  if [ -n "$own_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
  [ "$rc" = 0 ] || exit "$rc"
  if [ -d /run/systemd/system ]; then systemctl stop "$2" >/dev/null 2>&1 || true; fi
  # without systemd as PID 1 systemctl disables offline (the wants link and the SysV rc links); where it cannot
  # (no systemctl, a refusing container) the link the postinst made would still start the service at boot
  systemctl disable "$2" >/dev/null 2>&1 || true
  rm -f "/etc/systemd/system/multi-user.target.wants/$2"
  if ! command -v systemctl >/dev/null 2>&1 && command -v update-rc.d >/dev/null 2>&1; then
    update-rc.d "${2%.service}" disable >/dev/null 2>&1 || true
  fi
}

# Debian's chromium: the report tests open every --report and `pdctl incident` write-up in it, headless
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
  else
    echo "install.sh: not root: install Debian's chromium yourself for the report tests" >&2
  fi
fi

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    install_quiet_service prometheus prometheus.service
  else
    echo "install.sh: not root: install Debian's prometheus package (promtool and the server) yourself for the" \
         "alert-rule tests" >&2
  fi
fi
if ! command -v amtool >/dev/null 2>&1 || ! command -v prometheus-alertmanager >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    install_quiet_service prometheus-alertmanager prometheus-alertmanager.service
  else
    echo "install.sh: not root: install Debian's prometheus-alertmanager package (amtool and the server) yourself" \
         "for the alert-routing tests" >&2
  fi
fi

"$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore "torch==2.13.0"
# compat: a plain .pth path entry, not setuptools' import hook, which costs every pdctl start ~10 ms of imports
"$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e ".[engine,test]" \
    --config-settings editable_mode=compat
# bytecode for pdctl's own modules: with PYTHONDONTWRITEBYTECODE set (as on these machines) every start would
# otherwise compile them again (~10 ms); a later edit just makes Python compile that file in memory
"$PY" -m compileall -q pdctl engine >/dev/null || true

# The Debian root the systemd test hosts boot (once per machine; a valid cached root is kept as it is).
if [ "$(id -u)" = 0 ]; then
  bash scripts/build_test_root.sh >/dev/null
fi

# The real SGLang 0.5.23, in a venv of its own that sees the CPU torch above (tests/fixtures/sglang_venv.py and
# tests/fixtures/real_sglang.py find it): the lint tests read its argument parser and env registry, and the
# real-SGLang lane runs it (prefill and decode over mooncake, behind sglang-router and smg) on a tiny Llama made
# here. It needs no apt package beyond libibverbs1 above. A stamp makes a second run a no-op.
bash scripts/install_real_sglang.sh
