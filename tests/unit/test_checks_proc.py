"""/proc parsers on fixtures modelled on the seed's decode process, and read_process on a real child process."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pdctl.checks.proc import (
    GONE_MARK,
    parse_cmdline,
    parse_environ,
    parse_proc_dump,
    parse_stat_starttime,
)
from pdctl.secrets import MASK
from pdctl.services.proc_read import read_process

FIX = Path(__file__).parent / "fixtures"
CMDLINE = (FIX / "proc-decode-cmdline.bin").read_bytes()
ENVIRON = (FIX / "proc-decode-environ.bin").read_bytes()
STAT = (FIX / "proc-decode-stat.txt").read_text()


def test_parse_cmdline_seed_decode():
    argv = parse_cmdline(CMDLINE)
    assert argv[:3] == ["/usr/bin/python3", "-m", "sglang.launch_server"]
    assert "--disable-overlap-schedule" in argv
    i = argv.index("--cuda-graph-max-bs-decode")
    assert argv[i + 1] == "96"
    # the seed's `tr '\0' ' ' | grep -oE 'disable-overlap-schedule|cuda-graph-max-bs[-a-z]* [0-9]+'`
    assert "cuda-graph-max-bs-decode 96" in " ".join(argv)


def test_parse_cmdline_edge_cases():
    assert parse_cmdline(b"") == []
    assert parse_cmdline(b"a\0\0b\0") == ["a", "", "b"]
    assert parse_cmdline(b"no-trailing-nul") == ["no-trailing-nul"]
    assert parse_cmdline(b"caf\xc3\xa9\0\xff\0") == ["café", "\udcff"]  # undecodable bytes survive


def test_parse_environ_seed_decode():
    env = parse_environ(ENVIRON)
    assert env["SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"] == "0"
    assert env["SGLANG_SM120_MMA_TARGET_CTAS"] == "512"
    assert env["HF_TOKEN"] == "hf_secret"
    assert env["EMPTY_VAR"] == "" and env["WEIRD"] == "a=b=c"
    assert parse_environ(b"") == {} and parse_environ(b"NOEQUALS\0A=1\0A=2\0") == {"A": "2"}


def test_parse_stat_starttime_with_hostile_comm():
    assert parse_stat_starttime(STAT) == 6123456
    assert parse_stat_starttime("1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0") == 42


def _dump(cmdline, environ, stat, btime="1795900000", clk="100"):
    def b(x):
        return "!" if x is None else base64.b64encode(x).decode()

    return f"cmdline {b(cmdline)}\nenviron {b(environ)}\nstat {b(stat)}\nbtime {btime}\nclk {clk}\n"


def test_parse_proc_dump():
    info = parse_proc_dump(48213, _dump(CMDLINE, ENVIRON, STAT.encode()))
    assert info.pid == 48213 and info.argv == parse_cmdline(CMDLINE)
    assert info.env["HF_TOKEN"] == "hf_secret"
    assert info.start_ticks == 6123456
    assert info.start_time == pytest.approx(1795900000 + 61234.56)
    masked = info.masked()
    assert masked["env"]["HF_TOKEN"] == MASK and "sk-live-abc123" not in str(masked)
    assert "hf_secret" not in repr(info) and "sk-live-abc123" not in repr(info)


def test_parse_proc_dump_unreadable_environ_and_gone():
    info = parse_proc_dump(7, _dump(CMDLINE, None, STAT.encode()))
    assert info.env is None and any("environ" in n for n in info.notes)
    assert parse_proc_dump(7, GONE_MARK + "\n") is None
    assert parse_proc_dump(7, _dump(CMDLINE, ENVIRON, None)) is None  # vanished mid-read


class _ShTransport:
    """Minimal Transport-like object (only `run`) to keep this test independent of other modules."""

    name = "test-local"

    def run(self, command, *, timeout, env=None):
        from pdctl.transport.base import CommandResult

        p = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=timeout)
        return CommandResult(p.returncode, p.stdout, p.stderr)


def _transports():
    out = [_ShTransport()]
    try:
        from pdctl.transport.local import LocalTransport

        out.append(LocalTransport())
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("transport", _transports(), ids=lambda t: type(t).__name__)
def test_read_process_on_a_real_child(transport):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0",
        "SGLANG_SM120_MMA_TARGET_CTAS": "512",
        "HF_TOKEN": "hf_secret",
    }
    t0 = time.time()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(30)",
            "--disable-overlap-schedule",
            "--cuda-graph-max-bs-decode",
            "96",
        ],
        env=env,
    )
    try:
        info = read_process(transport, child.pid, timeout=10)
        assert info is not None and info.pid == child.pid
        assert info.argv[-3:] == ["--disable-overlap-schedule", "--cuda-graph-max-bs-decode", "96"]
        assert info.env == env
        assert info.start_time == pytest.approx(t0, abs=2.0)
    finally:
        child.kill()
        child.wait()
    assert read_process(transport, child.pid, timeout=10) is None  # reaped: the pid is gone


def test_read_process_command_failure_is_a_pdctl_error():
    from pdctl.checks.proc import ProcReadError
    from pdctl.transport.base import CommandResult

    class Broken:
        name = "broken"

        def run(self, command, *, timeout, env=None):
            return CommandResult(127, "", "sh: base64: not found")

    with pytest.raises(ProcReadError, match="base64: not found"):
        read_process(Broken(), 1)
