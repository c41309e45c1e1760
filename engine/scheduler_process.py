"""The scheduler in a process of its own, as SGLang lays a server out: the HTTP process (uvicorn, the API) forks
the scheduler process before either imports torch; the scheduler process builds the model, the KV pool, the
transfer backend and the metrics, and runs the scheduler thread. They talk over one pipe.

Why: in one process the scheduler thread shared the GIL with uvicorn's thread and the KV bootstrap threads, and
under load it waited for the GIL after each decode step; the batched step only scales when nothing else holds it.

Messages, HTTP process -> scheduler process:
  ("req", key, fields)     a Req's fields (everything but its sink); events come back under `key`
  ("abort", rid, all)      as /abort_request
  ("call", cid, name)      one of CALLS, answered with ("reply", cid, value, error)
  ("observe", name, value) a histogram observation the HTTP process measured (its metrics live here)
Scheduler process -> HTTP process:
  ("built", info) / ("fail", message)   once, when the build ends
  ("ready",)                            once, after the warm-up generation
  ("ev", key, [events])    a request's events (engine/events.py) in order (a non-streaming one's all at once, at
                           its end)

The scheduler process ignores SIGINT and SIGTERM: it ends when the HTTP process does (the pipe closes, and the
kernel's parent-death signal backs that up), so a stop, a systemd stop or Ctrl-C ends the server as before and
its exit status is the HTTP process's. If the scheduler process dies, the HTTP process exits 1: a server whose
API answers while nothing generates would pass /health."""

from __future__ import annotations

import concurrent.futures
import ctypes
import dataclasses
import itertools
import logging
import multiprocessing.connection as mpc
import os
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING

from engine import loads
from engine.events import Event, Sink, ends
from engine.req import Req

if TYPE_CHECKING:
    from engine.engine_state import EngineState

log = logging.getLogger("engine")
PR_SET_PDEATHSIG = 1
# What the HTTP process may ask the scheduler process for (each a function of the EngineState there).
CALLS = {
    "metrics": lambda st: st.metrics.render(),
    "server_info": lambda st: st.server_info(),
    "num_active": lambda st: st.scheduler.num_active(),
    "loads": lambda st: [loads.snapshot(st)],  # /v1/loads: one snapshot per DP rank
}
# A Req's runtime state stays in the scheduler process; everything else crosses.
_LOCAL = {"sink", "gen", "cache"}
WIRE_FIELDS = tuple(f.name for f in dataclasses.fields(Req) if f.name not in _LOCAL)


class Pipe:
    """One end of the pipe, with sends serialised (several threads send)."""

    def __init__(self, conn: mpc.Connection):
        self.conn, self.lock = conn, threading.Lock()

    def send(self, msg) -> None:
        with self.lock:
            self.conn.send(msg)

    def recv(self):
        return self.conn.recv()


def fork(child_main) -> tuple[int, Pipe]:
    """Fork the scheduler process; it runs child_main(pipe) and never returns. -> (its pid, this end)."""
    ours, theirs = socket.socketpair()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        ours.close()
        code = 1
        try:
            _become_child(parent)
            child_main(Pipe(mpc.Connection(theirs.detach())))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    theirs.close()
    return pid, Pipe(mpc.Connection(ours.detach()))


