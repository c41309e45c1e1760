"""pdctl.shell: every value reaching a shell is quoted, checked by running the result through /bin/sh."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pdctl.shell import env_assignments, env_command, export_prefix, quote_argv

NASTY = ["plain", "a b", "it's", '"dq"', "$HOME", "`id`", "$(id)", "a;b", "x\ny", "", "*", "--flag=v w", "\\"]


def _sh(cmd: str) -> str:
    return subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, check=True).stdout


def test_quote_argv_roundtrips_through_sh():
    code = "import json,sys; print(json.dumps(sys.argv[1:]))"
    out = _sh(quote_argv([sys.executable, "-c", code, *NASTY]))
    import json

    assert json.loads(out) == NASTY


def test_env_assignments_roundtrip():
    env = {f"V{i}": v for i, v in enumerate(NASTY)}
    code = "import json,os; print(json.dumps({k: os.environ[k] for k in sorted(os.environ) if k.startswith('V')}))"
    import json

    assert json.loads(_sh(env_command([sys.executable, "-c", code], env))) == env
    assert json.loads(_sh(export_prefix(env) + quote_argv([sys.executable, "-c", code]))) == env


def test_env_names_validated_and_empty():
    assert env_assignments({}) == "" and export_prefix(None) == ""
    with pytest.raises(ValueError):
        env_assignments({"A;rm -rf /": "x"})
