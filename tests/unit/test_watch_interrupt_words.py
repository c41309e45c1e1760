"""A watch stopped before its first round (while opening its connections or binding its exporter; it used to be
while blocked on a FIFO without a reader) says the watch stopped, exit 130, and never speaks of "a mutating action"
(issue 28, C3's Ctrl-C). The stop during its rounds is tests/e2e/test_watch_outputs.py's FIFO test (a real SIGINT)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.errors import Interrupted


@pytest.mark.parametrize(
    ("raised", "said"), [(KeyboardInterrupt(), "SIGINT (Ctrl-C)"), (Interrupted("SIGTERM"), "SIGTERM")]
)
@pytest.mark.parametrize("json_out", [False, True], ids=["screen", "json"])
def test_stopped_before_the_first_round_says_the_watch_stopped(monkeypatch, tmp_path, raised, said, json_out):
    from pdctl.ops import watch as watch_op

    def interrupted(*args, **kwargs):
        raise raised

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(watch_op, "run_watch", interrupted)
    args = ["watch", "--listen", "127.0.0.1:1", "--for", "30"] + (["--json"] if json_out else [])
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 130, r.output
    assert "mutating" not in r.output
    if json_out:
        error = json.loads(r.stdout)["error"]
        assert error["message"] == f"watch stopped by {said} before its first round" and error["kind"] == "interrupted"
    else:
        assert f"watch stopped by {said} before its first round" in r.output
