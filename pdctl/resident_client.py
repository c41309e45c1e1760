"""What a pdctl run does with the resident pdctl (resident.py): run `pdctl verify ...` in it when one serves this
code, before typer or anything else is imported (the standard library, resident_paths and the keeper's wire format
only), and start one on the way out of a run with kept connections.

Whether there is a resident to ask is resident_paths.resident_to_ask's to say ($PDCTL_RESIDENT=0: never). Anything
short of the resident taking the run (a refusal, a resident of another user, one that does not greet in time or ends
before it forks) returns None, and the caller runs the command itself: nothing has run yet. Once the request is
sent, this process only waits (it never runs the command too): SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to
the run, except those the caller ignores (nohup's SIGHUP), which stay ignored in the run too; the run's exit status
becomes this process's (a run killed by a signal ends this process by the same signal). Ctrl-Z (SIGTSTP) is not
passed on: it stops this process, not the run.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import sys

from pdctl.resident_paths import RESIDENT_ENV, control_dir_path, private_problem, resident_socket
from pdctl.transport.peer import unix_peer_uid
from pdctl.transport.wire import recv_frame, send_frame_with_fds

GREET_S = 2.0          # a resident that does not greet or fork within this is not used
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
LOST_EXIT = 3          # the resident ended under a run: its result is unknown
#: True in a run the resident forked (resident._become_run): that resident already serves this code, and the run's
#: import path, the resident's, would name another stamp and start a second resident that nobody asks.
forked_by_resident = False


def run_in_resident(argv: list[str], path: str) -> int | None:
    """The exit code of `argv` run by the resident pdctl listening at `path` (resident_paths.resident_to_ask), or
    None when it did not take the run."""
    conn = _dial(path)
    if conn is None:
        return None
    run: list[int] = []          # the run's pid once the resident said it
    pending: list[int] = []      # signals that came before that

    def forward(signum, _frame):
        if not run:
            pending.append(signum)
            return
        try:
            os.kill(run[0], signum)
        except ProcessLookupError:
            pass

    # what the caller ignores (nohup's SIGHUP, a script's background job's SIGINT) stays ignored, here and in the run
    ignored = [sig for sig in FORWARDED if signal.getsignal(sig) == signal.SIG_IGN]
    passed = [sig for sig in FORWARDED if sig not in ignored]
    for sig in passed:   # from before the request leaves: a Ctrl-C then is the run's, never a traceback here
        signal.signal(sig, forward)
    with conn:
        pid = _hand_over(conn, argv, ignored)
        if pid is None:   # not taken: nothing ran; a signal that came meanwhile ends this process as it would
            for sig in passed:
                signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
            for sig in pending:
                _die_by(sig)
            return None
        run.append(pid)
        for sig in pending:
            forward(sig, None)
        return _wait(conn, pid)


def _dial(path: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(GREET_S)
    try:
        conn.connect(path)
        if unix_peer_uid(conn) != os.getuid():   # only a resident of this user gets our streams
            raise ConnectionRefusedError
        hello = recv_frame(conn)
        if not isinstance(hello, dict) or "hello" not in hello:
            raise ConnectionRefusedError
    except (OSError, ValueError):   # PeerClosed is an OSError
        conn.close()
        return None
    return conn


def _hand_over(conn: socket.socket, argv: list[str], ignored: list[int]) -> int | None:
    """Send the run (argv, directory, environment, umask, the signals it ignores, the three streams); the run's
    pid, or None if refused."""
    umask = os.umask(0)
    os.umask(umask)
    streams = [[getattr(s, "encoding", None) or "utf-8", getattr(s, "errors", None) or "strict"]
               for s in (sys.stdin, sys.stdout, sys.stderr)]
    try:
        for s in (sys.stdout, sys.stderr):
            s.flush()
        send_frame_with_fds(conn, {"op": "run", "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                                   "umask": umask, "ignored": [int(sig) for sig in ignored], "streams": streams},
                              [0, 1, 2])
        conn.settimeout(None)   # sent: the resident may have forked, so it is waited for, never run twice here
        reply = recv_frame(conn)
    except (OSError, ValueError):   # a closed standard stream, a resident gone (PeerClosed): run it here
        return None
    return reply.get("pid") if isinstance(reply, dict) and isinstance(reply.get("pid"), int) else None


def _wait(conn: socket.socket, pid: int) -> int:
    """The run's exit code, as the resident reports it (signals are passed on meanwhile)."""
    try:
        reply = recv_frame(conn)   # interrupted by a forwarded signal, recv resumes (PEP 475)
        code = int(reply["exit"])
    except (OSError, ValueError, KeyError, TypeError):   # the resident is gone: its run may still be writing
        _wait_gone(pid)
        print(f"pdctl: the resident pdctl ended while it ran this command (pid {pid}): its exit status is "
              "unknown", file=sys.stderr)
        return LOST_EXIT
    if code < 0:   # killed by a signal: end the same way, so a shell sees 128+N
        _die_by(-code)
    return code


def _die_by(sig: int) -> int:
    """End this process by `sig`, as if it had come with its default action (128+sig if it somehow returns)."""
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    return 128 + sig


def _wait_gone(pid: int) -> None:
    """Until process `pid` has ended (it is not ours to wait for: /proc is polled, as long as it runs)."""
    import time

    from pdctl.ops.ssh_keep import process_running

    while process_running(pid):
        time.sleep(0.05)


def start_resident(keep: float) -> None:
    """Start this code's resident pdctl when none answers, and return at once: it warms up on its own, and a run
    that finds it not listening yet simply runs as usual. Never raises: a resident is only ever a speed-up."""
    try:
        if forked_by_resident or os.environ.get(RESIDENT_ENV, "").strip().lower() in ("0", "off", "no", "false"):
            return
        directory = control_dir_path()
        if private_problem(directory) is not None or not os.path.isdir(directory):
            return
        path = resident_socket(directory)
        lock = os.open(path[:-len(".sock")] + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return   # a resident holds it for its life: one serves (its idle clock restarts with each run)
        finally:
            os.close(lock)
        import subprocess

        spec = json.dumps({"socket": path, "keep": keep})
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        with open(path[:-len(".sock")] + ".log", "ab") as out:
            subprocess.Popen([sys.executable, "-m", "pdctl.resident", spec], stdin=subprocess.DEVNULL, stdout=out,
                             stderr=out, start_new_session=True, cwd="/", env=env)
    except Exception:
        pass
