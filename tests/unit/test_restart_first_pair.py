"""`restart --rolling --first-pair P:D`: the pair as an operator copies it from `verify pairs`, or its indices;
anything else, or the option without --rolling, is a usage error (exit 2) naming it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.cli.restart import pair_indices
from pdctl.errors import UsageError


@pytest.mark.parametrize("text", ["0:1", "0,1", " 0 : 1 ", "prefill[0] -> decode[1]", "prefill[0]->decode[1]"])
def test_a_pair_is_read_in_the_forms_an_operator_has_it(text):
    assert pair_indices(text) == (0, 1)


@pytest.mark.parametrize("text", ["0-1", "a:b", "", "0:", "decode[1] -> prefill[0]", "0:1:2"])
def test_anything_else_is_named_in_a_usage_error(text):
    with pytest.raises(UsageError) as e:
        pair_indices(text)
    assert e.value.exit_code == 2 and f"--first-pair {text!r}" in e.value.message


def test_first_pair_goes_with_rolling_only(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    r = CliRunner().invoke(app, ["restart", "--pair", "--first-pair", "0:1", "--dry-run"])
    assert r.exit_code == 2 and "--first-pair goes with --rolling" in r.output, r.output