def _become_child(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the closed pipe still ends it
        pass
    if os.getppid() != parent:  # the HTTP process died before the signal was armed
        os._exit(0)


# -- the scheduler process ---------------------------------------------------------------------------------
def serve(pipe: Pipe, st: EngineState) -> None:
    """Answer the HTTP process until it goes away. st: the built EngineState (scheduler running)."""
    sched = st.running()

    def send(msg) -> None:
        try:
            pipe.send(msg)
        except OSError:  # the HTTP process is gone: so is every client
            os._exit(0)

    def sink_for(key: int, stream: bool) -> Sink:
        if stream:
            return lambda ev: send(("ev", key, [ev]))
        held: list[Event] = []

        def sink(ev: Event) -> None:  # a non-streaming answer is read only at its end: cross once
            held.append(ev)
            if ends(ev):
                send(("ev", key, held[:]))
                held.clear()

        return sink

    while True:
        try:
            msg = pipe.recv()
        except (EOFError, OSError):
            os._exit(0)
        if msg[0] == "req":
            _, key, fields = msg
            sched.submit(Req(sink=sink_for(key, fields["stream"]), **fields))
        elif msg[0] == "abort":
            sched.abort(msg[1], msg[2])
        elif msg[0] == "observe":
            st.metrics.observe(msg[1], msg[2])
        elif msg[0] == "call":
            _, cid, name = msg
            try:
                send(("reply", cid, CALLS[name](st), None))
            except Exception as e:  # the caller answers 500 with it; the scheduler goes on
                send(("reply", cid, None, f"{type(e).__name__}: {e}"))


# -- the HTTP process --------------------------------------------------------------------------------------
class SchedulerClient:
    """The scheduler as the HTTP layer sees it (submit, abort), plus calls into the scheduler process."""

    def __init__(self, pid: int, pipe: Pipe):
        self.pid, self.pipe = pid, pipe
        self.sinks: dict[int, Sink] = {}
        self.calls: dict[int, concurrent.futures.Future] = {}
        self.keys = itertools.count()
        self.lock = threading.Lock()
        self.stopping = False

    def wait_built(self) -> dict:
        """The build's outcome: its info, or SystemExit(1) after printing why it failed."""
        try:
            msg = self.pipe.recv()
        except (EOFError, OSError):
            msg = ("fail", f"the scheduler process exited during start-up ({self._reap()})")
        if msg[0] == "built":
            return msg[1]
        if msg[1]:
            print(f"error: {msg[1]}", file=sys.stderr)
        self._reap()
        raise SystemExit(1)

    def start(self, on_ready) -> None:
        threading.Thread(target=self._read, args=(on_ready,), name="scheduler-pipe", daemon=True).start()

    def submit(self, req: Req) -> None:
        key = next(self.keys)
        with self.lock:
            self.sinks[key] = req.sink
        self.pipe.send(("req", key, {f: getattr(req, f) for f in WIRE_FIELDS}))

    def abort(self, rid: str | None, abort_all: bool = False) -> None:
        self.pipe.send(("abort", rid, abort_all))

    def observe(self, name: str, value: float) -> None:
        self.pipe.send(("observe", name, value))

    def call(self, name: str) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        cid = next(self.keys)
        with self.lock:
            self.calls[cid] = fut
        self.pipe.send(("call", cid, name))
        return fut

    def _read(self, on_ready) -> None:
        while True:
            try:
                msg = self.pipe.recv()
            except (EOFError, OSError):
                break
            try:
                self._handle(msg, on_ready)
            except Exception:  # a reader that died quietly would leave every request and call hanging
                log.exception("the scheduler pipe's reader failed; stopping the server")
                self._exit()
        if self.stopping:
            return
        log.error("the scheduler process exited (%s); stopping the server", self._reap())
        self._exit()

    def _handle(self, msg, on_ready) -> None:
        if msg[0] == "ev":
            _, key, evs = msg
            with self.lock:
                sink = self.sinks.get(key)
                if ends(evs[-1]):
                    self.sinks.pop(key, None)
            if sink is None:
                return
            for ev in evs:
                try:
                    sink(ev)
                except RuntimeError:  # the event loop has closed (shutdown): nobody waits for this answer
                    return
        elif msg[0] == "reply":
            _, cid, value, err = msg
            with self.lock:
                fut = self.calls.pop(cid)
            if fut.done():  # the handler that asked was cancelled
                return
            if err is None:
                fut.set_result(value)
            else:
                fut.set_exception(RuntimeError(err))
        elif msg[0] == "ready":
            on_ready()

    @staticmethod
    def _exit() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    def stop(self) -> None:
        """End the scheduler process and wait for it, so that its ports (bootstrap, KV transfer) are free once this
        process is gone: a restart binds them again at once."""
        self.stopping = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reap()

    def _reap(self) -> str:
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "status unknown"
        if os.WIFSIGNALED(status):
            return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        return f"exit code {os.WEXITSTATUS(status)}"
