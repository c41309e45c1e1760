"""More screens at 60, 80 and 120 columns, pass and fail (issue 10, "How it is shown"): verify pairs, deploy,
restart (--pair and --rolling), down, render, lint, a playbook run, the watch, the kept SSH connections, history with
long records, and the xPyD screens at 60. Each failed check's name, expected and found are on the screen, nothing is
wider than the terminal and no identifier is cut. Content assertions on typed results rendered through pdctl.render,
or the CLI through typer's CliRunner with the deployment faked where one would be needed."""

from __future__ import annotations

import contextlib

import pytest
from typer.testing import CliRunner

from pdctl import render
from pdctl.checks.pairs import LegAnswer, judge_matrix, judge_pair
from pdctl.checks.result import CheckResult, Status
from pdctl.cli.app import app
from pdctl.errors import HazardRefused, StepFailed
from pdctl.ops.sequence import StepRecord
from pdctl.ops.verify import HealthReport
from tests.unit.test_screen_widths import (
    DECODE,
    FLAG,
    PREFILL,
    ROUTER,
    assert_fits_and_intact,
    assert_value_shown,
    screen,
    width,  # noqa: F401  (the fixture, named as a parameter)
)

H_P = "gpu-pf-01.us-east-2.compute.internal"  # long host names: a label is 52-53 characters
H_D = "gpu-dc-02.us-east-2.compute.internal"
LONG_ARG = "--json-model-override-args"
LONG_VALUE = '{"rope_scaling":{"type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}'


def label(role: str, i: int) -> str:
    return f"{role}[{i}]@{H_P if role == 'prefill' else H_D}:{30000 + 2 * i + (role == 'decode')}"


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)


def cli(monkeypatch, module: str, *args: str):
    """`pdctl ARGS` with the command module's deployment faked (the op under it is patched by the caller)."""
    import importlib

    monkeypatch.setattr(
        importlib.import_module(f"pdctl.cli.{module}"), "open_deployment", lambda *a, **k: contextlib.nullcontext(None)
    )
    return CliRunner().invoke(app, list(args))


def no_line_wider(lines: list[str], width: int) -> None:
    assert all(len(x.rstrip()) <= width for x in lines), [x for x in lines if len(x.rstrip()) > width]


# -- verify pairs ---------------------------------------------------------------------------------------------

OK_BODY = {"text": "The capital of France is Paris, a city of", "meta_info": {"completion_tokens": 8}}


def pairs_report(n: int, broken=(), hazard=()):
    from pdctl.ops.pairs import PairsReport

    results = []
    for i in range(n):
        for j in range(n):
            p = LegAnswer(200, {"text": ""}, ms=30.0)
            d = (
                LegAnswer(200, OK_BODY, ms=212.0)
                if (i, j) not in broken
                else LegAnswer(error="no response within 4.0s (read timeout)")
            )
            r = judge_pair(
                i, j, 1000 + n * i + j, p, d, ["aborted rid canary-1001 on both"] if (i, j) in broken else None
            )
            r.lineage_hazard = "decode-restarted-alone" if (i, j) in hazard else None
            results.append(r)
    return PairsReport(
        "prod.yaml",
        20.0,
        4321.0,
        [label("prefill", i) for i in range(n)],
        [label("decode", j) for j in range(n)],
        results,
        judge_matrix(results, n, n),
    )


def test_verify_pairs_all_pass(width, capsys):
    render.pairs_report(pairs_report(2))
    lines = screen(capsys)
    assert lines[0] == "verify pairs: PASS (4 of 4 pairs pass)"
    assert_fits_and_intact(
        lines,
        width,
        ["prefill[0]", "prefill[1]", "decode[0]", "decode[1]", "pass 212ms", label("prefill", 0), label("decode", 1)],
    )
    assert "failed pairs" not in "\n".join(lines) and "next:" not in "\n".join(lines)


@pytest.mark.parametrize("columns", ["30", "0"])
def test_verify_pairs_on_a_very_narrow_or_unsized_terminal(columns, monkeypatch, capsys):
    """30 columns: the passing verdict (it names no pair) crashed the screen with a ValueError; 0 (an unsized pty):
    rich printed nothing at all."""
    monkeypatch.setenv("COLUMNS", columns)
    render.pairs_report(pairs_report(2))
    lines = screen(capsys)
    assert "".join(lines[:2]).replace(" ", "").startswith("verifypairs:PASS(4of4pairspass)"), lines
    assert any("decode[1]" in line for line in lines)


