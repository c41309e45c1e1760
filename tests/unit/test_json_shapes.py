"""The `--json` documents (and the typed parts audit records carry) keep their keys and values: each report type,
built from representative typed inputs, serialises to exactly the structure pinned in
fixtures/json_shapes.json (keys, nesting, values and value types: an int stays an int, a list a list).

The pinned file was written by the per-class `to_dict` code these reports had before they serialised through
`pdctl.serialize.to_data`; `python3 tests/unit/test_json_shapes.py` rewrites it, for a deliberate change of a
document only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.checks.inflight import InflightVerdict, Point
from pdctl.checks.lineage import PairHazard
from pdctl.checks.lint_report import LintReport
from pdctl.checks.lint_rules import Finding as LintFinding
from pdctl.checks.outputs import Answer, judge_outputs, judge_pair_output, judge_pd_use, judge_session
from pdctl.checks.pairs import PairResult, judge_matrix
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.rolling import Unit, UnitState
from pdctl.checks.storm import RequestOutcome, judge_hits, judge_watch
from pdctl.ops.deploy import DeployPlan, DeployResult, RolePlan
from pdctl.ops.inflight import InflightReport
from pdctl.ops.outputs import OutputsReport, OutputsSettings
from pdctl.ops.pairs import PairsReport
from pdctl.ops.render_plan import RenderedRole, RenderPlan
from pdctl.ops.restart import RestartResult
from pdctl.ops.rolling import RollingResult
from pdctl.ops.sequence import StepRecord
from pdctl.ops.storm import StormReport
from pdctl.ops.storm_plan import Calibration
from pdctl.ops.verify import HealthReport
from pdctl.playbook.outcome import StepOutcome
from pdctl.serialize import to_data
from tests.unit.xpyd_reports import health_4x4, triage_4x4

PINNED = Path(__file__).parent / "fixtures" / "json_shapes.json"
REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-shape-secret-1234"


def document(obj):
    """What a command emits for `obj` (this test pinned the documents the per-class to_dict code made, before it
    was removed)."""
    return to_data(obj)


def _check(name: str) -> CheckResult:
    return CheckResult(
        "health",
        "decode[0]@gpu2:30002",
        name,
        Status.FAIL,
        observed="HTTP 503",
        expected="HTTP 200",
        detail="observed: 503",
        data={"ms": 12.5, "codes": (503,)},
        next_step="pdctl restart --pair",
    )


def _health() -> HealthReport:
    return HealthReport("prod.yaml", {"health": [_check("/health")], "e2e": []})


def _points() -> list[Point]:
    busy = {"sglang:num_prefill_inflight_queue_reqs": 1.0, "sglang:num_decode_transfer_queue_reqs": 0.0}
    return [
        Point(
            t,
            dict(busy),
            100.0,
            {"prefill[0]": dict(busy), "decode[0]": {}},
            {"decode[0]": {"transfer_failed": 0.0, "bootstrap_failed": 0.0, "aborted": 1.0}},
            {"decode[0]": 10.0},
            prefill_rooms=1.0,
            decode_rooms=0.0,
        )
        for t in (0.0, 1.0)
    ]


def inflight() -> InflightReport:
    v = InflightVerdict(
        "pinned",
        1.0,
        1.0,
        True,
        2,
        {"a": 1.0},
        {"a": 1.0},
        0.0,
        0,
        1.0,
        1.0,
        notes=["n"],
        pinned_by="no progress",
        balance_median=1.0,
    )
    return InflightReport(1.0, 0.5, _points(), v, notes=["a note"], t0=5.0, extended_to_s=2.0)


def inflight_unjudged() -> InflightReport:
    return InflightReport(1.0, 0.5, [], None, partial=True)


def triage():
    rep = triage_4x4()
    rep.facts.window_s = 5.0
    return rep


def storm() -> StormReport:
    outcomes = [
        RequestOutcome(0, 0.0, 0.5, 200, first_token_s=0.7, aborted_s=0.5),
        RequestOutcome(1, 0.2, 0.5, 200, finished_s=0.3),
        RequestOutcome(2, 0.4, 0.5, error="not sent: stopped"),
    ]
    calib = Calibration([0.8, 1.0], 0.2, 0.5, notes=["calibrated"])
    pts = _points() + [
        Point(
            2.5,
            {"sglang:num_prefill_inflight_queue_reqs": 1.0},
            100.0,
            {"prefill[0]": {"sglang:num_prefill_inflight_queue_reqs": 1.0}},
            {},
            {},
        )
    ]
    verdict = judge_watch([(0.0, 1.0, 100.0), (0.5, 1.0, 100.0)], 0.5)
    return StormReport(
        config={"requests": 3, "target": "transfer-window"},
        router="http://r:30001",
        calibration=calib,
        window=(0.4, 0.6),
        spacing_s=0.25,
        points=pts,
        load_started_at=0.5,
        load_stopped_at=2.0,
        outcomes=outcomes,
        hits=judge_hits(outcomes, (0.4, 0.6)),
        verdict=verdict,
        holders={"prefill[0]": {"sglang:num_prefill_inflight_queue_reqs": 1.0}},
        notes=["n"],
        t0=3.0,
    )


def storm_empty() -> StormReport:
    return StormReport(config={}, router="http://r:30001", partial=True)


def _steps() -> list[StepRecord]:
    return [StepRecord("restart decode[0]", 1.25, True), StepRecord("wait decode[0] ready", 3.0, False, "timeout")]


def rolling() -> RollingResult:
    units = [
        UnitState(Unit(0, (0,), (0, 1)), "done"),
        UnitState(Unit(1, (1, 2), (0, 1)), "failed at drain", "why", ["decode[1]"]),
    ]
    return RollingResult(
        False, ["plan line"], units, _steps(), _health(), ["w"], stopped="stopped: why", stopped_exit=3
    )


def render_plan() -> RenderPlan:
    role = RenderedRole(
        "prefill[0]@gpu1:30000",
        "prefill",
        0,
        "gpu1",
        "pd-prefill-0",
        "systemd",
        "/usr/bin/python3",
        "inventory",
        ["python3", "--port", "30000"],
        {"A": "1"},
        "/etc/systemd/system/x.service",
        "[Unit]\n",
        None,
        problem="",
    )
    return RenderPlan("prod.yaml", [role])


def _role_plan() -> RolePlan:
    return RolePlan(
        "decode[0]@gpu2:30002",
        "decode",
        0,
        "pd-decode-0",
        ["python3", "--api-key", SECRET],
        {"SGLANG_API_KEY": SECRET, "PLAIN": "x"},
        True,
        False,
        ["argv changed"],
        "python3",
        "inventory",
    )


def deploy_plan() -> DeployPlan:
    return DeployPlan([_role_plan()], "co-restart", "argv changed")


def deploy_result() -> DeployResult:
    return DeployResult(deploy_plan(), _steps(), _health(), ["w"])


def outputs() -> OutputsReport:
    ref = Answer(200, [1, 2, 3], "abc")
    sessions = [
        judge_session(0, "router[0]", [ref], [ref], 8, False),
        judge_session(1, "router[0]", [ref], [Answer(200, [1, 9, 9], "a!!")], 8, False),
    ]
    pair = judge_pair_output("prefill[0] -> decode[0]", ref, ref, "", 8)
    pd = judge_pd_use(2, {"prefill[0]": 1.0}, {"prefill[0]": 3.0})
    verdict = judge_outputs(sessions, [pair], pd, concurrency=2, overlap_on=True)
    return OutputsReport("prod.yaml", OutputsSettings(sessions=2, timeout_s=30.0), 1.5, sessions, [pair], pd, verdict)


def pairs() -> PairsReport:
    results = [
        PairResult(
            0,
            0,
            "prefill[0] -> decode[0]",
            "pass",
            "200",
            "200",
            7,
            kv_transfer_ms=1.5,
            prefill_ms=2.0,
            decode_ms=3.0,
            content="hi",
        ),
        PairResult(0, 1, "prefill[0] -> decode[1]", "fail", "200", "503", 8, aborted=["closed"]),
    ]
    return PairsReport(
        "prod.yaml",
        10.0,
        123.4,
        ["prefill[0]"],
        ["decode[0]", "decode[1]"],
        results,
        judge_matrix(results, 1, 2),
        notes=["n"],
    )


def restart_result() -> RestartResult:
    return RestartResult(("prefill", "decode", "router"), False, ["restart x"], _steps(), _health(), ["w"])


def restart_dry() -> RestartResult:
    return RestartResult(("router",), True, ["restart router[0]"])


def lint_finding() -> LintFinding:
    return LintFinding(
        "flag-unknown",
        "decode[0]",
        "--bogus",
        "unknown flag",
        fix="drop it",
        version="0.5.23",
        data={"near": ["--bogus-x"]},
    )


def lint_report() -> LintReport:
    quiet = LintFinding("flag-abbreviated", "prefill[0]", "--mem", "abbrev", silenced="lab")
    return LintReport([lint_finding(), quiet], roles=[{"label": "decode[0]", "version": "0.5.23"}], seconds=1.5)


def pair_hazard() -> PairHazard:
    return PairHazard("prefill[0]", "decode[0]", "degraded", "start times", after_prefill_s=42.0)


def outcome_shell() -> StepOutcome:
    return StepOutcome(
        False, "exit 3", exit_status=3, stdout="o" * 2100, stderr="e", error=None, data={"k": 1}, exit_code=1
    )


def outcome_check() -> StepOutcome:
    return StepOutcome(
        True, "", verdict="drained", layers={"health": True}, stdout="not a command", recommendation="none", data={}
    )


def outcome_without_data() -> dict:
    o = outcome_shell()
    if hasattr(o, "to_dict"):
        return o.to_dict(with_data=False)
    return {k: v for k, v in to_data(o).items() if k != "data"}  # what the run's audit record keeps


def _plan():
    from pdctl.inventory import load_inventory
    from pdctl.playbook.runner import plan
    from pdctl.playbook.schema import parse_playbook

    pb = parse_playbook(
        {
            "name": "shape",
            "description": "d",
            "vars": {"api_token": SECRET, "n": 2},
            "steps": [
                {
                    "name": "say",
                    "action": "shell",
                    "args": {"role": "decode", "command": "echo ${vars.api_token}"},
                    "gate": {"stdout_contains": SECRET},
                },
                {"name": "fix", "action": "shell", "args": {"role": "decode", "command": "true"}, "handler": True},
                {
                    "name": "later",
                    "action": "shell",
                    "args": {"role": "decode", "command": "true"},
                    "when": "apply",
                    "on_failure": {"run": "fix"},
                },
            ],
        },
        "shape.yaml",
    )
    return plan(pb, load_inventory(REPO / "examples" / "seed-production.yaml"))


def plan_doc():
    return _plan()


def planned_step():
    return _plan().steps[0]


def _run_result():
    from pdctl.playbook.runner import RunResult, StepRun

    p = _plan()
    out = StepOutcome(False, f"said {SECRET}", exit_status=0, stdout=SECRET, data={"x": SECRET})
    steps = [
        StepRun(1, "say", "shell", "failed", 1.23456, "failed: want", 1, outcome=out, gate_brief="x"),
        StepRun(2, "fix", "shell", "passed", 0.5, "ok", 0, handler_of="say", note="n"),
        StepRun(3, "later", "shell", "not run", note="skipped"),
    ]
    return RunResult(
        p,
        steps,
        exit_code=1,
        failed_step="say",
        recommendations=["r"],
        health=_health(),
        health_reports=[_health()],
        run_id="run-1",
    )


def run_result():
    return _run_result()


def step_run():
    return _run_result().steps[1]


def run_audit_record() -> dict:
    """The run's audit record: its steps without their outcomes' data."""
    from pdctl.playbook import runner

    got = {}

    class Audit:
        @staticmethod
        def append(action, **kw):
            got.update(kw["extra"], action=action, args=kw["args"], result=kw["result"])

    r = _run_result()
    runner._audit(Audit, r, 0.0, None, r.plan.secrets)
    return got


def incident() -> dict:
    """`pdctl incident --json`: the write-up of tests/unit/test_incident_writeup.py's records, as written."""
    from pdctl.render.incident_files import Written
    from pdctl.render.incident_screen import incident_json
    from tests.unit.test_incident_writeup import _report

    base = Path("/tmp/incident-local")
    charts = [base.with_name(f"incident-local-{c}.svg") for c in ("queues", "failures", "canaries")]
    return incident_json(_report(), Written(base.with_suffix(".md"), base.with_suffix(".html"), charts))


