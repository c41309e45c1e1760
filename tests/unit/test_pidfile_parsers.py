"""Pure parsers of the pidfile manager: /proc/<pid>/stat start time and its conversion to epoch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pdctl.services.pidfile import (
    parse_btime,
    parse_proc_probe,
    parse_proc_stat,
    parse_proc_stat_starttime,
    ticks_to_epoch,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "systemctl"


def test_starttime_with_spaces_and_parens_in_comm():
    text = (FIX / "proc_stat_spaces.txt").read_text()
    assert parse_proc_stat_starttime(text) == 184023341
    st = parse_proc_stat(text)
    assert (st.pid, st.state, st.pgrp) == (48213, "S", 48213)


def test_starttime_of_this_process_matches_live_proc():
    text = Path(f"/proc/{os.getpid()}/stat").read_text()
    ticks = parse_proc_stat_starttime(text)
    btime = parse_btime(Path("/proc/stat").read_text())
    epoch = ticks_to_epoch(ticks, btime, os.sysconf("SC_CLK_TCK"))
    import time

    assert btime < epoch <= time.time() + 1


def test_ticks_to_epoch():
    assert ticks_to_epoch(250, 1_700_000_000, 100) == 1_700_000_002.5


def test_garbage_is_rejected():
    with pytest.raises(ValueError):
        parse_proc_stat("not a stat line")
    with pytest.raises(ValueError):
        parse_proc_stat("12 (x) S 1 2")
    with pytest.raises(ValueError):
        parse_btime("cpu 1 2 3\n")


def test_parse_proc_probe():
    stat = (FIX / "proc_stat_spaces.txt").read_text().strip()
    out = f"STAT {stat}\nbtime 1741680000\nCLK_TCK 100\n"
    p = parse_proc_probe(out)
    assert p.pid == 48213 and p.alive and p.start_ticks == 184023341
    assert p.started_at == 1741680000 + 1840233.41
    zombie = out.replace(") S ", ") Z ")
    assert not parse_proc_probe(zombie).alive
    assert parse_proc_probe("") is None


# -- a probe that does not answer is "unknown", never "gone" (issue 9) -------------------------------------------
class _Answers:
    """A transport that answers every command with one CommandResult and every read with `files`."""

    name = "gpu-slow"

    def __init__(self, result, files=None):
        self.result, self.files, self.commands = result, files or {}, []

    def run(self, command, *, timeout, env=None):
        self.commands.append((command, timeout))
        return self.result

    def read_file(self, path, *, timeout=10.0):
        return self.files.get(path)


def _timed_out():
    from pdctl.transport.base import CommandResult

    return CommandResult(-9, "", "\n[pdctl] command timed out after 2s", timed_out=True)


def test_read_proc_start_timeout_raises_unknown_and_exit_1_is_gone():
    from pdctl.errors import UnreachableError
    from pdctl.services.pidfile import read_proc_start
    from pdctl.transport.base import CommandResult

    with pytest.raises(UnreachableError, match=r"^unknown: gpu-slow did not answer within 2 s \(reading /proc/77\)"):
        read_proc_start(_Answers(_timed_out()), 77, timeout=2)
    assert read_proc_start(_Answers(CommandResult(1, "", "")), 77, timeout=2) is None  # the probe's "no such pid"


def test_pidfile_status_on_a_hung_host_raises_unknown_with_the_hosts_command_timeout():
    from pdctl.errors import UnreachableError
    from pdctl.services.pidfile import PidfileManager

    t = _Answers(_timed_out(), files={"/s/r.pid": b'{"pid": 4242, "start_ticks": 1}\n'})
    with pytest.raises(UnreachableError, match="did not answer within 20 s") as ei:
        PidfileManager(t, "/s", command_timeout=20).status("r")
    assert ei.value.exit_code == 3
    assert t.commands[0][1] == 20  # bounded by the host's command_timeout, not a fixed 10 s


def test_read_process_timeout_is_unknown_not_a_proc_read_error():
    from pdctl.checks.proc import ProcReadError
    from pdctl.errors import UnreachableError
    from pdctl.services.proc_read import read_process

    with pytest.raises(UnreachableError, match="unknown: gpu-slow did not answer within 2 s") as ei:
        read_process(_Answers(_timed_out()), 4242, timeout=2)
    assert not isinstance(ei.value, ProcReadError)


def test_stop_signals_held_delivers_a_signal_only_when_the_block_ends():
    import os
    import signal

    from pdctl.services.held_signals import stop_signals_held

    class Stop(KeyboardInterrupt):
        pass

    def raise_stop(_signum, _frame):
        raise Stop()

    previous = signal.signal(signal.SIGTERM, raise_stop)
    reached_end = False
    try:
        with pytest.raises(Stop):
            with stop_signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # bytecodes run: an unheld signal would have raised by now
                    pass
                reached_end = True
        assert reached_end
        assert signal.getsignal(signal.SIGTERM) is raise_stop  # the handler in place before is back
    finally:
        signal.signal(signal.SIGTERM, previous)
