"""What `pdctl run` prints: commands that the CLI accepts, every verify layer's table, the result once and the gate
verdict briefly, triage in `pdctl triage`'s words, values as the operator wrote them."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PDCTL_OPERATOR", "unit-operator")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    return tmp_path


def _run(*args):
    return CliRunner().invoke(app, ["run", *args])


def _fake_verify(monkeypatch):
    """final-health without an engine: one passing check per asked layer."""
    from pdctl.checks.layers import DEFAULT_LAYERS
    from pdctl.checks.result import CheckResult, Status
    from pdctl.ops import verify

    def fake(dep, *, since_baseline, record, layers=DEFAULT_LAYERS):
        return verify.HealthReport(
            dep.inv.source,
            {n: [CheckResult(n, "router[0]", f"check-{n}", Status.PASS, observed=f"seen-{n}")] for n in layers},
        )

    monkeypatch.setattr(verify, "final_health_with_baseline", fake)


def test_verify_steps_render_one_layer_flag_per_layer(env):
    r = _run("final-health", "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    cmds = [s["command"] for s in json.loads(r.stdout)["steps"]]
    assert cmds == [
        "verify final-health --layer health --layer e2e",
        "verify final-health --layer transfer --layer flags --layer lineage",
    ]
    assert not any("," in c for c in cmds)


def test_final_health_shows_every_layers_table_and_the_result_once(env, monkeypatch):
    from pdctl.checks.layers import layer_title

    _fake_verify(monkeypatch)
    r = _run("final-health")
    assert r.exit_code == 0, r.output
    out = r.stdout
    for layer in ("health", "e2e", "transfer", "flags", "lineage"):
        assert layer_title(layer) in out and f"check-{layer}" in out, layer
    titles = [out.index(layer_title(n)) for n in ("health", "e2e", "transfer", "flags", "lineage")]
    assert titles == sorted(titles)  # in layer order, 1 to 5
    assert out.count("final-health: PASS (health, e2e)") == 1  # result column only, not the gate column too
    err = r.stderr
    assert "gate: ok" in err and "gate passed" not in err and "action ok (" not in err
    assert err.count("final-health: PASS (health, e2e)") == 1
    # the JSON keeps the last report as final_health, and each step's own report
    doc = json.loads(_run("final-health", "--json").stdout)
    assert set(doc["final_health"]["layers"]) == {"transfer", "flags", "lineage"}
    assert set(doc["steps"][0]["result"]["data"]["final_health"]["layers"]) == {"health", "e2e"}


def test_an_explicit_gate_shows_its_own_words_not_the_summary(env):
    p = env / "pb.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "g",
                "steps": [
                    {
                        "name": "s",
                        "action": "shell",
                        "args": {"role": "decode", "command": "echo nope; exit 3"},
                        "gate": {"exit_code": [0, 1]},
                    }
                ],
            }
        )
    )
    r = _run(str(p))
    assert r.exit_code == 1
    assert "gate: exit code 3 (want 0 or 1)" in r.stderr
    assert "failed at step 1 's': exit code 3 (want 0 or 1)" in r.stdout
    doc = json.loads(_run(str(p), "--json").stdout)
    assert doc["steps"][0]["gate"].startswith("failed: exit code 3")  # the JSON is unchanged


def test_values_print_as_given(env):
    r = _run("stall-triage", "--dry-run")
    assert r.exit_code == 0, r.output
    assert "window_s=6" in r.stdout and "window_s=6.0" not in r.stdout
    r = _run("stall-triage", "--dry-run", "--var", "window_s=2.5")
    assert "triage window_s=2.5" in r.stdout


@pytest.mark.parametrize(
    "severity, head, ok",
    [
        (None, "triage: HEALTHY: no finding needs action", True),
        ("action", "triage: ACTION NEEDED (1 finding(s)): degraded bootstrap", False),
        ("warn", "triage: WARNINGS (1 finding(s)): degraded bootstrap", True),
    ],
)
def test_triage_step_uses_the_words_of_pdctl_triage(env, monkeypatch, severity, head, ok):
    from pdctl.ops import triage as triage_mod

    findings = (
        [triage_mod.Finding("degraded bootstrap", severity, ["x"], ["y"], "run `pdctl restart --pair`")]
        if severity
        else []
    )
    rep = triage_mod.TriageReport("local", [], findings)
    monkeypatch.setattr(triage_mod, "triage", lambda dep, **kw: rep)
    p = env / "pb.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "steps": [{"name": "triage", "action": "triage"}]}))
    doc = json.loads(_run(str(p), "--json").stdout)
    step = doc["steps"][0]
    head_now = getattr(rep, "headline", None)  # pdctl triage's own headline once the report has one
    if head_now:
        assert step["summary"].startswith(head_now if head_now.startswith("triage") else f"triage: {head_now}")
    else:
        assert step["summary"] == head
    assert step["result"]["verdict"] == {None: "clean", "action": "action", "warn": "warn"}[severity]
    assert doc["ok"] is ok
