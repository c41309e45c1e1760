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

# Debian's prometheus: promtool for the alert-rule tests, the server for tests/fixtures/prometheus.py (each test
# starts its own on a free loopback port). The package's own service must not run: a policy-rc.d (unless one is
# there already) stops its postinst starting it, and it is disabled so no boot starts it either;
# --no-install-recommends keeps prometheus-node-exporter (another service, on 9100) out.
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    own_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && own_policy=1
    fi
    rc=0
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } || rc=$?
    if [ -n "$own_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
    [ "$rc" = 0 ] || exit "$rc"
    if [ -d /run/systemd/system ]; then systemctl stop prometheus.service >/dev/null 2>&1 || true; fi
    systemctl disable prometheus.service >/dev/null 2>&1 || true
  else
    echo "install.sh: not root: install Debian's prometheus package (promtool and the server) yourself for the" \
         "alert-rule tests" >&2
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

# The real sglang 0.5.23 for the lint tests (tests/fixtures/sglang_venv.py finds it at the same path): its argument
# parser and env registry only, never a server. Its own venv, seeing the CPU torch above through system
# site-packages, so triton & co. never land in the engine's environment. `--no-deps` first: sglang's own
# requirements would pull CUDA torch 2.14.1 and ~35 nvidia wheels; the list after it is what
# prepare_server_args and environ.py import on this machine.
install_sglang_venv() {
  local venv=${PDCTL_SGLANG_VENV:-}
  if [ -z "$venv" ]; then
    if [ "$(id -u)" = 0 ]; then venv=/opt/pdctl-test/sglang-venv; else venv=${XDG_CACHE_HOME:-$HOME/.cache}/pdctl-test/sglang-venv; fi
  fi
  if "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '0.5.23')" 2>/dev/null; then
    return 0
  fi
  mkdir -p "$(dirname "$venv")"
  "$PY" -m venv --system-site-packages "$venv"
  local pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check --root-user-action=ignore)
  "${pip[@]}" "sglang==0.5.23" --no-deps
  "${pip[@]}" "torch==2.13.0" triton==3.8.0 orjson psutil pybase64 requests packaging pillow starlette msgspec \
      pydantic pyzmq tqdm ipython aiohttp
}
install_sglang_venv
