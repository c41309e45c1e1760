"""The one-command observation of a host's services: the real shell script run by /bin/sh against real /proc.

systemd is not PID 1 here, so `systemctl` is a script on PATH that replays captured `systemctl show` output with
the MainPID of a real live process; the pidfile variant needs no stand-in (tests/e2e/test_services_pidfile.py runs it
locally and over sshd). A systemd host with its own systemd comes with the systemd-hosts issue.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdctl.services.observe import parse_observation
from pdctl.services.systemd import SystemdManager
from pdctl.transport.local import LocalTransport

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "systemctl"


@pytest.fixture
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env={**os.environ, "PDCTL_OBS": "1"})
    yield p
    p.kill()
    p.wait()


@pytest.fixture
def systemctl_on_path(tmp_path, monkeypatch, sleeper):
    active = (FIX / "show_active.txt").read_text().replace("48213", str(sleeper.pid))
    (tmp_path / "active.txt").write_text(active)
    (tmp_path / "gone.txt").write_text(active.replace(f"MainPID={sleeper.pid}", "MainPID=999999999"))
    script = tmp_path / "bin" / "systemctl"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n"
                      f'case "$2" in sglang-decode.service) cat {tmp_path}/active.txt;; '
                      f'gone.service) cat {tmp_path}/gone.txt;; '
                      f'missing.service) cat {FIX}/show_not_found.txt;; '
                      '*) echo "Failed to connect to bus" >&2; exit 1;; esac\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}:{os.environ['PATH']}")
    return sleeper


def test_systemd_observe_one_command_real_proc(systemctl_on_path):
    sleeper = systemctl_on_path
    t = LocalTransport("local")
    runs = []
    real_run = t.run
    t.run = lambda cmd, **kw: (runs.append(cmd), real_run(cmd, **kw))[1]
    seen = SystemdManager(t).observe(["sglang-decode", "gone", "missing", "broken"])
    assert len(runs) == 1

    st, info = seen["sglang-decode"]
    assert st.active and st.main_pid == sleeper.pid
    assert info is not None and info.env["PDCTL_OBS"] == "1" and info.argv[0] == sys.executable
    assert abs(st.started_at - info.start_time) < 1e-6        # the kernel's start time, not systemd's stamp
    st, info = seen["gone"]                                    # systemd says active, the pid is gone
    assert st.active and info is None
    st, info = seen["missing"]
    assert not st.active and info is None and "LoadState=not-found" in st.detail
    st, info = seen["broken"]
    assert not st.active and info is None and "failed (exit 1)" in st.detail and "bus" in st.detail


def test_parse_observation_keeps_services_apart_and_order():
    text = ("btime 1700000000\nclk 100\n@@svc a\nrec !\n@@svc b\nrec eyJwaWQiOiAxfQ==\n@@pid 1\ngone\n"
            "@@svc c\nrc 3\nshow !\n")
    seen = parse_observation(text)
    assert list(seen) == ["a", "b", "c"]
    assert seen["a"].record is None and seen["a"].pid is None
    assert seen["b"].record == b'{"pid": 1}' and seen["b"].pid == 1 and seen["b"].process is None
    assert seen["c"].rc == 3 and seen["c"].record is None
