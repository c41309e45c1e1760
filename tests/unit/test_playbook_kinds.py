"""The step-kind registry (one self-registering module per kind), the wait kind's loops on a fake clock, the layer
names a verify step accepts, and a step outcome's JSON shape. Pure: no deployment, no process."""

from __future__ import annotations

import dataclasses
import functools
import pkgutil
from types import SimpleNamespace

import pytest

from pdctl.errors import StepFailed, UsageError
from pdctl.playbook import kinds
from pdctl.playbook.kinds import REGISTRY, register
from pdctl.playbook.outcome import Args, RunContext, StepOutcome
from pdctl.playbook.run_audit import recorded_step
from pdctl.playbook.runner import StepRun
from pdctl.playbook.steps import check_args
from pdctl.poll import poll_until
from pdctl.serialize import to_data


def test_every_module_of_the_package_registers_its_kind_in_listing_order():
    modules = sorted(m.name for m in pkgutil.iter_modules(kinds.__path__))
    assert sorted(REGISTRY) == modules
    assert list(REGISTRY) == ["verify", "restart", "deploy", "storm", "triage", "inflight", "wait", "shell"]
    for name, kind in REGISTRY.items():
        assert kind.name == name and kind.run.__module__ == f"pdctl.playbook.kinds.{name}"
        assert kind.summary and kind.gate_keys[0] == "ok"


def test_register_returns_the_function_and_refuses_a_name_taken_by_another_module():
    class PingArgs(Args):
        host: str = "h"

    def run(ctx, a):
        return StepOutcome(True, f"pinged {a.host}")

    try:
        assert register("ping", args=PingArgs, gate_keys=("ok",), mutating=False, summary="one echo")(run) is run
        assert REGISTRY["ping"].describe(PingArgs(host="x")) == "ping host=x"  # the default description
        assert REGISTRY["ping"].describe(PingArgs()) == "ping"
    finally:
        REGISTRY.pop("ping", None)
    with pytest.raises(ValueError, match="registered twice"):
        register("verify", args=PingArgs, gate_keys=("ok",), mutating=False, summary="")(run)
    assert REGISTRY["verify"].args.__name__ == "VerifyArgs"


def test_a_bad_layer_is_refused_naming_it_and_listing_every_layer():
    """The words of a `layers_pass` gate and of `--layer`: the layer named, every known one listed in order."""
    bad = check_args(REGISTRY["verify"], {"layers": ["health", "vibes"]}, with_values=True)
    assert bad == [
        (
            "args.layers.1",
            "unknown layer 'vibes' (choose from health, e2e, transfer, flags, lineage, inflight, pairs, outputs)",
        )
    ]
    assert check_args(REGISTRY["verify"], {"layers": ["inflight"]}, with_values=True) == []


def test_wait_until_names_the_non_waitable_action_and_the_polled_steps_fields():
    wait = REGISTRY["wait"]
    assert check_args(wait, {"until": {"action": "restart"}}, with_values=False) == [
        ("args.until.action", "expected a check to poll (verify, inflight, triage, shell), got 'restart'")
    ]
    assert [
        f
        for f, _ in check_args(
            wait,
            {"until": {"action": "shell", "args": {"x": 1}, "gate": {"verdict": "a"}}, "bogus": 1},
            with_values=False,
        )
    ] == ["args.bogus", "args.until.args.x", "args.until.gate.verdict"]


class Clock:
    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t

    def sleep(self, s):
        self.t += s


@pytest.fixture
def fake_time(monkeypatch):
    """The wait kind's poll_until on a fake clock; every shell try takes 0.1 s and answers from `answers`."""
    from pdctl.playbook.kinds import wait

    c = Clock()
    monkeypatch.setattr(wait, "poll_until", functools.partial(poll_until, clock=c.now, sleep=c.sleep))
    answers: list = []

    def run(ctx, a):
        c.t += 0.1
        x = answers.pop(0) if answers else False
        if isinstance(x, Exception):
            raise x
        return StepOutcome(x, f"exit {0 if x else 1} on localhost")

    monkeypatch.setitem(REGISTRY, "shell", dataclasses.replace(REGISTRY["shell"], run=run))
    waits: list = []
    progress = SimpleNamespace(waiting=lambda what, elapsed, limit, detail=None: waits.append((what, elapsed, limit)))
    return SimpleNamespace(clock=c, answers=answers, waits=waits, ctx=RunContext(SimpleNamespace(progress=progress)))


def _wait(ft, **args):
    kind = REGISTRY["wait"]
    return kind.run(ft.ctx, kind.convert(args))


UNTIL = {"action": "shell", "args": {"role": "decode", "command": "true"}}


def test_wait_until_passes_and_counts_its_tries(fake_time):
    fake_time.answers[:] = [False, StepFailed("not yet"), True]
    out = _wait(fake_time, until=UNTIL, interval=1, timeout=10)
    assert out.ok and out.summary == "shell passed after 2.3s (3 tries): action ok (exit 0 on localhost)"
    assert [w[0] for w in fake_time.waits] == ["shell to pass"] * 2  # progress between the tries


def test_wait_until_times_out_having_looked_once_more_at_the_deadline(fake_time):
    out = _wait(fake_time, until=UNTIL, interval=0.4, timeout=1)
    # tries start at 0, 0.5, 1.0 (the last sleep is cut to the deadline); no try starts after it
    assert not out.ok and out.exit_code == 1
    assert out.summary == (
        "shell did not pass within the wait timeout of 1s (3 tries); last: action not ok (exit 1 on localhost)"
    )
    assert out.data["last"] == {"ok": False, "summary": "exit 1 on localhost"}


def test_wait_until_stops_at_a_misuse(fake_time):
    fake_time.answers[:] = [UsageError("no baseline recorded")]
    with pytest.raises(UsageError):
        _wait(fake_time, until=UNTIL)


def test_a_fixed_wait_shows_progress_until_the_time_has_passed(fake_time):
    out = _wait(fake_time, seconds=1.2)
    assert out.ok and out.summary == "waited 1.2s" and abs(fake_time.clock.t - 1.2) < 1e-9
    assert [round(w[1], 3) for w in fake_time.waits] == [0.0, 0.5, 1.0] and fake_time.waits[0][:1] == ("1.2s to pass",)


def test_an_outcome_serialises_without_empty_values_and_trims_a_commands_output():
    o = StepOutcome(
        False,
        "s",
        exit_code=3,
        verdict="v",
        layers={"a": True},
        exit_status=2,
        stdout="x" * 3000,
        data={"k": 1},
        error="boom",
        health=object(),
    )
    d = to_data(o)
    assert list(d) == ["ok", "summary", "verdict", "layers", "exit_status", "error", "stdout", "data"]
    assert len(d["stdout"]) == 2000 and "exit_code" not in d and "health" not in d
    assert "data" not in recorded_step(StepRun(1, "s", "shell", "failed", outcome=o))["result"]  # the audit record's
    assert to_data(StepOutcome(True, "")) == {"ok": True}
    assert "stdout" not in to_data(StepOutcome(True, "ran", stdout="out"))  # not a command: no output shown
