"""How a `pdctl run` ends other than by a gate, through the real CLI on this machine: Ctrl-C or a signal in a step
(no handler, no later step, exit 130), a partial report after Ctrl-C, a step that could not see (exit 3, its handler
not run), an unexpected error (recorded as failed, never ok), and error messages scrubbed of the inventory's
secrets."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tests.unit.test_playbook_runner import _audit, _pb, _run, env, sh  # noqa: F401 -- env: a fixture


def _fake_shell(monkeypatch, fail_on: str, exc):
    """Make shell steps whose command contains `fail_on` raise `exc`; the others run for real."""
    import dataclasses

    from pdctl.playbook.kinds import REGISTRY

    kind = REGISTRY["shell"]

    def run(ctx, a):
        if fail_on in str(a.command):
            raise exc
        return kind.run(ctx, a)

    monkeypatch.setitem(REGISTRY, "shell", dataclasses.replace(kind, run=run))


def _assert_interrupted(env, r, t, at_step):
    assert r.exit_code == 130, r.output
    assert not (t / "fixed").exists() and not (t / "after").exists()  # neither the handler nor a later step
    recs = [x for x in _audit(env) if x["result"] != "started"]
    assert len(recs) == 1
    assert recs[0]["result"].startswith(f"interrupted at step {at_step}") and recs[0]["exit_code"] == 130
    assert [s["status"] for s in recs[0]["steps"]][-1] == "interrupted"
    assert "co-restart" not in [s["name"] for s in recs[0]["steps"]]
    return recs[0]


def test_sigterm_in_a_step_is_recorded_as_sigterm_not_ctrl_c(env, monkeypatch):
    from pdctl.cli.common import Interrupted

    t = env["tmp"]
    _fake_shell(monkeypatch, "TERM", Interrupted("SIGTERM"))
    p = _pb(t, [sh("check", "echo TERM"), sh("after", f"touch {t}/after")])
    r = _run([str(p)])
    assert r.exit_code == 130, r.output
    rec = [x for x in _audit(env) if x["result"] != "started"][0]
    assert rec["result"] == "interrupted at step 1 'check' (SIGTERM)", rec["result"]


def test_ctrl_c_in_a_step_stops_the_run_without_its_on_failure_handler(env, monkeypatch):
    t = env["tmp"]
    _fake_shell(monkeypatch, "CTRL-C", KeyboardInterrupt())
    p = _pb(
        t,
        [
            sh("first", "true"),
            sh("check", "echo CTRL-C", on_failure={"run": "co-restart"}),
            sh("co-restart", f"touch {t}/fixed", handler=True),
            sh("after", f"touch {t}/after"),
        ],
    )
    r = _run([str(p), "--apply"])
    rec = _assert_interrupted(env, r, t, 2)
    assert [s["status"] for s in rec["steps"]] == ["passed", "interrupted"]
    assert "INTERRUPTED" in r.output


def test_a_partial_triage_report_after_ctrl_c_is_an_interrupt_not_a_failure(env, monkeypatch):
    """triage catches Ctrl-C itself and returns a partial report (here one that also needs action): the run must
    stop with 130, not run the `on_failure: {run: co-restart}` handler as stall-triage --apply would."""
    from pdctl.ops import triage as triage_mod

    def partial_triage(dep, **kw):
        return triage_mod.TriageReport(
            dep.inv.name,
            [],
            [triage_mod.Finding("degraded bootstrap", "action", ["x"], ["y"], "run `pdctl restart --pair`")],
            partial=True,
        )

    monkeypatch.setattr(triage_mod, "triage", partial_triage)
    t = env["tmp"]
    p = _pb(
        t,
        [
            {"name": "triage", "action": "triage", "on_failure": {"run": "co-restart"}},
            sh("co-restart", f"touch {t}/fixed", handler=True, when="apply"),
            sh("after", f"touch {t}/after"),
        ],
    )
    r = _run([str(p), "--apply", "--json"])
    rec = _assert_interrupted(env, r, t, 1)
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 130 and not doc["ok"] and doc["steps"][0]["result"]["verdict"] == "interrupted"
    assert rec["steps"][0]["action"] == "triage"


def test_a_partial_storm_or_inflight_report_is_an_interrupt(env, monkeypatch):
    from pdctl.ops import inflight as inflight_mod

    monkeypatch.setattr(
        inflight_mod,
        "sample_inflight",
        lambda dep, w, i, **kw: inflight_mod.InflightReport(w, i, [], None, partial=True),
    )
    t = env["tmp"]
    p = _pb(t, [{"name": "inflight", "action": "inflight", "on_failure": "continue"}, sh("after", f"touch {t}/after")])
    _assert_interrupted(env, _run([str(p)]), t, 1)


def _nobody_listening(tmp) -> Path:
    """The embedded default's roles on closed ports: nothing answers, every host does (local)."""
    from pdctl.inventory import embedded_default
    from tests.fixtures.net import closed_port

    data = embedded_default().dump()
    for role in ("prefill", "decode", "router"):
        data["roles"][role][0]["port"] = closed_port()
    data["roles"]["prefill"][0]["bootstrap_port"] = closed_port()
    inv = tmp / "inv.yaml"
    inv.write_text(yaml.safe_dump(data))
    return inv


