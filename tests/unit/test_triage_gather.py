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
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.triage import TriageObservations, judge_triage, unobserved_lines
from pdctl.progress import Progress

UNREADABLE = {
    "prefill[0]": "cannot read http://127.0.0.1:30000/metrics: connection refused",
    "decode[0]": "cannot read http://127.0.0.1:30002/metrics: connection refused",
}


ROLES = ("prefill", "decode", "router")


class FakeInv:
    name = "t"
    source = "inv.yaml"

    def __init__(self, roles=("decode",)):
        self.roles = roles

    def instances(self, role=None):
        return [(r, 0, SimpleNamespace(host="gpu1")) for r in self.roles if role in (None, r)]

    def label(self, role, i):
        return f"{role}[{i}]@gpu1:{30000 + ROLES.index(role)}"

    def service_name(self, role, i):
        return f"pdctl-t-{role}-{i}"


class FakeDep:
    from pdctl.ops.context import Deployment

    each_instance, each_host = Deployment.each_instance, Deployment.each_host  # the real fan-out over a fake inventory

    def __init__(self, roles=("decode",), stopped=(), status_error=None):
        self.inv = FakeInv(roles)
        self.progress = Progress()
        self.stopped, self.status_error = set(stopped), status_error

    def transport(self, host):
        raise RuntimeError("no transport in this test")

    def status(self, role, i):
        from pdctl.services.base import ServiceStatus

        if self.status_error is not None:
            raise self.status_error
        if role in self.stopped:
            return ServiceStatus(self.inv.service_name(role, i), False, None, None, detail="")
        return ServiceStatus(self.inv.service_name(role, i), True, 4242, 0.0)


def _point(errors=None, gauges=None):
    return I.Point(
        t=0.0,
        gauges=gauges or {},
        generation_tokens=None if errors else 0.0,
        per_worker={} if errors else {"prefill[0]": {}},
        counters={} if errors else {"prefill[0]": {}},
        gen_throughput={},
        errors=errors or {},
    )


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
    _fh_raises(
        monkeypatch, UnreachableError("host 'gpu1' (root@10.0.0.5:22) unreachable over SSH: timed out", target="gpu1")
    )
    with pytest.raises(UnreachableError, match="gpu1"):
        T.triage(FakeDep(), window_s=2, interval_s=1)


def test_refused_host_key_is_raised(unreadable, monkeypatch):
    _fh_raises(monkeypatch, HostKeyRefused("host 'gpu1' (10.0.0.5:22): host key CHANGED, refusing to connect"))
    with pytest.raises(HostKeyRefused, match="gpu1"):
        T.triage(FakeDep(), window_s=2, interval_s=1)


@pytest.mark.parametrize(
    "exc, code",
    [
        (UnreachableError("host 'gpu1' (root@10.0.0.5:22) unreachable over SSH: timed out", target="gpu1"), 3),
        (HostKeyRefused("host 'gpu1' (10.0.0.5:22): host key CHANGED, refusing to connect"), 4),
    ],
)
def test_cli_exits_3_or_4_naming_the_host(unreadable, monkeypatch, exc, code):
    from pdctl.cli import triage as cli_triage
    from pdctl.cli.app import app

    _fh_raises(monkeypatch, exc)
    monkeypatch.setattr(
        cli_triage, "open_deployment", lambda inv, quiet=False, **_kw: contextlib.nullcontext(FakeDep())
    )
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
    inflight = next(o for o in rep.observations if o.what == "inflight")
    assert inflight.status.value == "fail"


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
    f = judge_triage(TriageObservations(unobserved=["no worker's /metrics could be read in any of 3 sample(s)"]))
    assert [x.kind for x in f] == ["unobserved"] and f[0].severity == "action"
    assert f[0].title == "could not observe the PD queues and counters"


# -- roles not running (`pdctl down`): the service status explains the refused connections -------------------------

REFUSED = "connection refused"


def _stopped_final_health(dep, stopped):
    """What final-health sees with `stopped` roles down: their /health refused; the probe through the router fails."""

    def check(role, name, ok, observed):
        return CheckResult(
            "health", dep.inv.label(role, 0), name, Status.PASS if ok else Status.FAIL, observed=observed
        )

    health = [check(r, "/health", r not in stopped, "HTTP 200" if r not in stopped else REFUSED) for r in ROLES]
    e2e = [check("router", "chat completion", False, REFUSED if "router" in stopped else "HTTP 502")]
    return SimpleNamespace(layers={"health": health, "e2e": e2e, "transfer": [], "lineage": []})


