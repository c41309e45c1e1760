"""ops.inflight.sample_inflight's loop: bounded, and Ctrl-C judges the partial series (reads faked, clock faked)."""

from __future__ import annotations

import re

import pytest

from pdctl.ops import inflight as I
from pdctl.progress import Progress

INF = "sglang:num_prefill_inflight_queue_reqs"


class FakeDep:
    progress = Progress()


def fake_reads(monkeypatch, values, clock):
    it = iter(values)

    def read_point(dep, t0=0.0, *, clock=clock):
        v = next(it)
        return I.Point(
            t=clock() - t0,
            gauges={INF: v},
            generation_tokens=10.0,
            per_worker={"prefill[0]": {INF: v}},
            counters={},
            gen_throughput={},
        )

    monkeypatch.setattr(I, "read_point", read_point)


def test_window_is_sampled_then_judged_pinned_with_holder(monkeypatch):
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    fake_reads(monkeypatch, [1] * 20, clock)

    def sleep(s):
        now[0] += s

    rep = I.sample_inflight(FakeDep(), 6, 2, clock=clock, sleep=sleep)
    assert rep.name == "pinned" and rep.pinned and not rep.partial and rep.exit_code() == 1
    assert 4 <= len(rep.points) <= 6
    assert rep.holders() == {"prefill[0]": {INF: 1}}
    assert "held by prefill[0]" in rep.to_check_results()[0].detail


def test_ctrl_c_stops_and_judges_the_partial_series(monkeypatch):
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    fake_reads(monkeypatch, [1] * 20, clock)
    calls = [0]

    def sleep(s):
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        now[0] += s

    rep = I.sample_inflight(FakeDep(), 30, 3, clock=clock, sleep=sleep)
    assert rep.partial and len(rep.points) == 2 and rep.verdict is not None
    r = rep.to_check_results()[0]
    assert r.status.value == "warn" and "partial" in r.detail  # a partial pin is never a failure


def test_busy_series_is_exit_zero(monkeypatch):
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    fake_reads(monkeypatch, [1, 2, 1, 3, 0, 2, 1, 1, 1], clock)
    rep = I.sample_inflight(FakeDep(), 6, 1, clock=clock, sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert rep.name == "busy" and rep.exit_code() == 0


def test_bad_window_is_refused():
    with pytest.raises(ValueError):
        I.sample_inflight(FakeDep(), 0, 1)


def test_final_health_layer_reraises_ctrl_c(monkeypatch):
    """An interrupted window is no verdict: the final-health layer lets the CLI exit 130 (as `verify inflight`)
    instead of softening a partial FAIL to WARN and exiting 0."""
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    fake_reads(monkeypatch, [1] * 20, clock)
    real = I.sample_inflight

    def interrupted_sampling(dep, window_s, interval_s, **_preflight):
        def sleep(s):
            raise KeyboardInterrupt

        return real(dep, window_s, interval_s, clock=clock, sleep=sleep)

    monkeypatch.setattr(I, "sample_inflight", interrupted_sampling)
    with pytest.raises(KeyboardInterrupt):
        I.inflight_layer(FakeDep(), 30, 3)


def test_final_health_layer_judges_a_full_window(monkeypatch):
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    fake_reads(monkeypatch, [1] * 20, clock)
    real = I.sample_inflight
    monkeypatch.setattr(
        I,
        "sample_inflight",
        lambda dep, w, i, **_preflight: real(dep, w, i, clock=clock, sleep=lambda s: now.__setitem__(0, now[0] + s)),
    )
    (r,) = I.inflight_layer(FakeDep(), 6, 2)
    assert r.status.value == "fail" and "held by prefill[0]" in r.detail


@pytest.mark.parametrize(
    "window, interval, bad",
    [
        (0, 1, "--window 0"),
        (5, 0, "--interval 0"),
        (-1, -1, "--window -1"),
        (2, 3, "--interval 3"),
        (float("inf"), 1, "--window inf"),
        (5, float("nan"), "--interval nan"),
        (1e9, 1, "--window 1e+09"),
    ],
)
def test_window_and_interval_are_checked_once_for_both_commands(window, interval, bad):
    from pdctl.cli import inflight, triage
    from pdctl.errors import UsageError

    assert triage.check_window is inflight.check_window
    with pytest.raises(UsageError, match=re.escape(bad)):
        inflight.check_window(window, interval, 3.0)
    assert inflight.check_window(6, 2, 3.0) == 2


def test_an_interval_not_given_is_the_default_or_the_window_when_shorter():
    """`verify inflight --window 2` was refused for an --interval 3 the operator never gave."""
    from pdctl.cli import inflight

    assert inflight.check_window(2, None, 3.0) == 2 and inflight.check_window(30, None, 3.0) == 3.0


def test_a_slow_first_read_still_covers_the_whole_window(monkeypatch):
    """The window runs from the first sample: a first read that took 0.3 s must not leave the verdict inconclusive
    (it did: 3.7 s of a 4 s window sampled)."""
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    it = iter([0] * 20)

    def read_point(dep, t0=0.0, *, clock=clock):
        now[0] += 0.3  # each read costs 0.3 s; the sample is taken at its end
        return I.Point(
            t=clock() - t0,
            gauges={INF: next(it)},
            generation_tokens=10.0,
            per_worker={"prefill[0]": {INF: 0}},
            counters={},
            gen_throughput={},
        )

    monkeypatch.setattr(I, "read_point", read_point)
    rep = I.sample_inflight(FakeDep(), 4, 1, clock=clock, sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert rep.name == "drained" and rep.verdict.conclusive, rep.verdict.summary
    assert rep.verdict.covered_s >= 4 and len(rep.points) <= 4 / 1 + 2


def test_an_inflight_report_without_a_complete_sample_is_unknown_exit_3():
    """One worker unreadable in every sample: the verdict is unknown, and the exit code says so (it said 1)."""
    from pdctl.ops.inflight import InflightReport

    rep = InflightReport(10.0, 1.0, [], None)
    assert rep.name == "unknown" and rep.exit_code() == 3 and not rep.ok
    assert InflightReport(10.0, 1.0, [], None, partial=True).exit_code() == 130
