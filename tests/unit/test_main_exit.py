"""pdctl's entry point leaves with os._exit after its atexit handlers and a flush (the interpreter's teardown costs
~50 ms a run), keeping the exit code and everything printed; it leaves the usual way while a non-daemon thread
runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("code, rc", [(0, 0), (None, 0), (3, 3), (130, 130)])
def test_the_exit_code_the_printed_lines_and_the_atexit_handlers_survive(code, rc):
    p = run(f"""
        import atexit, sys
        from pdctl.__main__ import leave
        atexit.register(lambda: print("atexit ran", file=sys.stderr))
        print("x" * 100000, end="")     # more than one buffer: flushed before os._exit
        leave(SystemExit({code!r}))
        print("not reached")
        """)
    assert p.returncode == rc and p.stdout == "x" * 100000 and p.stderr == "atexit ran\n"


def test_a_message_given_to_sys_exit_is_printed_and_exits_1():
    p = run("""
        from pdctl.__main__ import leave
        leave(SystemExit("bad input"))
        """)
    assert p.returncode == 1 and p.stderr == "bad input\n"


def test_a_running_non_daemon_thread_is_waited_for_as_usual():
    p = run("""
        import threading, time
        from pdctl.__main__ import leave
        t = threading.Thread(target=lambda: (time.sleep(0.3), print("thread finished", flush=True)))
        t.start()
        leave(SystemExit(4))
        print("returned", flush=True)
        raise SystemExit(4)
        """)
    assert p.returncode == 4 and p.stdout.split() == ["returned", "thread", "finished"]
