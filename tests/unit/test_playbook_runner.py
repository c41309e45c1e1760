"""`pdctl run` and `pdctl history` through the real CLI on this machine, with shell, wait and restart steps that need
no engine: gates, stop/continue/handlers, exit codes, dry run, quoting, the audit record, concurrent runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PDCTL_OPERATOR", "unit-operator")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    return {"tmp": tmp_path, "audit": state / "pdctl" / "audit.jsonl"}


def _pb(tmp_path, steps, name="t", vars=None, file="pb.yaml"):
    p = tmp_path / file
    p.write_text(yaml.safe_dump({"name": name, "vars": vars or {}, "steps": steps}, sort_keys=False))
    return p


def sh(name, command, **kw):
    return {"name": name, "action": "shell", "args": {"role": "decode", "command": command}, **kw}


def _run(args):
    return CliRunner().invoke(app, ["run", *args])


def _audit(env):
    return [json.loads(line) for line in env["audit"].read_text().splitlines()]


def test_failed_gate_stops_the_run_and_later_steps_do_not_run(env):
    t = env["tmp"]
    p = _pb(t, [sh("first", f"touch {t}/first"), sh("bad", "echo oops; exit 3"), sh("later", f"touch {t}/later")])
    r = _run([str(p), "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert [s["status"] for s in doc["steps"]] == ["passed", "failed", "not run"]
    assert doc["failed_step"] == "bad" and "exit 3" in doc["steps"][1]["gate"]
    assert (t / "first").exists() and not (t / "later").exists()


def test_gate_on_exit_code_and_stdout(env):
    t = env["tmp"]
    p = _pb(
        t,
        [
            sh("expected-3", "exit 3", gate={"exit_code": [0, 3]}),
            sh("says-ready", "echo state=READY", gate={"stdout_contains": "READY"}),
            sh("says-nothing", "echo state=idle", gate={"stdout_contains": "READY"}),
        ],
    )
    r = _run([str(p), "--json"])
    assert r.exit_code == 1
    assert [s["status"] for s in json.loads(r.stdout)["steps"]] == ["passed", "passed", "failed"]


def test_on_failure_continue_runs_later_steps_but_the_run_still_fails(env):
    t = env["tmp"]
    p = _pb(t, [sh("bad", "exit 1", on_failure="continue"), sh("later", f"touch {t}/later")])
    r = _run([str(p), "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert [s["status"] for s in doc["steps"]] == ["failed", "passed"] and doc["failed_step"] == "bad"
    assert (t / "later").exists()


def test_the_not_run_note_names_the_step_that_stopped_the_run_not_the_first_failure(env):
    t = env["tmp"]
    p = _pb(t, [sh("optional", "exit 1", on_failure="continue"), sh("must-pass", "exit 2"), sh("after", "true")])
    r = _run([str(p), "--json"])
    assert r.exit_code == 1, r.output  # the first failure's code, as documented
    steps = json.loads(r.stdout)["steps"]
    assert steps[2]["status"] == "not run" and "stopped at step 'must-pass'" in steps[2]["summary"], steps[2]


def test_on_failure_runs_a_handler_that_recovers(env):
    t = env["tmp"]
    p = _pb(
        t,
        [
            sh("check", f"test -f {t}/fixed", on_failure={"run": "fix"}),
            sh("fix", f"touch {t}/fixed", handler=True),
            sh("after", f"test -f {t}/fixed"),
        ],
    )
    r = _run([str(p), "--json"])
    assert r.exit_code == 0, r.output
    steps = json.loads(r.stdout)["steps"]
    assert [(s["name"], s["status"]) for s in steps] == [("check", "recovered"), ("fix", "passed"), ("after", "passed")]
    assert steps[1]["handler_of"] == "check"


def test_handler_gated_on_apply_ends_in_a_recommendation(env):
    t = env["tmp"]
    steps = [
        sh("check", f"test -f {t}/fixed", on_failure={"run": "fix"}),
        sh("fix", f"touch {t}/fixed", handler=True, when="apply"),
        sh("after", "true", when="apply"),
    ]
    p = _pb(t, steps)
    r = _run([str(p), "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert [s["status"] for s in doc["steps"]] == ["failed", "skipped", "skipped"]
    assert any("--apply" in x for x in doc["recommendations"])
    assert not (t / "fixed").exists()
    r = _run([str(p), "--json", "--apply"])
    assert r.exit_code == 0, r.output
    assert [s["status"] for s in json.loads(r.stdout)["steps"]] == ["recovered", "passed", "passed"]


def test_failing_handler_stops_with_the_first_failure(env):
    t = env["tmp"]
    p = _pb(
        t,
        [
            sh("check", "exit 1", on_failure={"run": "fix"}),
            sh("fix", "exit 2", handler=True),
            sh("after", f"touch {t}/after"),
        ],
    )
    r = _run([str(p), "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert [s["status"] for s in doc["steps"]] == ["failed", "failed", "not run"]
    assert doc["failed_step"] == "check" and not (t / "after").exists()


def test_refused_step_exits_4(env):
    """A co-restart while another operator holds the lock is refused: the run exits with the step's own code 4."""
    from pdctl.inventory import embedded_default
    from pdctl.ops.context import Deployment, deployment_lock

    t = env["tmp"]
    p = _pb(t, [{"name": "co-restart", "action": "restart", "args": {"pair": True}}, sh("later", f"touch {t}/l")])
    dep = Deployment(embedded_default())
    try:
        with deployment_lock(dep, "unit test holds the lock"):
            r = subprocess.run(
                [sys.executable, "-m", "pdctl", "run", str(p)], cwd=REPO, capture_output=True, text=True, timeout=120
            )
    finally:
        dep.close()
    assert r.returncode == 4, r.stdout + r.stderr
    assert "unit test holds the lock" in r.stdout + r.stderr
    assert not (t / "l").exists()


