#!/usr/bin/env bash
# Install what the tests need, then run the whole suite (unit, engine with real processes, e2e with a real sshd).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec "${PYTHON:-python3}" -m pytest -q -p no:cacheprovider "$@"
