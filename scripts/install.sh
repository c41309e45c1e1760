#!/usr/bin/env bash
# Install everything pdctl, the bundled engine and the tests need, on a fresh machine. Idempotent.
# torch goes first and pinned: anything that pulled a bare "torch" would fetch a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ] || ! command -v systemd-analyze >/dev/null 2>&1 \
   || ! command -v ip >/dev/null 2>&1 || ! command -v tmux >/dev/null 2>&1 \
   || ! command -v systemd-nspawn >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # tmux: the screen test drives pdctl in a real 80x24 terminal
    # systemd-container + debootstrap: the systemd test hosts (tests/fixtures/systemd_host.py)
    apt-get install -y -qq openssh-server openssh-client systemd iproute2 tmux systemd-container debootstrap >/dev/null
  else
    echo "install.sh: not root: install openssh-server, systemd, iproute2, tmux, systemd-container and debootstrap" \
         "yourself for the SSH/netns/screen/systemd-host tests" >&2
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
