"""triage's gathering: a host that cannot be asked is an error (exit 3/4 naming it), and a deployment whose metrics
could not be read is a finding that needs action (exit 1), never "no finding" (exit 0). Reads are faked."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from pdctl.errors import HostKeyRefused, UnreachableError
from pdctl.ops import inflight as I
from pdctl.ops import triage as T
from pdctl.ops import verify as V
from pdctl.ops.triage import judge_triage, unobserved_lines
from pdctl.progress import Progress

UNREADABLE = {"prefill[0]": "cannot read http://127.0.0.1:30000/metrics: connection refused",
              "decode[0]": "cannot read http://127.0.0.1:30002/metrics: connection refused"}


class FakeInv:
    name = "t"
    source = "inv.yaml"

    def instances(self, role=None):
        return [("decode", 0, SimpleNamespace(host="gpu1"))] if role in (None, "decode") else []


class FakeDep:
    def __init__(self):
        self.inv = FakeInv()
        self.progress = Progress()

    def transport(self, host):
        raise RuntimeError("no transport in this test")


def _point(errors=None, gauges=None):
    return I.Point(t=0.0, gauges=gauges or {}, generation_tokens=None if errors else 0.0,
                   per_worker={} if errors else {"prefill[0]": {}}, counters={} if errors else {"prefill[0]": {}},
                   gen_throughput={}, errors=errors or {})


@pytest.fixture
def unreadable(monkeypatch):
    def sample(dep, window_s, interval_s, **_kw):
        pts = [_point(UNREADABLE), _point(UNREADABLE)]
        verdict, notes = I.judge_points(pts, window_s)
        return I.InflightReport(window_s, interval_s, pts, verdict, notes=notes)

    monkeypatch.setattr(I, "sample_inflight", sample)
    monkeypatch.setattr(I, "read_point", lambda dep, t0=0.0, **_kw: _point(UNREADABLE))


def _fh_raises(monkeypatch, exc):
    def final_health(dep, layers=()):
        raise exc

    monkeypatch.setattr(V, "final_health", final_health)


def test_unreachable_host_is_raised_not_a_clean_triage(unreadable, monkeypatch):
    _fh_raises(monkeypatch, UnreachableError("host 'gpu1' (root@10.0.0.5:22) unreachable over SSH: timed out",
                                             target="gpu1"))
    with pytest.raises(UnreachableError, match="gpu1"):
        T.triage(FakeDep(), window_s=2, interval_s=1)


def test_refused_host_key_is_raised(unreadable, monkeypatch):
    _fh_raises(monkeypatch, HostKeyRefused("host 'gpu1' (10.0.0.5:22): host key CHANGED, refusing to connect"))
    with pytest.raises(HostKeyRefused, match="gpu1"):
        T.triage(FakeDep(), window_s=2, interval_s=1)


@pytest.mark.parametrize("exc, code", [
    (UnreachableError("host 'gpu1' (root@10.0.0.5:22) unreachable over SSH: timed out", target="gpu1"), 3),
    (HostKeyRefused("host 'gpu1' (10.0.0.5:22): host key CHANGED, refusing to connect"), 4),
])
def test_cli_exits_3_or_4_naming_the_host(unreadable, monkeypatch, exc, code):
    from pdctl.cli import triage as cli_triage
    from pdctl.cli.app import app

    _fh_raises(monkeypatch, exc)
    monkeypatch.setattr(cli_triage, "open_deployment", lambda inv, quiet=False: contextlib.nullcontext(FakeDep()))
    r = CliRunner().invoke(app, ["triage", "--window", "2", "--interval", "1", "--json"])
    assert r.exit_code == code, r.output
    assert "gpu1" in r.output


def test_unreadable_metrics_is_a_finding_that_needs_action(unreadable, monkeypatch):
    class Healthy:
        layers: dict = {}

    monkeypatch.setattr(V, "final_health", lambda dep, layers=(): Healthy())
    rep = T.triage(FakeDep(), window_s=2, interval_s=1)
    assert rep.exit_code() == 1 and rep.needs_action
    f = next(f for f in rep.findings if f.kind == "unobserved")
    assert f.severity == "action" and "could not observe" in f.title
    assert any("no worker's /metrics could be read" in o and "prefill[0]" in o for o in f.observed)
    inflight = next(o for o in rep.observations if o["what"] == "inflight")
    assert inflight["status"] == "fail"


def test_other_final_health_error_is_a_finding(monkeypatch):
    def sample(dep, window_s, interval_s, **_kw):
        pts = [_point(), _point()]
        verdict, notes = I.judge_points(pts, window_s)
        return I.InflightReport(window_s, interval_s, pts, verdict, notes=notes)

    monkeypatch.setattr(I, "sample_inflight", sample)
    monkeypatch.setattr(I, "read_point", lambda dep, t0=0.0, **_kw: _point())
    _fh_raises(monkeypatch, RuntimeError("boom"))
    rep = T.triage(FakeDep(), window_s=2, interval_s=1)
    assert rep.exit_code() == 1
    f = next(f for f in rep.findings if f.kind == "unobserved")
    assert any("RuntimeError: boom" in o for o in f.observed)


def test_unobserved_lines_pure():
    assert unobserved_lines([_point(), _point()], True, None) == []
    lines = unobserved_lines([_point(UNREADABLE)], False, None)
    assert len(lines) == 1 and lines[0].startswith("no worker's /metrics could be read in any of 1 sample(s)")
    partly = [_point({"decode[0]": "timed out"}) for _ in range(2)]
    for p in partly:
        p.per_worker = {"prefill[0]": {}}
    (line,) = unobserved_lines(partly, False, None)
    assert line.startswith("no complete /metrics sample in 2 sample(s)") and "decode[0]: timed out" in line
    assert unobserved_lines([], False, None) == ["no complete /metrics sample in 0 sample(s): no inflight verdict"]


def test_judge_triage_unobserved_needs_action():
    f = judge_triage({"unobserved": ["no worker's /metrics could be read in any of 3 sample(s)"]})
    assert [x.kind for x in f] == ["unobserved"] and f[0].severity == "action"
    assert f[0].title == "could not observe the PD queues and counters"