def test_verify_pairs_a_broken_pair_and_a_lineage_hazard(width, capsys):
    render.pairs_report(pairs_report(2, broken={(0, 1)}, hazard={(1, 0)}))
    lines = screen(capsys)
    text = "\n".join(lines)
    assert lines[0].startswith("verify pairs: FAIL (1 of 4 pair(s) failed")
    assert len(lines) <= 23, text  # one screen, the prompt below it
    assert_fits_and_intact(
        lines,
        width,
        ["prefill[0] -> decode[1]", "prefill[1] -> decode[0]", "FAIL", "decode-restarted-alone", "also: pdctl triage"],
    )
    # the broken pair: one line with what was found, then what was expected
    failed = text[text.index("failed pairs") :]
    assert failed.index("prefill[0] -> decode[1]") < failed.index("no response") < failed.index("expected:")
    assert_value_shown(lines, "HTTP 200 from both, decode content non-empty and varied")
    assert_value_shown(lines, "decode: no response within 4.0s (read timeout)")
    assert any("prefill[1] -> decode[0]" in x and "decode-restarted-alone" in x for x in lines), text
    # the verdict and the heal first and last
    assert lines[-1].startswith("verify pairs: FAIL -- next:") or lines[-2].startswith("verify pairs: FAIL -- next:")
    assert "--first-pair 0:1" in " ".join(lines[-2:])
    # -v: each failed pair's room and what was aborted, and which host each row and column is
    render.pairs_report(pairs_report(2, broken={(0, 1)}, hazard={(1, 0)}), verbose=True)
    full = screen(capsys)
    assert_fits_and_intact(full, width, ["room:", "1001", "aborted rid canary-1001 on both", label("decode", 1)])
    assert "not shown to fit the screen" not in "\n".join(full)


def test_verify_pairs_names_the_heal_with_the_failed_pairs_first(width, capsys):
    """After triage, the restart that heals: on xPyD `restart --rolling` with each failed pair as `--first-pair`,
    wrapped between options (an option is never cut from its value); the four pairs that failed alike are one
    cause line (the verdict names them)."""
    render.pairs_report(pairs_report(3, broken={(0, 1), (2, 0), (2, 2), (1, 1)}))
    lines = screen(capsys)
    text = "\n".join(lines)
    assert len(lines) <= 23, text
    assert_fits_and_intact(
        lines,
        width,
        ["next: pdctl restart --rolling", *(f"--first-pair {p}" for p in ("0:1", "1:1", "2:0", "2:2"))],
    )
    assert [x for x in lines if x.startswith("FAIL")] == [
        next(x for x in lines if x.startswith("FAIL  all 4 failed pairs: decode: no response"))
    ]
    heal = text[text.index("next: pdctl restart") : text.index("pairs (rows")]
    assert [heal.index(f"--first-pair {p}") for p in ("0:1", "1:1", "2:0", "2:2")] == sorted(
        heal.index(f"--first-pair {p}") for p in ("0:1", "1:1", "2:0", "2:2")
    )


def test_verify_pairs_passing_names_no_heal(capsys):
    render.pairs_report(pairs_report(2))
    assert "to heal" not in "\n".join(screen(capsys))


def test_verify_pairs_3x3_matrix_at_60(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "60")
    render.pairs_report(pairs_report(3, broken={(2, 1)}))
    lines = screen(capsys)
    assert lines[0].startswith("verify pairs: FAIL (1 of 9 pair(s) failed")
    assert_fits_and_intact(lines, 60, [f"decode[{j}]" for j in range(3)] + ["prefill[2] -> decode[1]"])
    rows = {
        i: [x for x in lines if x.startswith(f"prefill[{i}]  ") or x.startswith(f"prefill[{i}] ")] for i in range(3)
    }
    for i in range(3):  # one matrix row per prefill, every decode column on it
        row = rows[i][0]
        assert row.count("pass") + row.count("FAIL") == 3, row
    assert "FAIL" in rows[2][0] and rows[2][0].index("FAIL") > rows[2][0].index("pass")


# -- deploy ---------------------------------------------------------------------------------------------------