def test_shell_values_are_quoted(env):
    t = env["tmp"]
    evil = f"$(touch {t}/pwned); touch {t}/pwned2"
    p = _pb(t, [sh("echo", "echo ${msg}", gate={"stdout_contains": "touch"})], vars={"msg": "x"})
    r = _run([str(p), "--json", "--var", f"msg={evil}"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["steps"][0]["result"]["stdout"].strip() == evil
    assert not (t / "pwned").exists() and not (t / "pwned2").exists()
    p2 = _pb(
        t,
        [{"name": "argv", "action": "shell", "args": {"role": "prefill", "command": ["echo", "${msg}"]}}],
        file="argv.yaml",
    )
    r = _run([str(p2), "--json", "--var", f"msg={evil}"])
    assert r.exit_code == 0 and not (t / "pwned").exists()


def test_wait_until_is_bounded_and_says_which_timeout_expired(env):
    t = env["tmp"]
    p = _pb(
        t,
        [
            {
                "name": "w",
                "action": "wait",
                "args": {
                    "until": {"action": "shell", "args": {"role": "decode", "command": f"test -f {t}/never"}},
                    "timeout": 0.6,
                    "interval": 0.2,
                },
            }
        ],
    )
    r = _run([str(p), "--json"])
    assert r.exit_code == 1
    assert "wait timeout of 0.6s" in json.loads(r.stdout)["steps"][0]["summary"]
    p = _pb(
        t,
        [
            {
                "name": "w",
                "action": "wait",
                "args": {"until": {"action": "shell", "args": {"role": "decode", "command": "true"}}, "timeout": 5},
            },
            {"name": "pause", "action": "wait", "args": {"seconds": 0.2}},
        ],
        file="ok.yaml",
    )
    assert _run([str(p)]).exit_code == 0


def test_wait_until_must_be_read_only(env):
    p = _pb(env["tmp"], [{"name": "w", "action": "wait", "args": {"until": {"action": "restart"}}}])
    r = _run([str(p)])
    assert r.exit_code == 2 and "args.until.action" in r.output


def test_dry_run_changes_nothing_and_writes_no_audit(env):
    t = env["tmp"]
    p = _pb(t, [sh("touch", f"touch {t}/touched")])
    r = _run([str(p), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "touch" in r.output and "plan" in r.output
    assert not (t / "touched").exists() and not env["audit"].exists()


def test_every_run_appends_one_audit_record_with_steps_and_durations(env):
    t = env["tmp"]
    p = _pb(t, [sh("ok", "true"), sh("bad", "exit 1")], name="audited", vars={"HF_TOKEN": "hf_abcdef123456"})
    _run([str(p)])
    recs = _audit(env)
    assert [r["result"] for r in recs][0] == "started" and len(recs) == 2  # shell steps mutate: started first
    rec = recs[1]
    assert rec["run"] == recs[0]["run"]
    assert rec["action"] == "run audited" and rec["operator"] == "unit-operator"
    assert rec["result"].startswith("failed at step 2 'bad'") and rec["exit_code"] == 1
    assert [s["status"] for s in rec["steps"]] == ["passed", "failed"]
    assert all("duration_s" in s for s in rec["steps"])
    assert "hf_abcdef123456" not in env["audit"].read_text()


def test_history_shows_records_filters_and_flags_corrupt_lines(env):
    t = env["tmp"]
    _run([str(_pb(t, [sh("ok", "true")], name="one"))])
    _run([str(_pb(t, [sh("ok", "true")], name="two", file="two.yaml"))])
    with open(env["audit"], "a") as f:
        f.write("{this is not json\n")
    r = CliRunner().invoke(app, ["history", "--json"])
    assert r.exit_code == 0, r.output
    recs = [x for x in json.loads(r.stdout)["records"] if x.get("result") != "started"]  # --json: raw lines
    assert [x.get("action") for x in recs[:2]] == ["run one", "run two"] and "corrupt" in recs[2]
    r = CliRunner().invoke(app, ["history", "--json", "--action", "run two"])
    assert [x.get("action") for x in json.loads(r.stdout)["records"] if "corrupt" not in x] == ["run two"] * 2
    r = CliRunner().invoke(app, ["history", "--json", "-n", "1"])
    assert len(json.loads(r.stdout)["records"]) == 1
    r = CliRunner().invoke(app, ["history"])
    assert r.exit_code == 0 and "CORRUPT LINE" in r.output and "run one" in r.output


def test_two_runs_at_once_leave_one_valid_json_line_each(env):
    t = env["tmp"]
    steps = [sh(f"s{i}", "true") for i in range(6)]
    a, b = _pb(t, steps, name="par-a", file="a.yaml"), _pb(t, steps, name="par-b", file="b.yaml")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pdctl", "run", str(x), "--json"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for x in (a, b)
    ]
    for pr in procs:
        out, err = pr.communicate(timeout=120)
        assert pr.returncode == 0, err
        json.loads(out)
    recs = [x for x in _audit(env) if x["result"] != "started"]
    assert sorted(r["action"] for r in recs) == ["run par-a", "run par-b"]
