"""SystemdManager's command logic with a recording transport (systemd is not PID 1 on CI machines).

The real parts (unit text, systemd-analyze verify, captured systemctl show) are in test_systemd_units.py; the
manager against a live systemd over SSH in tests/e2e/test_systemd_hosts.py.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from pdctl.errors import StepFailed
from pdctl.services.base import ServiceSpec
from pdctl.services.systemd import SystemdManager, parse_systemd_timestamp
from pdctl.transport.base import CommandResult, Transport

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "systemctl"


class RecordingTransport(Transport):
    """Files in a dict; commands answered by the first matching prefix in `answers`."""

    def __init__(self, answers: dict[str, CommandResult]):
        self.name = "rec"
        self.files: dict[str, bytes] = {}
        self.commands: list[str] = []
        self.answers = answers

    def run(self, command, *, timeout, env=None):
        self.commands.append(command)
        for prefix, res in self.answers.items():
            if command.startswith(prefix):
                return res
        return CommandResult(0, "", "")

    def put_file(self, path, content, *, mode=0o644):
        self.files[path] = content.encode() if isinstance(content, str) else content

    def read_file(self, path, *, timeout=10.0):
        return self.files.get(path)

    def http_base_url(self, port, *, host="127.0.0.1"):
        return f"http://{host}:{port}"


def _spec(**kw) -> ServiceSpec:
    return ServiceSpec(
        name="sglang-decode", argv=(sys.executable, "-m", "sglang.launch_server", "--port", "30002"), **kw
    )


def test_install_writes_and_reloads_only_when_changed():
    t = RecordingTransport({})
    m = SystemdManager(t)
    assert m.install(_spec()) is True
    assert "/etc/systemd/system/sglang-decode.service" in t.files
    assert t.commands == ["systemctl daemon-reload"]
    assert m.install(_spec()) is False and t.commands == ["systemctl daemon-reload"]
    assert m.install(_spec(env={"A": "1"})) is True and t.commands.count("systemctl daemon-reload") == 2


def test_status_uses_show_and_proc_start_time():
    text = re.sub(r"(?m)^MainPID=\d+$", f"MainPID={os.getpid()}", (FIX / "show_active.txt").read_text())
    stat = open(f"/proc/{os.getpid()}/stat").read().strip()
    btime = next(ln for ln in open("/proc/stat") if ln.startswith("btime "))
    probe = f"STAT {stat}\n{btime}CLK_TCK {os.sysconf('SC_CLK_TCK')}\n"
    t = RecordingTransport({"systemctl show": CommandResult(0, text, ""), "stat=": CommandResult(0, probe, "")})
    st = SystemdManager(t).status("sglang-decode")
    assert st.active and st.main_pid == os.getpid()
    assert st.started_at != parse_systemd_timestamp(re.search(r"(?m)^ExecMainStartTimestamp=(.*)$", text).group(1))
    show_cmd = next(c for c in t.commands if c.startswith("systemctl show"))
    for prop in ("MainPID", "ActiveState", "SubState", "ExecMainStartTimestamp"):
        assert f"-p {prop}" in show_cmd


def test_start_that_enters_auto_restart_fails_with_journal():
    t = RecordingTransport(
        {
            "systemctl show": CommandResult(0, (FIX / "show_auto_restart.txt").read_text(), ""),
            "journalctl": CommandResult(0, "decode: error: unrecognized argument --bogus\n", ""),
        }
    )
    with pytest.raises(StepFailed) as ei:
        SystemdManager(t).start("sglang-prefill")
    assert "auto-restart" in ei.value.message and "--bogus" in ei.value.message
    assert "systemctl start sglang-prefill.service" in t.commands


TIMED_OUT = CommandResult(-9, "", "\n[pdctl] command timed out after 3s", timed_out=True)


def test_a_systemctl_that_does_not_answer_is_unknown_never_a_stopped_unit():
    from pdctl.errors import UnreachableError

    t = RecordingTransport({"systemctl show": TIMED_OUT})
    with pytest.raises(UnreachableError, match=r"unknown: rec did not answer within 3 s \(systemctl show\)") as ei:
        SystemdManager(t, command_timeout=3).status("sglang-decode")
    assert ei.value.exit_code == 3 and ei.value.target == "rec"


def test_an_active_unit_whose_proc_read_hangs_is_unknown():
    from pdctl.errors import UnreachableError

    text = (FIX / "show_active.txt").read_text()
    pid = re.search(r"(?m)^MainPID=(\d+)$", text).group(1)
    t = RecordingTransport({"systemctl show": CommandResult(0, text, ""), "stat=": TIMED_OUT})
    with pytest.raises(UnreachableError, match=rf"did not answer within 3 s \(reading /proc/{pid}\)"):
        SystemdManager(t, command_timeout=3).status("sglang-decode")