def deploy_plan(changed: bool = True):
    from pdctl.ops.deploy import DeployPlan, RolePlan

    roles = []
    for role, i in (("prefill", 0), ("decode", 0), ("router", 0)):
        argv = [
            "/opt/sglang/venv/bin/python",
            "-m",
            "sglang.launch_server",
            "--port",
            str(30000 + i),
            LONG_ARG,
            LONG_VALUE,
        ]
        changes = (
            [f"{LONG_ARG}: -{{}} +{LONG_VALUE}", "--mem-fraction-static: -0.9 +0.85"]
            if changed and role != "router"
            else []
        )
        roles.append(
            RolePlan(
                label(role, 0),
                role,
                0,
                f"pdctl-prod-{role}-0",
                argv,
                {"HF_TOKEN": "hf_secret"},
                bool(changes),
                True,
                changes,
                argv[0],
                "inventory",
            )
        )
    why = "changed: " + ", ".join(r.label for r in roles if r.changed)
    return DeployPlan(roles, "co-restart" if changed else "none", why if changed else "every role is installed")


def test_deploy_plan_names_each_roles_changes(width, capsys):
    render.deploy_plan(deploy_plan())
    lines = screen(capsys)
    text = "\n".join(lines)
    assert "hf_secret" not in text
    for r in deploy_plan().roles:
        assert any(r.label in x for x in lines) and any(r.service in x for x in lines), r.label
    assert text.count("change: --mem-fraction-static: -0.9 +0.85") == 2
    assert "action: co-restart" in text and label("decode", 0) in text
    # the command line stays one line on purpose (copied, grepped), as in `pdctl render`
    assert any(x.startswith("  /opt/sglang/venv/bin/python -m sglang.launch_server") and LONG_VALUE in x for x in lines)


def test_deploy_plan_prose_fits_and_a_change_value_is_whole(width, capsys):
    render.deploy_plan(deploy_plan())
    lines = [x for x in screen(capsys) if not x.startswith("  /opt/")]
    assert any(LONG_VALUE in x for x in lines)
    no_line_wider([x for x in lines if LONG_VALUE not in x], width)


def deploy_cli(monkeypatch, result, *args):
    from pdctl.ops import deploy

    monkeypatch.setattr(deploy, "deploy", lambda dep, **kw: result)
    return cli(monkeypatch, "deploy", "deploy", *args)


def test_deploy_dry_run_output(width, monkeypatch):
    from pdctl.ops.deploy import DeployResult

    r = deploy_cli(monkeypatch, DeployResult(deploy_plan()), "--dry-run")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert_fits_and_intact(lines[:1], width, [])
    assert any(label("prefill", 0) in x for x in lines) and "from the hosts:" in r.stdout
    assert "action: co-restart (changed:" in r.stdout


def steps_after(roles=("prefill", "decode", "router")) -> list[StepRecord]:
    out = [StepRecord(f"stop {label('decode', 0)} (until the prefills are back)", 2.1, True)]
    for role in roles:
        out += [
            StepRecord(f"restart {label(role, 0)} (pdctl-prod-{role}-0)", 1.5, True),
            StepRecord(f"wait {label(role, 0)} ready", 48.25, True),
        ]
    return out


def test_deploy_steps_after_a_run(width, monkeypatch):
    from pdctl.ops.deploy import DeployResult

    health = HealthReport(
        "prod.yaml",
        {"health": [CheckResult("health", r, "/health", Status.PASS, "200", "200") for r in (PREFILL, DECODE, ROUTER)]},
    )
    r = deploy_cli(monkeypatch, DeployResult(deploy_plan(), steps_after(), health))
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("deploy: co-restarted prefill -> decode -> router")
    table = lines[lines.index(next(x for x in lines if x.strip().startswith("steps"))) :]
    assert_fits_and_intact(table, width, [label(r, 0) for r in ("prefill", "decode", "router")] + ["48.2"])
    assert "final-health: PASS" in r.stdout


