"""Two flags that write one setting (issue 28, W11): `--tp-size 1` with `--tensor-parallel-size 2` passed lint.

Which flags are spellings of one setting is the host's parser's answer: these tests run the real probe script
(pdctl/probes/lint_probe.py) in a subprocess against the bundled engine's parser, which declares SGLang's
aliases, and judge its real reply; the judge alone is checked on a hand-made reply for the router's append flags.
"""

from __future__ import annotations

import json

from pdctl.checks.lint import judge_command
from pdctl.checks.lint_report import RoleAnswer, judge_lint
from pdctl.checks.lint_spellings import judge_spellings
from pdctl.serialize import to_data
from tests.unit.lint_probe_reply import probe_reply

ALIASES = ["--tp-size", "--tensor-parallel-size"]


def _probe(argv: list[str], kind: str = "bundled") -> dict:
    """The real probe's item for `argv`, run as pdctl runs it on a host (`python -c TEXT REQUEST`)."""
    return probe_reply(argv, kind)["items"][0]


def test_two_spellings_of_tp_with_different_values_fail():
    item = _probe(["--port", "30002", "--tp-size", "1", "--tensor-parallel-size", "2"])
    assert item["verdict"]["ok"]  # argparse itself takes it: the last one wins
    out = judge_command("decode[0]", "bundled", ["--tp-size", "1", "--tensor-parallel-size", "2"], item)
    (f,) = out
    assert (f.rule, f.severity, f.subject) == ("flag-conflict", "error", "--tp-size / --tensor-parallel-size")
    assert f.fails and not f.blocks
    assert f.data["setting"] == "tp_size" and f.data["spellings"] == ALIASES
    assert "--tp-size 1" in f.message and "--tensor-parallel-size 2" in f.message
    assert "keeps the last, --tensor-parallel-size 2" in f.message


def test_the_same_value_under_two_spellings_warns():
    item = _probe(["--tensor-parallel-size", "2", "--tp-size=2"])
    (f,) = judge_command("decode[0]", "bundled", ["--tensor-parallel-size", "2", "--tp-size=2"], item)
    assert (f.rule, f.severity) == ("flag-repeated", "warning") and f.fails and not f.blocks


def test_values_compare_as_the_parser_converts_them_and_booleans_by_their_no_form():
    """`02` and `2` are one int to the parser: repeated, not a conflict. `--x` and `--no-x` are opposite values of
    one setting; an abbreviation is resolved as argparse resolves it."""
    argv = ["--tp-size", "02", "--tensor-parallel", "2", "--enable-tf32-matmul", "--no-enable-tf32-matmul"]
    out = judge_command("decode[0]", "bundled", argv, _probe(argv))
    got = {(f.rule, f.data.get("setting") or f.subject) for f in out}
    assert got == {
        ("flag-abbreviated", "--tensor-parallel"),
        ("flag-repeated", "tp_size"),
        ("flag-conflict", "enable_tf32_matmul"),
    }


def test_distinct_settings_and_appended_flags_are_quiet():
    argv = ["--tp-size", "2", "--dp-size", "2", "--port", "1"]
    assert judge_command("decode[0]", "bundled", argv, _probe(argv)) == []
    # the router's --prefill URL PORT --prefill URL PORT appends: the probe reports no write for it
    router_item = {"writes": [{"flag": "--port", "option": "--port", "dest": "port", "value": 1}]}
    assert judge_spellings("router[0]", "smg 1.13.0", "1.13.0", router_item) == []


def test_a_secret_value_under_two_spellings_is_masked():
    writes = [
        {"flag": "--api-key", "option": "--api-key", "dest": "api_key", "spellings": ["--api-key"], "value": "hunter2"},
        {"flag": "--api-key=x", "option": "--api-key", "dest": "api_key", "spellings": ["--api-key"], "value": "x"},
    ]
    item = {"available": True, "version": "1", "options": ["--api-key"], "verdict": {"ok": True}, "writes": writes}
    answer = RoleAnswer("d", "decode", "sglang", "h", "py", ["--api-key", "hunter2"], {}, item)
    doc = to_data(judge_lint([answer], site_env={}, silenced=[], probe_timeout=30.0))
    assert doc["findings"][0]["rule"] == "flag-conflict" and "hunter2" not in json.dumps(doc)
