"""A playbook's problems in words (msgspec, the inventory's library, reads it): every bad arg of a step listed, a
choice listing its choices, a check across args naming its field, `on_failure` saying both forms; and loading one
imports no pydantic."""

from __future__ import annotations

import pytest

from pdctl.errors import PlaybookError
from pdctl.inventory import embedded_default
from pdctl.playbook import runner
from pdctl.playbook.schema import load_playbook, parse_playbook, resolve_playbook

SHIPPED = ("final-health", "co-restart", "stall-triage", "abort-storm-ab", "deploy-fix")
BASE = {
    "name": "t",
    "steps": [
        {"name": "one", "action": "verify"},
        {"name": "two", "action": "shell", "args": {"role": "decode", "command": "true"}},
    ],
}


def _err(data) -> str:
    with pytest.raises(PlaybookError) as ei:
        parse_playbook(data, "pb.yaml")
    assert ei.value.exit_code == 2
    return ei.value.message


def _plan_err(step) -> str:
    with pytest.raises(PlaybookError) as ei:
        runner.plan(parse_playbook({"name": "t", "steps": [step]}, "pb.yaml"), embedded_default())
    assert ei.value.exit_code == 2
    return ei.value.message


def test_every_bad_arg_of_a_step_is_listed_and_a_choice_lists_its_choices():
    msg = _plan_err({"name": "a", "action": "shell", "args": {"role": "primary", "index": -1, "command": "true"}})
    assert "step 1 'a', field 'args.role': expected 'prefill', 'decode' or 'router' (got 'primary')" in msg, msg
    assert "step 1 'a', field 'args.index': Expected int >= 0 (got -1)" in msg, msg


def test_a_check_across_args_names_the_field_or_the_args():
    msg = _plan_err({"name": "a", "action": "restart", "args": {"roles": ["decode"]}})
    assert "step 1 'a', field 'args.roles': give pair: true or roles: [...], not both" in msg, msg
    msg = _plan_err({"name": "a", "action": "wait", "args": {}})
    assert "step 1 'a', field 'args': give exactly one of seconds (a fixed wait) or until (a check to pass)" in msg


@pytest.mark.parametrize("policy, got", [("retry", "'retry'"), (5, "5")])
def test_on_failure_says_both_forms_and_what_it_found(policy, got):
    msg = _err({**BASE, "steps": [BASE["steps"][0], {**BASE["steps"][1], "on_failure": policy}]})
    assert f"step 2 'two', field 'on_failure': expected stop, continue or {{run: STEP_NAME}} (got {got})" in msg


def test_source_is_no_key_of_a_playbook_file():
    assert "field 'source': unknown field" in _err({**BASE, "source": "elsewhere.yaml"})


def test_the_storm_plan_line_shows_its_size_and_aim():
    p = runner.plan(load_playbook(resolve_playbook("abort-storm-ab")), embedded_default())
    assert (
        p.steps[1].describe
        == "storm requests=90 prompt_tokens=20000 target=transfer-window sample_every_s=12 watch_s=60"
    )
    assert p.steps[1].args.config().requests == 90 and p.steps[1].args.router is None


def test_loading_and_planning_a_playbook_imports_no_pydantic():
    import subprocess
    import sys

    code = (
        "import sys; from pdctl.inventory import embedded_default; from pdctl.playbook import runner; "
        "from pdctl.playbook.schema import load_playbook, resolve_playbook; "
        "[runner.plan(load_playbook(resolve_playbook(n)), embedded_default(), cli_vars={}) "
        f"for n in {SHIPPED!r}]; print('pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