BUILDERS = {
    f.__name__: f
    for f in (
        _health,
        inflight,
        inflight_unjudged,
        triage,
        storm,
        storm_empty,
        rolling,
        render_plan,
        deploy_plan,
        deploy_result,
        pairs,
        outputs,
        restart_result,
        restart_dry,
        lint_finding,
        lint_report,
        pair_hazard,
        outcome_shell,
        outcome_check,
        outcome_without_data,
        plan_doc,
        planned_step,
        run_result,
        step_run,
        run_audit_record,
        incident,
    )
}
BUILDERS["health_report"] = BUILDERS.pop("_health")
BUILDERS["health_4x4"] = health_4x4
BUILDERS["check_result"] = lambda: _check("/health")


def _serialised(name: str):
    obj = BUILDERS[name]()
    doc = obj if isinstance(obj, dict) else document(obj)
    text = json.dumps(doc)  # what --json prints: fails here if anything is not JSON
    return json.loads(text.replace(json.dumps(str(REPO))[1:-1], "<repo>"))  # the checkout's path is not the shape


def shape(value):
    """The structure with every leaf replaced by its type's name: equality here pins int vs float too."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_document_keeps_its_keys_and_values(name):
    pinned = json.loads(PINNED.read_text())[name]
    got = _serialised(name)
    assert shape(got) == shape(pinned)
    assert got == pinned


def test_every_pinned_document_is_built():
    assert sorted(json.loads(PINNED.read_text())) == sorted(BUILDERS)


def test_no_secret_reaches_a_document():
    for name in ("deploy_plan", "deploy_result", "plan_doc", "planned_step", "run_result", "run_audit_record"):
        assert SECRET not in json.dumps(_serialised(name)), name


if __name__ == "__main__":
    PINNED.write_text(json.dumps({name: _serialised(name) for name in sorted(BUILDERS)}, indent=1) + "\n")