def test_an_inflight_step_with_no_worker_answering_is_unknown_at_once(env):
    """Nothing listens on the inventory's ports: the step says unknown (exit 3) at its first sample, instead of
    sampling its whole 60 s window of unreadable workers and calling it a failure (exit 1)."""
    inv = _nobody_listening(env["tmp"])
    p = _pb(env["tmp"], [{"name": "queues", "action": "inflight", "args": {"window_s": 60, "interval_s": 3}}])
    r = _run([str(p), "-i", str(inv), "--json"])
    assert r.exit_code == 3, r.output
    step = json.loads(r.stdout)["steps"][0]["result"]
    assert step["verdict"] == "unknown" and "could be read" in step["summary"], step


def test_a_step_that_could_not_see_never_runs_its_handler(env):
    """stall-triage's shape: a check whose workers do not answer (exit 3) with `on_failure: {run: co-restart}`. The
    handler acts (a co-restart), so it is not run on an unknown: the run stops with exit 3 and says why."""
    inv = _nobody_listening(env["tmp"])
    t = env["tmp"]
    p = _pb(
        t,
        [
            {
                "name": "queues",
                "action": "inflight",
                "args": {"window_s": 10, "interval_s": 1},
                "on_failure": {"run": "co-restart"},
            },
            sh("co-restart", f"touch {t}/restarted", handler=True),
        ],
    )
    r = _run([str(p), "-i", str(inv), "--json"])
    assert r.exit_code == 3, r.output
    assert not (t / "restarted").exists()
    doc = json.loads(r.stdout)
    handler = next(s for s in doc["steps"] if s["name"] == "co-restart")
    assert handler["status"] == "skipped" and not doc["ok"], doc["steps"]
    assert any("was not run" in line for line in doc["recommendations"]), doc


def test_step_error_messages_are_masked_with_the_inventorys_secrets(env, monkeypatch):
    """An error message carrying a log tail with a role's secret env value is scrubbed before audit and output."""
    from pdctl.errors import StepFailed
    from pdctl.inventory import embedded_default

    secret = "sk-roleenv-9f8e7d6c5b4a"
    data = embedded_default().dump()
    data["roles"]["prefill"][0]["env"]["MY_API_KEY"] = secret
    inv = env["tmp"] / "inv.yaml"
    inv.write_text(yaml.safe_dump(data))
    _fake_shell(
        monkeypatch,
        "LEAK",
        StepFailed(f"prefill did not start; log tail:\n  using key {secret}\n", hint=f"see the log ({secret})"),
    )
    p = _pb(env["tmp"], [sh("leak", "echo LEAK")])
    r = _run([str(p), "-i", str(inv), "--json"])
    assert r.exit_code == 1, r.output
    assert secret not in r.output and secret not in env["audit"].read_text()
    assert "using key ***" in json.loads(r.stdout)["steps"][0]["result"]["error"]


def _history(env, *args):
    from pdctl.cli.app import app as pdctl_app

    return CliRunner().invoke(pdctl_app, ["history", *args])


def test_a_run_ended_by_an_unexpected_error_is_recorded_as_failed_with_its_step_never_ok(env, monkeypatch):
    """A bug in a step (here a ValueError) ends the run with the CLI's "unexpected" error, exit 1: the audit record
    says failed at that step with the error and exit code 1, not "ok" with no steps; history lists it as failed."""
    t = env["tmp"]
    _fake_shell(monkeypatch, "BUG", ValueError("Port out of range 0-65535"))
    p = _pb(
        t,
        [
            sh("first", "true"),
            sh("buggy", "echo BUG", on_failure={"run": "fix"}),
            sh("fix", f"touch {t}/fixed", handler=True),
            sh("after", f"touch {t}/after"),
        ],
    )
    r = _run([str(p)])
    assert r.exit_code == 1 and "unexpected ValueError" in r.output, r.output
    assert not (t / "fixed").exists() and not (t / "after").exists()
    recs = [x for x in _audit(env) if x["result"] != "started"]
    assert len(recs) == 1 and recs[0]["exit_code"] == 1
    assert recs[0]["result"] == "failed at step 2 'buggy': error: ValueError: Port out of range 0-65535"
    assert [(s["name"], s["status"]) for s in recs[0]["steps"]] == [("first", "passed"), ("buggy", "failed")]
    h = _history(env, "--result", "failed")
    assert h.exit_code == 0 and "run t" in h.output and "Port out of range" in h.output, h.output
    assert "run t" not in _history(env, "--result", "ok").output


def test_a_run_ended_by_a_pdctl_error_outside_a_step_records_its_exit_code(env, monkeypatch):
    """An error raised between steps (here a UsageError from the step printer) is recorded with its own exit code
    and the result word that goes with it (2: usage), never "ok"."""
    from pdctl.errors import UsageError
    from pdctl.render import playbook as show

    def broken(self, sr):
        raise UsageError("the screen went away")

    monkeypatch.setattr(show.StepPrinter, "finished", broken)
    p = _pb(env["tmp"], [sh("first", "true")])
    r = _run([str(p)])
    assert r.exit_code == 2, r.output
    recs = [x for x in _audit(env) if x["result"] != "started"]
    assert len(recs) == 1 and recs[0]["exit_code"] == 2
    assert recs[0]["result"] == "failed: UsageError: the screen went away"
    assert "run t" in _history(env, "--result", "usage").output
