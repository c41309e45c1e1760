"""A `verdict` gate names only verdicts its action gives: an unknown one (`wedged`) could never pass, so it is
refused when the playbook is loaded, exit 2, naming the file, the step and the field, and listing the known ones."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.checks.inflight import VERDICTS as INFLIGHT_JUDGE_VERDICTS
from pdctl.cli.app import app
from pdctl.errors import PlaybookError
from pdctl.playbook.kinds import REGISTRY
from pdctl.playbook.schema import load_playbook, parse_playbook

KNOWN = {
    "storm": ("drained", "not-drained", "pinned"),
    "triage": ("clean", "warn", "action"),
    "inflight": ("drained", "busy", "pinned", "unknown"),
}


def _pb(action, verdict, *, until=False):
    step = {"name": "check", "action": action, "gate": {"verdict": verdict}}
    if until:
        step = {
            "name": "check",
            "action": "wait",
            "args": {"until": {"action": action, "gate": {"verdict": verdict}}, "timeout": 5},
        }
    return {"name": "t", "steps": [{"name": "first", "action": "verify"}, step]}


def test_every_kind_with_a_verdict_gate_declares_its_verdicts():
    with_gate = {k.name: k.verdicts for k in REGISTRY.values() if "verdict" in k.gate_keys}
    assert with_gate == KNOWN
    assert set(INFLIGHT_JUDGE_VERDICTS) <= set(KNOWN["inflight"])  # the judge's own words stay in step


@pytest.mark.parametrize("action", sorted(KNOWN))
def test_known_verdicts_load(action):
    for v in KNOWN[action]:
        parse_playbook(_pb(action, v), "pb.yaml")
    parse_playbook(_pb(action, list(KNOWN[action])), "pb.yaml")
    if action != "storm":  # storm cannot be polled by wait
        parse_playbook(_pb(action, KNOWN[action][0], until=True), "pb.yaml")


@pytest.mark.parametrize("action", sorted(KNOWN))
@pytest.mark.parametrize("verdict", ["wedged", ["<known>", "wedged"], "interrupted", "PASS"])
def test_unknown_verdict_refused_naming_file_step_and_field(action, verdict):
    if isinstance(verdict, list):  # one known verdict does not make the list good
        verdict = [KNOWN[action][0], "wedged"]
    with pytest.raises(PlaybookError) as ei:
        parse_playbook(_pb(action, verdict), "pb.yaml")
    msg = ei.value.message
    assert ei.value.exit_code == 2
    assert msg.startswith("pb.yaml: invalid playbook")
    bad = verdict if isinstance(verdict, str) else verdict[1]
    assert f"step 2 'check', field 'gate.verdict': unknown verdict {bad!r} of action {action!r}" in msg, msg
    assert f"(its verdicts: {', '.join(KNOWN[action])})" in msg


@pytest.mark.parametrize("action", ["triage", "inflight"])
def test_unknown_verdict_in_a_wait_until_gate_refused(action):
    with pytest.raises(PlaybookError) as ei:
        parse_playbook(_pb(action, "wedged", until=True), "pb.yaml")
    assert "step 2 'check', field 'args.until.gate.verdict': unknown verdict 'wedged'" in ei.value.message


def test_cli_run_refuses_wedged_before_anything_runs(tmp_path, monkeypatch):
    p = tmp_path / "wedged.yaml"
    p.write_text(yaml.safe_dump(_pb("inflight", "wedged"), sort_keys=False))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    r = CliRunner().invoke(app, ["run", str(p)])
    assert r.exit_code == 2, r.output
    assert str(p) in r.output and "step 2 'check'" in r.output and "gate.verdict" in r.output
    assert "wedged" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("audit*"))


def test_shipped_playbooks_still_load():
    from pdctl.playbook.schema import shipped_playbooks

    for name, path in shipped_playbooks().items():
        load_playbook(path)


@pytest.mark.parametrize(
    "gate, said",
    [
        ({"exit_code": "zero"}, "field 'gate.exit_code': expected an integer or a list of integers (got 'zero')"),
        ({"exit_code": "0"}, "field 'gate.exit_code': expected an integer or a list of integers (got '0')"),
        ({"exit_code": True}, "field 'gate.exit_code': expected an integer or a list of integers (got True)"),
        ({"ok": "yes"}, "field 'gate.ok': expected true or false (got 'yes')"),
        ({"exit_code": []}, "field 'gate.exit_code': expected an integer or a list of integers"),
        ({"stdout_contains": ""}, "field 'gate.stdout_contains': expected a non-empty string"),
        ({"exit_code": [0, "1"]}, "field 'gate.exit_code.1': Expected int, got str (got '1')"),
    ],
)
def test_a_gate_value_of_the_wrong_kind_is_said_in_words(gate, said):
    step = {"name": "s", "action": "shell", "args": {"role": "decode", "command": "true"}, "gate": gate}
    with pytest.raises(PlaybookError) as ei:
        parse_playbook({"name": "t", "steps": [step]}, "pb.yaml")
    assert f"step 1 's', {said}" in ei.value.message, ei.value.message


def test_a_gate_var_that_fills_in_a_bad_value_names_the_key_and_the_var():
    from pdctl.inventory import embedded_default
    from pdctl.playbook import runner

    step = {
        "name": "s",
        "action": "shell",
        "args": {"role": "decode", "command": "true"},
        "gate": {"stdout_contains": "${needle}"},
    }
    pb = parse_playbook({"name": "t", "vars": {"needle": "x"}, "steps": [step]}, "pb.yaml")
    assert runner.plan(pb, embedded_default()).steps[0].gate.stdout_contains == "x"
    with pytest.raises(PlaybookError) as ei:
        runner.plan(pb, embedded_default(), cli_vars={"needle": ""})
    assert (
        "step 1 's', field 'gate.stdout_contains': expected a non-empty string (set by ${needle})" in ei.value.message
    )


def test_a_gate_judges_its_keys_in_order_and_stops_at_the_first_that_fails():
    from pdctl.playbook.gates import evaluate_gate, parse_gate
    from pdctl.playbook.outcome import StepOutcome

    out = StepOutcome(True, "done", verdict="drained", layers={"health": True, "e2e": False})
    assert evaluate_gate(parse_gate({}), out) == (True, "action ok (done)")
    assert evaluate_gate(parse_gate({"verdict": "drained", "ok": True}), out) == (True, "ok=true; verdict drained")
    assert evaluate_gate(parse_gate({"layers_pass": ["health", "e2e", "flags"], "verdict": "pinned"}), out) == (
        False,
        "layers failed: e2e; not run: flags",
    )
