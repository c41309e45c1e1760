#!/usr/bin/env bash
# The main job on the embedded default: install, deploy the bundled engine on this machine
# (prefill 30000, decode 30002, router 30001, bootstrap 8998), then run the seed's final-health check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
pdctl deploy
pdctl verify final-health
