"""Process observation (ops/processes.py): each host's services and main processes as typed LiveProcess values;
a host that cannot be asked is never "no live main process"; what lineage and flags read of them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pdctl.checks.proc import ProcessInfo
from pdctl.errors import PdctlError, UnreachableError
from pdctl.ops.fanout import fan_out
from pdctl.ops.layers.lineage import unit_restarts
from pdctl.ops.lineage_record import lineage_snapshot
from pdctl.ops.processes import LiveProcess, live_processes, live_processes_reached
from pdctl.services.base import ServiceStatus

PLACES = [("prefill", 0, "h1"), ("decode", 0, "h2"), ("router", 0, "h1")]


class _Inv:
    def instances(self):
        return [(role, i, SimpleNamespace(host=host)) for role, i, host in PLACES]

    def service_name(self, role, i):
        return f"pd-{role}-{i}"

    def label(self, role, i):
        return f"{role}[{i}]"


def _dep(answers):
    """answers: host -> {service: (ServiceStatus, ProcessInfo|None)} or an exception to raise."""

    def observe_on(host):
        def observe(names):
            got = answers[host]
            if isinstance(got, Exception):
                raise got
            return {n: got[n] for n in names}

        return SimpleNamespace(observe=observe)

    hosts = list(dict.fromkeys(h for _r, _i, h in PLACES))
    return SimpleNamespace(inv=_Inv(), services=observe_on, each_host=lambda fn: fan_out([(h, h) for h in hosts], fn))


def _running(name, pid, start, restarts=None):
    info = ProcessInfo(pid=pid, argv=["python", "-m", "x"], env={}, start_time=start)
    return ServiceStatus(name, True, pid, start, restarts=restarts), info


H1 = {"pd-prefill-0": _running("pd-prefill-0", 10, 100.0), "pd-router-0": _running("pd-router-0", 30, 300.0, 2)}
H2 = {"pd-decode-0": _running("pd-decode-0", 20, 200.0)}


def test_every_instance_is_a_typed_live_process_in_inventory_order():
    procs = live_processes(_dep({"h1": H1, "h2": H2}))
    assert list(procs) == ["prefill[0]", "decode[0]", "router[0]"]
    d = procs["decode[0]"]
    assert isinstance(d, LiveProcess) and (d.role, d.index, d.active) == ("decode", 0, True)
    assert d.process is not None and d.process.pid == 20
    assert lineage_snapshot(procs) == {
        "prefill[0]": ("prefill", 10, 100.0),
        "decode[0]": ("decode", 20, 200.0),
        "router[0]": ("router", 30, 300.0),
    }
    assert list(unit_restarts(procs)) == ["router[0]"]  # only a manager that counts its own restarts


def test_an_unreachable_host_raises_for_final_health_and_is_left_out_for_the_watch():
    down = UnreachableError("unknown: h2 did not answer within 20 s", target="h2")
    with pytest.raises(UnreachableError):
        live_processes(_dep({"h1": H1, "h2": down}))
    procs, errors = live_processes_reached(_dep({"h1": H1, "h2": down}))
    assert list(procs) == ["prefill[0]", "router[0]"] and errors == {"h2": down}


def test_a_host_that_answered_but_failed_the_read_shows_its_roles_without_a_process():
    procs = live_processes(_dep({"h1": H1, "h2": PdctlError("systemctl show failed: no such unit\nmore")}))
    d = procs["decode[0]"]
    assert d.process is None and not d.active and d.service.detail == "systemctl show failed: no such unit"
    assert "decode[0]" not in lineage_snapshot(procs)
