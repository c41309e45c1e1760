"""The real lint probe (pdctl/probes/lint_probe.py) run as pdctl runs it on a host (`python -c TEXT REQUEST`), against
this machine's bundled engine: its parsed reply, for the lint tests that judge a real reply."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

from pdctl.checks.lint import parse_probe_reply
from pdctl.probes import source
from tests.e2e.helpers import REPO


def probe_reply(argv: Sequence[str] = (), kind: str = "bundled", env_names: Sequence[str] = ()) -> dict:
    """The reply to one item (key "d"): its verdict in reply["items"][0], the kind's env registry in
    reply["registries"][kind]."""
    item = {"key": "d", "kind": kind, "argv": list(argv), "env": {}, "env_names": list(env_names)}
    run = subprocess.run(
        [sys.executable, "-c", source("lint_probe"), json.dumps({"items": [item], "site_env": []})],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    reply = parse_probe_reply(run.stdout)
    assert reply is not None, run.stderr
    return reply
