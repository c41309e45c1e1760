"""A storm whose every request the engine rejects fails, saying so, although inflight stays 0 (the real CLI, the
real engine behind the real sglang-router, free ports). The prompt is longer than the bundled engine's context, so
each /generate is a 400 from the worker, passed on by the router."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import pdctl
from tests.engine.test_storm_engine import _deploy, _kill_leftovers

pytestmark = [pytest.mark.engine]


def test_storm_whose_requests_are_all_rejected_fails(tmp_path_factory):
    state, path, _ports, r = _deploy(tmp_path_factory, "rejected", "")
    try:
        assert r.code == 0, r.output
        r = pdctl(
            [
                "storm",
                "-i",
                str(path),
                "--json",
                "--requests",
                "3",
                "--prompt-tokens",
                "40000",
                "--calibrate",
                "0",
                "--watch",
                "2",
                "--sample-every",
                "1",
                "--seed",
                "1",
            ],
            state=state,
            timeout=120,
        )
        assert r.code == 1, r.output
        doc = r.json()
        assert doc["ok"] is False
        assert doc["verdict"]["reason"].startswith("all 3 requests were rejected or failed"), doc["verdict"]
        assert "3 x HTTP 400" in doc["verdict"]["reason"]
        assert all(o["aborted_s"] is None and o["status_code"] == 400 for o in doc["requests"])
    finally:
        pdctl(["down", "-i", str(path)], state=state, timeout=120)
        _kill_leftovers(state)
