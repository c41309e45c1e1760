"""The one-command observation of a host's services: the parser of its output.

The command itself runs against real hosts: the systemd variant over SSH on a host with its own systemd
(tests/e2e/test_systemd_hosts.py), the pidfile variant locally and over sshd (tests/e2e/test_services_pidfile.py).
"""

from __future__ import annotations

from pathlib import Path

from pdctl.services.observe import parse_observation
from pdctl.services.systemd import parse_systemctl_show, status_from_show

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "systemctl"


def test_parse_a_captured_systemd_observation():
    # the output of `systemd_observe_command` on a live systemd host (tests/fixtures/capture_systemctl.py)
    seen = parse_observation((FIX / "observe_active.txt").read_text())
    assert list(seen) == ["sglang-decode", "pdctl-nope"]
    o = seen["sglang-decode"]
    show = parse_systemctl_show(o.record.decode())
    st = status_from_show("sglang-decode", show)
    assert o.rc == 0 and st.active and o.pid == st.main_pid and st.restarts == 0
    assert o.process is not None and o.process.pid == o.pid and "--disaggregation-mode" in o.process.argv
    assert o.process.env["NCCL_DEBUG"] == "WARN INIT" and o.process.start_time > 0
    nope = seen["pdctl-nope"]
    assert nope.pid is None and nope.process is None
    assert "not-found" in status_from_show("pdctl-nope", parse_systemctl_show(nope.record.decode())).detail


def test_parse_observation_keeps_services_apart_and_order():
    text = (
        "btime 1700000000\nclk 100\n@@svc a\nrec !\n@@svc b\nrec eyJwaWQiOiAxfQ==\n@@pid 1\ngone\n"
        "@@svc c\nrc 3\nshow !\n"
    )
    seen = parse_observation(text)
    assert list(seen) == ["a", "b", "c"]
    assert seen["a"].record is None and seen["a"].pid is None
    assert seen["b"].record == b'{"pid": 1}' and seen["b"].pid == 1 and seen["b"].process is None
    assert seen["c"].rc == 3 and seen["c"].record is None