def failed_step(step: str) -> StepFailed:
    states = {
        label("prefill", 0): "running (pid 4242, up 12s)",
        label("decode", 0): "stopped (exit 1)",
        label("router", 0): "running (pid 4343, up 86400s)",
    }
    msg = "\n".join(
        [
            f"stopped at step '{step}': not ready after 600s: GET /health: 503",
            "steps completed: " + ", ".join(s.step for s in steps_after(("prefill",))),
            "state of each role now:",
        ]
        + [f"  {k}: {v}" for k, v in states.items()]
    )
    return StepFailed(msg, hint="fix the cause, then run `pdctl restart --pair` to restart in order")


@pytest.mark.parametrize("command", ["deploy", "restart"])
def test_a_failed_step_says_where_it_stopped_and_each_roles_state(width, monkeypatch, command):
    from pdctl.ops import deploy, restart

    def fail(dep, **kw):
        raise failed_step(f"wait {label('decode', 0)} ready")

    monkeypatch.setattr(deploy if command == "deploy" else restart, command, fail)
    r = cli(monkeypatch, command, command, *(["--pair"] if command == "restart" else []))
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    no_line_wider(lines, width)
    assert lines[0].startswith("error: stopped at step 'wait")
    for lab, state in (
        (label("prefill", 0), "running (pid 4242"),
        (label("decode", 0), "stopped (exit 1)"),
        (label("router", 0), "running (pid 4343"),
    ):
        assert any(x.strip().startswith(lab + ":") for x in lines), (lab, r.stderr)
        assert state in " ".join(x.strip() for x in lines)
    assert any(x.startswith("hint: ") for x in lines) and "`pdctl restart --pair`" in r.stderr


# -- restart --pair and --rolling -----------------------------------------------------------------------------


def test_restart_pair_steps_and_final_health(width, monkeypatch):
    from pdctl.ops import restart
    from tests.unit.test_screen_widths import health

    res = restart.RestartResult(restart.PAIR, False, [], steps_after(), health(failed=True))
    monkeypatch.setattr(restart, "restart", lambda dep, **kw: res)
    r = cli(monkeypatch, "restart", "restart", "--pair")
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert_fits_and_intact(
        lines,
        width,
        [label(x, 0) for x in ("prefill", "decode", "router")] + [FLAG, "(expected 8998)", "9999"],
    )
    assert lines.index(next(x for x in lines if x.startswith("final-health: FAIL"))) > max(
        i for i, x in enumerate(lines) if "ready" in x
    )


def test_restart_pair_dry_run_plan(width, monkeypatch):
    from pdctl.ops import restart

    plan = (
        [f"stop {label('decode', 0)} (until the prefills are back)"]
        + [
            x
            for role in restart.PAIR
            for x in (f"restart {label(role, 0)} (pdctl-prod-{role}-0)", f"wait {label(role, 0)} ready")
        ]
        + ["final-health"]
    )
    monkeypatch.setattr(restart, "restart", lambda dep, **kw: restart.RestartResult(restart.PAIR, True, plan))
    r = cli(monkeypatch, "restart", "restart", "--pair", "--dry-run")
    assert r.exit_code == 0, r.output
    assert_plan(r.stdout.splitlines(), width, plan)


def assert_plan(lines: list[str], width: int, plan: list[str]) -> None:
    """A numbered plan: each step starts its own line with its number, wraps at spaces under itself, and no
    identifier is cut."""
    assert lines[lines.index("plan:") + 1].lstrip().startswith("1. ")
    assert_fits_and_intact(lines, width, [w.rstrip(":") for s in plan for w in s.split() if "@" in w])
    text = "\n".join(lines)
    for k, step in enumerate(plan, 1):
        starts = [i for i, x in enumerate(lines) if x.lstrip().startswith(f"{k}. ")]
        assert len(starts) == 1, (k, text)
        i = starts[0]
        following = [
            x for x in lines[i + 1 : i + 4] if x.startswith(" " * (len(lines[i]) - len(lines[i].lstrip()) + 3))
        ]
        assert " ".join(step.split()) in " ".join(" ".join([lines[i].split(". ", 1)[1]] + following).split()), (
            step,
            text,
        )