def _refused_for(dep, stopped):
    errs = {dep.inv.label(r, 0): f"cannot read /metrics: {REFUSED}" for r in ("prefill", "decode") if r in stopped}
    return errs


@pytest.fixture
def stopped_env(monkeypatch):
    calls = {"sample": 0}

    def setup(stopped):
        dep = FakeDep(roles=ROLES, stopped=stopped)
        errs = _refused_for(dep, stopped)

        def sample(dep_, window_s, interval_s, **_kw):
            calls["sample"] += 1
            pts = [_point(errs), _point(errs)]
            for p in pts:
                p.per_worker = {dep.inv.label(r, 0): {} for r in ("prefill", "decode") if r not in stopped}
            verdict, notes = I.judge_points(pts, window_s)
            return I.InflightReport(window_s, interval_s, pts, verdict, notes=notes)

        monkeypatch.setattr(I, "sample_inflight", sample)
        monkeypatch.setattr(I, "read_point", lambda d, t0=0.0, **_kw: _point(errs))
        monkeypatch.setattr(V, "final_health", lambda d, layers=(): _stopped_final_health(dep, stopped))
        return dep

    setup.calls = calls
    return setup


def test_everything_stopped_is_not_running_with_deploy_not_transfer_failures(stopped_env):
    dep = stopped_env(set(ROLES))
    rep = T.triage(dep, window_s=2, interval_s=1)
    assert stopped_env.calls["sample"] == 0  # nothing runs: no quiet window to wait for
    assert [f.kind for f in rep.findings] == ["not-running"], [f.title for f in rep.findings]
    (f,) = rep.findings
    assert f.title == "not running: prefill[0], decode[0], router[0] (no process)"
    assert f.severity == "action" and "`pdctl deploy`" in f.action and "restart" not in f.action
    assert rep.exit_code() == 1 and rep.headline == "triage: ACTION NEEDED (1 finding(s))"
    services = [o for o in rep.observations if o.what == "service"]
    assert len(services) == 3 and {o.status.value for o in services} == {"fail"}
    inflight = next(o for o in rep.observations if o.what == "inflight")
    assert inflight.status.value == "skip" and "not running" in inflight.observed


def test_decode_stopped_recommends_the_pair_restart(stopped_env):
    dep = stopped_env({"decode"})
    rep = T.triage(dep, window_s=2, interval_s=1)
    assert stopped_env.calls["sample"] == 1
    kinds = [f.kind for f in rep.findings]
    assert kinds == ["not-running"], [f.title for f in rep.findings]
    f = rep.findings[0]
    assert f.title == "not running: decode[0] (no process)"
    assert "pdctl restart --pair" in f.action and "`pdctl logs decode`" in f.action and "deploy" not in f.action
    assert any("end-to-end probe" in o for o in f.observed)  # the failed probe is explained, not a transfer


def test_status_of_an_unreachable_host_is_raised(monkeypatch):
    dep = FakeDep(roles=ROLES, status_error=UnreachableError("host 'gpu1' unreachable over SSH", target="gpu1"))
    with pytest.raises(UnreachableError, match="gpu1"):
        T.triage(dep, window_s=2, interval_s=1)


def test_unreadable_status_is_unknown_never_stopped(unreadable, monkeypatch):
    dep = FakeDep(roles=ROLES, status_error=RuntimeError("systemctl: no such bus"))
    monkeypatch.setattr(V, "final_health", lambda d, layers=(): SimpleNamespace(layers={}))
    rep = T.triage(dep, window_s=2, interval_s=1)
    assert "not-running" not in [f.kind for f in rep.findings]
    assert "unobserved" in [f.kind for f in rep.findings]
    assert {o.status.value for o in rep.observations if o.what == "service"} == {"skip"}


def test_unobserved_lines_leave_out_stopped_workers():
    errs = {"prefill[0]": REFUSED, "decode[0]": REFUSED}
    assert unobserved_lines([_point(errs)], False, None, stopped={"prefill[0]", "decode[0]"}) == []
    assert unobserved_lines([], False, None, stopped={"prefill[0]", "decode[0]"}) == []
    (line,) = unobserved_lines([_point(errs)], False, None, stopped={"decode[0]"})
    assert "prefill[0]: connection refused" in line and "decode[0]: connection" not in line
    assert line.endswith("(not running: decode[0])")
