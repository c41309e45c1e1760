#!/usr/bin/env bash
# Install what the tests need, then the house's checks (ruff's lint and format check, mypy on pdctl/ and engine/),
# then the whole suite (unit, engine with real processes, e2e with a real sshd, the real-SGLang lane).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
py="${PYTHON:-python3}"
"$py" -m ruff check pdctl engine tests bench scripts
"$py" -m ruff format --check pdctl engine tests bench scripts
"$py" -m mypy
exec "$py" -m pytest -q -p no:cacheprovider "$@"
