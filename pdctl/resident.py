"""`python -m pdctl.resident SPEC`: a pdctl kept warm between runs, which the next `pdctl verify` forks instead of
starting an interpreter and importing its modules again (issue 11: a warm check costs about what its work costs).

Who starts it: a run with kept SSH connections (keep_connection, $PDCTL_SSH_KEEP), on its way out
(resident_client.start_resident). The same opt-in, the same private control directory, the same idle rule: it
ends after its keep seconds with no run, on `pdctl ssh --close`, on SIGTERM, or when its socket file is gone.

Only `pdctl verify ...` is served (the read-only checks). resident_client.py sends its argv, working directory,
environment, umask and its three standard streams (SCM_RIGHTS), and the resident forks a child that becomes that
run: same streams, so the output, the terminal's width and the progress line are the caller's. The child is the
resident's, so its exit status comes back on the connection; a client that goes away has its run hung up
(SIGHUP, as a closed terminal does).

One thread, no threads started before a fork: the listener, the clients' connections and SIGCHLD (a wakeup pipe)
are all watched by one selector. Every connection's peer uid is checked (SO_PEERCRED): only its own user's runs.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import locale
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

from pdctl.resident_paths import private_problem
from pdctl.transport.peer import unix_peer_uid
from pdctl.transport.wire import recv_frame_with_fds, send_frame

TICK_S = 1.0            # how often idleness and the socket file are looked at
REQUEST_READ_S = 5.0    # a client that connects and sends no whole request is dropped after this
SERVED = ("verify",)    # argv[1] of the runs a resident serves: read-only checks
PASSED_ON = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT}   # what resident_client forwards
#: What a `pdctl verify` run imports, loaded once here so each forked run starts with them.
WARM_MODULES = ("pdctl.cli.app", "pdctl.cli.verify", "pdctl.ops.verify", "pdctl.ops.fanout",
                "pdctl.ops.lineage_record", "pdctl.checks.e2e", "pdctl.checks.flags", "pdctl.checks.health",
                "pdctl.checks.lineage", "pdctl.checks.metrics", "pdctl.checks.proc", "pdctl.checks.router",
                "pdctl.checks.sampling", "pdctl.checks.systemd_restarts", "pdctl.checks.transfer",
                "pdctl.render.health", "pdctl.render.progress", "pdctl.render.report", "pdctl.render.screen",
                "pdctl.services.observe", "pdctl.services.pidfile", "pdctl.services.systemd", "pdctl.transport.kept",
                "pdctl.inventory", "concurrent.futures", "rich.console", "yaml")


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} resident[{os.getpid()}] {message}", file=sys.stderr, flush=True)


class Resident:
    def __init__(self, socket_path: str, keep: float):
        self.socket_path, self.keep = socket_path, keep
        self.uid = os.getuid()
        self.sel = selectors.DefaultSelector()
        self.runs: dict[int, socket.socket] = {}      # child pid -> its client's connection
        self.last = time.monotonic()
        self.stopping = False
        self.served = 0
        self._ident: tuple[int, int] | None = None

    # -- the socket -------------------------------------------------------------------------------------------
    def listen(self) -> None:
        try:
            os.unlink(self.socket_path)   # a resident killed -9 leaves its file; the flock says none runs
        except FileNotFoundError:
            pass
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)   # 0600 from its first instant
        try:
            self.listener.bind(self.socket_path)
        finally:
            os.umask(old)
        st = os.stat(self.socket_path)
        self._ident = (st.st_dev, st.st_ino)
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)   # a handler, so the wakeup fd hears of it
        signal.signal(signal.SIGTERM, lambda *_: self.stop("SIGTERM"))
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")

    def ours(self) -> bool:
        try:
            st = os.stat(self.socket_path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._ident

    def stop(self, why: str) -> None:
        if not self.stopping:
            log(f"ending: {why}")
            self.stopping = True
            if self.ours():
                os.unlink(self.socket_path)

    # -- serving ----------------------------------------------------------------------------------------------
    def serve(self) -> None:
        while not (self.stopping and not self.runs):
            for key, _ in self.sel.select(TICK_S):
                if key.data == "accept":
                    self._accept()
                elif key.data == "wake":
                    self._reap()
                else:
                    self._hung_up(key.fileobj, key.data)
            self._reap()
            if not self.runs and not self.stopping:
                if not self.ours():
                    self.stop("its socket file is gone")
                elif time.monotonic() - self.last >= self.keep:
                    self.stop(f"idle for {self.keep:g} s")
        log(f"ended after {self.served} run(s)")

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn.setblocking(True)
        try:
            uid = unix_peer_uid(conn)
            if uid != self.uid:
                log(f"refused a connection from uid {uid} (not {self.uid})")
                send_frame(conn, {"refused": f"this resident pdctl serves uid {self.uid} only, not uid {uid}"})
                return conn.close()
            conn.settimeout(REQUEST_READ_S)
            send_frame(conn, {"hello": os.getpid()})
            req, fds = recv_frame_with_fds(conn, 3)
        except (OSError, ValueError) as e:
            log(f"dropped a connection: {type(e).__name__}: {e}")
            return conn.close()
        op = req.get("op") if isinstance(req, dict) else None
        forked = False
        try:
            argv = req.get("argv") if op == "run" else None
            if op == "run" and len(fds) == 3 and not self.stopping and argv[1:2] and argv[1] in SERVED:
                self._fork(conn, req, fds)
                forked = True
            elif op == "info":
                send_frame(conn, {"ok": True, "value": self.info()})
            elif op == "close":
                send_frame(conn, {"ok": True, "value": self.info()})
                self.stop("asked to close")
            else:   # the client runs it itself
                send_frame(conn, {"refused": f"not served: {op!r}"})
        except (OSError, ValueError, KeyError, TypeError) as e:
            log(f"dropped a request ({op}): {type(e).__name__}: {e}")
        finally:
            for fd in fds:
                os.close(fd)
            if not forked:
                conn.close()

    def _fork(self, conn: socket.socket, req: dict[str, Any], fds: list[int]) -> None:
        """Fork the run. The signals a client passes on are blocked across the fork, so one that arrives before
        the child has its own handlers waits for them (never the resident's SIGTERM handler in the child)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, PASSED_ON)
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    _become_run(req, fds)
                finally:   # whatever happens in the child, it never returns into the resident's loop
                    os._exit(70)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)
        self.served += 1
        self.last = time.monotonic()
        self.runs[pid] = conn
        conn.settimeout(None)
        self.sel.register(conn, selectors.EVENT_READ, pid)
        try:
            send_frame(conn, {"pid": pid})
        except OSError:   # the client is gone already: nobody watches this run, as with a closed terminal
            self._hang_up(conn, pid)

    def _hung_up(self, conn: socket.socket, pid: int) -> None:
        """The client's connection became readable while its run goes on: it went away, or sent bytes it has no
        reason to send (ignored from then on, so the loop does not spin on them)."""
        try:
            data = conn.recv(1, socket.MSG_PEEK)
        except OSError:
            data = b""
        if data:
            log(f"the client of run {pid} sent unexpected bytes: no longer watched for hang-up")
            self.sel.unregister(conn)
        else:
            self._hang_up(conn, pid)

    def _hang_up(self, conn: socket.socket, pid: int) -> None:
        self.sel.unregister(conn)
        try:
            os.kill(pid, signal.SIGHUP)   # as a terminal closing under a run
        except ProcessLookupError:
            pass

    def _reap(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass
        while self.runs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.runs.pop(pid, None)
            self.last = time.monotonic()
            if conn is None:
                continue
            try:
                self.sel.unregister(conn)
            except (KeyError, ValueError):
                pass
            try:
                send_frame(conn, {"exit": os.waitstatus_to_exitcode(status)})
            except OSError:
                pass
            conn.close()

    def info(self) -> dict[str, Any]:
        idle = 0.0 if self.runs else time.monotonic() - self.last
        return {"pid": os.getpid(), "socket": self.socket_path, "keep": self.keep, "served": self.served,
                "running": len(self.runs), "idle_for": round(idle, 3),
                "expires_in": round(max(0.0, self.keep - idle), 3)}


def _become_run(req: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: take the client's streams, directory, environment and argv, and run pdctl's CLI to
    its exit, as `python -m pdctl` would (an uncaught exception: its traceback and exit 1)."""
    import random
    import threading
    import traceback

    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in req.get("ignored") or []:   # as the caller had them: nohup's SIGHUP stays ignored
            if sig in PASSED_ON:
                signal.signal(sig, signal.SIG_IGN)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.closerange(3, 65536)   # the listener, other clients' connections, the flock: none is this run's
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        time.tzset()   # TZ: local times (the lineage rows) in the caller's zone
        try:
            locale.setlocale(locale.LC_CTYPE, "")   # as the interpreter does at start, with the caller's LANG
        except locale.Error:
            pass
        os.umask(int(req["umask"]))
        sys.argv = list(req["argv"])
        _take_streams(req["streams"], unbuffered=bool(os.environ.get("PYTHONUNBUFFERED")))
        random.seed()   # a fork inherits the generator's state; each run gets its own
    except BaseException as e:   # the client gets exit 70 and this line; the resident goes on
        os.write(2, f"pdctl: the resident pdctl could not start this run: {type(e).__name__}: {e}\n".encode())
        os._exit(70)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)   # a signal that came meanwhile is delivered now
    from pdctl import resident_client
    from pdctl.__main__ import leave, run_cli

    resident_client.forked_by_resident = True

    try:
        run_cli()
    except SystemExit as e:   # run_cli returned it because a non-daemon thread ran: wait for it, as Python does
        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon:
                t.join()
        leave(e)
    except KeyboardInterrupt:   # Ctrl-C before pdctl's own handlers: end by SIGINT, as the interpreter would
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        leave(SystemExit(1))
    leave(SystemExit(0))


def _take_streams(streams: list[list[str]], *, unbuffered: bool) -> None:
    """sys.stdin/stdout/stderr on fds 0-2 (the caller's), set up as the interpreter sets up its own: stderr and a
    terminal's stdout line-buffered, everything written through with PYTHONUNBUFFERED."""
    import io

    for i, (name, (encoding, errors)) in enumerate(zip(("stdin", "stdout", "stderr"), streams)):
        raw = io.FileIO(i, "r" if i == 0 else "w", closefd=False)
        if i == 0:
            stream = io.TextIOWrapper(io.BufferedReader(raw), encoding=encoding, errors=errors)
        else:
            binary = raw if unbuffered else io.BufferedWriter(raw)
            stream = io.TextIOWrapper(binary, encoding=encoding, errors=errors, write_through=unbuffered,
                                      line_buffering=i == 2 or os.isatty(i))
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def main(argv: list[str]) -> None:
    spec = json.loads(argv[1])
    if os.fork() > 0:   # nobody's child: the spawning pdctl exits without waiting for us
        os._exit(0)
    directory = os.path.dirname(spec["socket"])
    problem = private_problem(directory)
    if problem:
        log(f"not starting: {directory} {problem}")
        os._exit(1)
    lock = os.open(spec["socket"][:-len(".sock")] + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)   # held for our life: one resident per socket
    except BlockingIOError:
        os._exit(0)
    for name in WARM_MODULES:
        importlib.import_module(name)
    from pdctl.checks.metrics import warm_parser

    warm_parser()
    resident = Resident(spec["socket"], float(spec["keep"]))
    resident.listen()
    log(f"serving `pdctl {' | '.join(SERVED)}` on {spec['socket']}, idle limit {resident.keep:g} s")
    resident.serve()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