def test_restart_pair_refused_names_the_hazard(width, monkeypatch):
    from pdctl.ops import restart

    def refuse(dep, **kw):
        raise HazardRefused(
            f"refused: restarting decode while {label('prefill', 0)} runs on leaves the KV bootstrap "
            "of the pair degraded (decode-restarted-alone: the seed's decode-only restarts, after "
            "which transfers fail silently while /health stays green)",
            hint="run `pdctl restart --pair`, or pass --override-hazard",
        )

    monkeypatch.setattr(restart, "restart", refuse)
    r = cli(monkeypatch, "restart", "restart", "--role", "decode")
    assert r.exit_code == 4, r.output
    lines = r.stderr.splitlines()
    assert_fits_and_intact(
        lines, width, [label("prefill", 0), "decode-restarted-alone", "--override-hazard", "`pdctl restart --pair`,"]
    )
    assert lines[0].startswith("error: refused: restarting decode")


def rolling_result(dry_run: bool = True, stopped: bool = False):
    from types import SimpleNamespace

    from pdctl.checks.rolling import UnitState, form_units
    from pdctl.ops.rolling import RollingResult, rolling_plan

    units = [UnitState(u) for u in form_units(2, 2)]
    res = RollingResult(dry_run, rolling_plan(SimpleNamespace(inv=SimpleNamespace(label=label)), units), units)
    if stopped:
        units[0].state, units[1].state = "done", f"failed at wait {label('decode', 1)} ready"
        units[1].out = [label("decode", 1)]
        units[1].detail = f"{label('decode', 1)} stays out of the routers: it was restarted and is not ready"
        res.steps = [StepRecord(f"unit 1: {s.step}", s.seconds, True) for s in steps_after(("prefill", "decode"))]
        res.stopped = failed_step(f"unit 2: wait {label('decode', 1)} ready").message
    return res


def test_rolling_dry_run_plan_with_long_host_names(width, capsys):
    from pdctl.render.rolling import rolling_report

    res = rolling_result()
    res.order = (
        f"these go first (decodes out in unit 1, prefills rolled first): the restart lineage calls broken: "
        f"{label('prefill', 0)} -> {label('decode', 1)} (degraded-bootstrap)"
    )
    rolling_report(res)
    lines = screen(capsys)
    assert lines[0] == "restart --rolling: PLAN (2 units; nothing was changed)"
    assert_plan(lines, width, res.plan)
    assert_fits_and_intact(lines, width, ["order: these", label("prefill", 0), label("decode", 1)])


def test_rolling_stopped_says_which_unit_and_what_is_out(width, capsys):
    from pdctl.render.rolling import rolling_report

    rolling_report(rolling_result(dry_run=False, stopped=True))
    lines = screen(capsys)
    assert lines[0] == "restart --rolling: STOPPED (1 of 2 units done)"
    assert_fits_and_intact(
        lines,
        width,
        ["unit 1", "unit 2", label("decode", 1), label("prefill", 0), "next: ", "`pdctl restart --rolling`"],
    )
    assert_value_shown(lines, "stays out of the routers: it was restarted and is not ready")


# -- down -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dry_run", [False, True])
def test_down_steps_and_plan(width, monkeypatch, dry_run):
    from pdctl.ops import lifecycle

    stops = [f"stop {label(r, 0)} (pdctl-prod-{r}-0)" for r in ("router", "decode", "prefill")]
    out = stops if dry_run else [StepRecord(s, 3.25, True) for s in stops]
    monkeypatch.setattr(lifecycle, "down", lambda dep, **kw: out)
    r = cli(monkeypatch, "lifecycle", "down", *(["--dry-run"] if dry_run else []))
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    if dry_run:
        assert_plan(lines, width, stops)
    else:
        assert_fits_and_intact(lines, width, [label(x, 0) for x in ("router", "decode", "prefill")] + ["3.2", "ok"])


def test_verify_pairs_heal_is_left_out_while_a_pair_is_unknown_and_named_for_a_hazard(capsys):
    """A failed pair beside an unknown one: triage only (restart --rolling would stop at the host that did not
    answer; the watch's heal refuses too). Hazards alone: their restart, the same in JSON as on screen."""
    rep = pairs_report(2, broken={(0, 1)})
    rep.pairs[3].status = "unknown"
    rep.verdict = judge_matrix(rep.pairs, 2, 2)
    assert rep.next_steps == ["pdctl triage (which failure, and what to do about it)"]
    marked = pairs_report(2, hazard={(1, 0)})
    assert marked.next_steps == ["pdctl restart --rolling --first-pair 1:0"]
    render.pairs_report(marked)
    assert "next: pdctl restart --rolling --first-pair 1:0" in screen(capsys)
