"""KeptTransport: a host's SSH connection held by a keeper process (keeper.py) between pdctl runs.

The first run with keep_connection on starts the keeper and pays one SSH connection; later runs reach the host
through the keeper's unix socket and pay neither paramiko's import nor a handshake (this module does not import
paramiko). Requests are answered by the keeper's own SshTransport, so every contract of base.Transport holds, with
one addition: close() releases nothing but this process's handle. The connection and its tunnel forwarders stay
with the keeper until `pdctl ssh --close` or keep_connection idle seconds.

Starting a keeper is race-safe: under an flock beside the socket, the first pdctl to find no keeper starts one and
waits (bounded) until it listens; the others then connect to it. A keeper that ends (expiry, kill -9) before
greeting a request is replaced and the request sent to the new one; one that ends after taking a request leaves
it "unknown" (UnreachableError, exit 3), never answered wrongly.

A keeper greets at once; one that does not within GREET_S (SIGSTOPped, wedged) is bypassed: the rest of the run
connects directly, so the host is judged on its own answer, never made "unknown" by pdctl's own helper. When it has
also gone its keep seconds without greeting anyone (keeper_pid.py's record says when it last did), it has outlived
its idle limit and cannot end itself: the run ends it by its recorded pid and starts another.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl.errors import RefusedError, UnreachableError
from pdctl.transport.base import CommandResult, Transport, no_answer
from pdctl.transport.control import KeptPaths, kept_paths
from pdctl.transport.host_ops import host_op
from pdctl.transport.keeper_pid import end_keeper, mark_seen, read_record, write_record
from pdctl.transport.wire import PeerClosed, b64, decode_error, recv_frame, send_frame, unb64

if TYPE_CHECKING:
    from pdctl.inventory_hosts import SshHost

START_MARGIN_S = 5.0  # a keeper gets connect_timeout plus this to start listening (interpreter, imports)
# A keeper's accept loop wakes on the connection and greets from a new thread at once: one that has not greeted
# within this is stopped or wedged, and is bypassed (the host's own connect_timeout bounds it when shorter).
GREET_S = 3.0
# An expired keeper that does not greet gets this long to act on SIGTERM (with SIGCONT), then SIGKILL that long.
EXPIRED_END_S = 1.0


class KeeperSilent(Exception):
    """A keeper listens at the socket but did not greet within its deadline (stopped, wedged)."""


def ask_keeper(socket_path: str, request: dict[str, Any], timeout: float, greet: float = GREET_S) -> Any:
    """The value a running keeper answers to `request`, or None when no keeper listens at `socket_path` (never
    starts one). For `pdctl ssh`: info and close. Raises RefusedError when the keeper refuses this user,
    KeeperSilent when it does not greet within `greet` s, TimeoutError when it does not answer within `timeout` s."""
    conn = _dial(socket_path, greet)
    if conn is None:
        return None
    with conn:
        conn.settimeout(timeout)
        send_frame(conn, request)
        reply = recv_frame(conn)
    return reply.get("value") if reply.get("ok") else None


def _dial(socket_path: str, greet: float) -> socket.socket | None:
    """A unix connection to the keeper at `socket_path` that it greeted, or None when none listens there (no
    socket, a stale one, or a keeper that ended before greeting). KeeperSilent when the connection (a full
    backlog) or the greeting takes more than `greet` s."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(greet)
    try:
        conn.connect(socket_path)
        hello = recv_frame(conn)
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, PeerClosed):
        conn.close()
        return None
    except TimeoutError:
        conn.close()
        raise KeeperSilent(f"the SSH keeper at {socket_path} did not greet within {greet:g} s") from None
    except BlockingIOError:  # EAGAIN: the keeper accepts nothing, and its queue filled with connections it never took
        conn.close()
        raise KeeperSilent(f"the SSH keeper at {socket_path} accepts no connection (its queue is full)") from None
    except BaseException:
        conn.close()
        raise
    if not isinstance(hello, dict) or "hello" not in hello:
        conn.close()
        raise RefusedError(f"the SSH keeper at {socket_path} refused this user: {hello.get('refused', hello)}")
    return conn


class KeptTransport(Transport):
    """Commands, files and HTTP on one SSH host through its keeper. Thread-safe: one unix connection a request."""

    def __init__(self, name: str, host: SshHost, keep: float):
        self.name, self.host, self.keep = name, host, keep
        self._paths: KeptPaths | None = None  # found on first use: a control-directory problem is that call's error
        self._spawn_lock = threading.Lock()
        self._bypass_lock = threading.Lock()
        self._direct: Transport | None = None  # this run's own connection, once the keeper did not greet
        self._ended = 0  # silent keepers this transport ended (expired)

    @property
    def paths(self) -> KeptPaths:
        if self._paths is None:
            self._paths = kept_paths(self.name, self.host)
        return self._paths

    # -- reaching the keeper ------------------------------------------------------------------------------
    def _budget(self, seconds: float) -> float:
        """How long the keeper may take for work bounded by `seconds`: its own bounds (connect, session opening,
        the kill of a timed-out command, a jump hop) plus a margin. Past it the keeper is hung: "unknown"."""
        return seconds + 4 * self.host.connect_timeout + 10

    def _call(self, op: str, budget: float, **args: Any) -> Any:
        conn = self._keeper_or_direct()
        if isinstance(conn, Transport):  # the keeper is bypassed: the same request, asked of the host directly
            return host_op(conn, {"op": op, **args})
        with conn:
            try:
                conn.settimeout(budget)
                send_frame(conn, {"op": op, "keep": self.keep, **args})
                reply = recv_frame(conn)
            except TimeoutError:
                raise no_answer(
                    self.name, budget, f"the SSH keeper at {self.paths.socket} gave no answer to {op}"
                ) from None
            except (OSError, ValueError) as e:  # it ended (killed, crashed) after taking the request
                raise UnreachableError(
                    f"unknown: {self.name}: the SSH keeper ended before answering {op} ({type(e).__name__}: {e})",
                    target=self.name,
                    hint="nothing was concluded about the host; the next pdctl run starts a new keeper",
                ) from None
        mark_seen(self.paths.record)
        if not reply.get("ok"):
            raise decode_error(reply.get("error") or {}, self.name)
        return reply.get("value")

    def _keeper_or_direct(self) -> socket.socket | Transport:
        """A greeted connection to the keeper, or this run's direct connection once a keeper did not greet. An
        expired silent keeper is ended (by its recorded pid) and replaced first."""
        if self._direct is not None:
            return self._direct
        ended = self._ended
        try:
            return self._connection()
        except KeeperSilent as silent:
            why = str(silent)
        with self._bypass_lock:
            if self._direct is None:
                # another thread may have ended that keeper while this one waited: its successor is tried first
                if self._ended != ended or self._end_expired():
                    try:
                        return self._connection()
                    except KeeperSilent as again:
                        why = str(again)
                from pdctl.transport.ssh import SshTransport

                self._note(f"{why}: this run (pid {os.getpid()}) connects to the host directly")
                self._direct = SshTransport(self.name, self.host)
            return self._direct

    def _end_expired(self) -> bool:
        """End the keeper of this host when pdctl recorded it and no client got a word from it for `keep`
        seconds (its idle limit, which a stopped keeper cannot apply itself); whether it is gone."""
        record = read_record(self.paths.record)
        if record is None or time.time() - record.seen < self.keep:
            return False
        ending = end_keeper(record, term_wait=EXPIRED_END_S, kill_wait=EXPIRED_END_S)
        self._ended += ending.ended
        self._note(
            f"the SSH keeper pid {record.pid} gave no word for {time.time() - record.seen:.0f} s (keep "
            f"{self.keep:g} s): " + (f"ended ({ending.how})" if ending.ended else f"not ended: {ending.why}")
        )
        return ending.ended

    def _note(self, line: str) -> None:
        """A line in the keeper's log (beside its socket), where an operator looks when kept runs slow down."""
        try:
            with open(self.paths.log, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pdctl[{os.getpid()}] {line}\n")
        except OSError:
            pass

    def _connection(self) -> socket.socket:
        conn = self._dial()
        if conn is not None:
            return conn
        with self._spawn_lock, self._flock():
            conn = self._dial()  # the winner of a race started it while we waited
            if conn is None:
                self._spawn()
                conn = self._dial()
        if conn is None:
            raise UnreachableError(
                f"unknown: {self.name}: the SSH keeper started but does not answer at {self.paths.socket}",
                target=self.name,
                hint=f"see {self.paths.log}",
            )
        return conn

    def _dial(self) -> socket.socket | None:
        """A greeted connection to the keeper, None when none listens; KeeperSilent when it does not greet."""
        path, greet = self.paths.socket, min(self.host.connect_timeout, GREET_S)
        try:
            conn = _dial(path, greet)
        except OSError as e:
            raise UnreachableError(
                f"unknown: {self.name}: cannot reach the SSH keeper at {path}: {e}",
                target=self.name,
                hint="remove that socket file, or keep_connection: 0",
            ) from None
        if conn is not None:
            mark_seen(self.paths.record)
        return conn

    def _flock(self):
        """The spawn lock beside the socket, waited for at most as long as a keeper takes to start."""
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + 2 * (self.host.connect_timeout + START_MARGIN_S)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return _Held(fd)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise no_answer(
                        self.name,
                        2 * (self.host.connect_timeout + START_MARGIN_S),
                        f"another pdctl holds {self.paths.lock} while starting the SSH keeper",
                    ) from None
                time.sleep(0.02)

    def _spawn(self) -> None:
        """Start a keeper for this host and wait until it listens (or says why it cannot)."""
        import subprocess

        paths, limit = self.paths, self.host.connect_timeout + START_MARGIN_S
        try:
            os.unlink(paths.socket)  # a keeper killed -9 leaves its socket file behind
        except FileNotFoundError:
            pass
        read_end, write_end = os.pipe()
        log = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        spec = {
            "name": self.name,
            "host": self.host.dump(),
            "keep": self.keep,
            "socket": paths.socket,
            "ready_fd": write_end,
        }
        env = dict(os.environ)  # the keeper runs this same pdctl, wherever it was imported from
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pdctl.transport.keeper", json.dumps(spec)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(write_end,),
                start_new_session=True,
                cwd="/",
                env=env,
            )
        finally:
            os.close(write_end)
            os.close(log)
        try:
            line = _read_line(read_end, limit)
        finally:
            os.close(read_end)
            try:  # it forked the keeper and exited, or is still starting (then it is left to finish)
                proc.wait(timeout=0 if line is None else limit)
            except subprocess.TimeoutExpired:
                pass
        if line is None or not line.startswith("ready "):
            why = (
                f"no word within {limit:g} s" if line is None else line.removeprefix("error ")
            ) or f"it ended at once: {_tail(paths.log)}"
            raise UnreachableError(
                f"unknown: {self.name}: the SSH keeper did not start: {why}",
                target=self.name,
                hint=f"its log: {paths.log}",
            )
        try:  # its pid, for `pdctl ssh --close` and the expiry of a keeper that stops answering
            write_record(paths.record, int(line.split()[1]), paths.socket)
        except (OSError, ValueError, IndexError) as e:
            self._note(f"could not record the keeper's pid: {e}")

    # -- the Transport interface ----------------------------------------------------------------------------
    def open(self) -> None:
        """Have the keeper connect now (connect(eager=True)): UnreachableError / HostKeyRefused are raised here."""
        self._call("open", self._budget(0))

    def run(self, command: str, *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        value = self._call("run", self._budget(timeout), command=command, timeout=timeout, env=env)
        return CommandResult(**value)

    def read_file(self, path: str, *, timeout: float = 10.0) -> bytes | None:
        value = self._call("read_file", self._budget(timeout), path=path, timeout=timeout)
        return None if value is None else unb64(value)

    def put_file(self, path: str, content: str | bytes, *, mode: int = 0o644) -> None:
        data = content.encode() if isinstance(content, str) else content
        self._call("put_file", self._budget(2 * self.host.command_timeout), path=path, content=b64(data), mode=mode)

    def http_base_url(self, port: int, *, host: str = "127.0.0.1") -> str:
        """A URL of a forwarder the keeper listens on (http=tunnel), kept for the keeper's life, or the direct URL."""
        return self._call("http_base_url", self._budget(0), port=port, host=host)

    @property
    def http_tunnel(self) -> bool:
        return self.host.http_route == "tunnel"

    def tunnel_failure(self, url: str, since: float = 0.0) -> str | None:
        """As the keeper's forwarder saw it (CLOCK_MONOTONIC is one clock for every process on Linux)."""
        if not self.http_tunnel:
            return None
        try:
            return self._call("tunnel_failure", self._budget(0), url=url, since=since)
        except Exception:
            return None

    def reach(self) -> None:
        self.run("true", timeout=self.host.connect_timeout + 5)

    def close(self) -> None:
        """Each request had its own unix connection; the keeper keeps the SSH connection. Only a direct connection
        this run made (the keeper did not greet) is closed."""
        direct, self._direct = self._direct, None
        if direct is not None:
            direct.close()

    def __repr__(self) -> str:
        return f"KeptTransport({self.name!r}, keep={self.keep:g}s)"


class _Held:
    """An flock held on an open file descriptor, released with it."""

    def __init__(self, fd: int):
        self.fd = fd

    def __enter__(self) -> "_Held":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


def _read_line(fd: int, limit: float) -> str | None:
    """The first line written to the pipe `fd` within `limit` seconds: "" on EOF without one, None on timeout."""
    buf, deadline = b"", time.monotonic() + limit
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n", 1)[0].decode(errors="replace")


def _tail(path: str, size: int = 600) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return " | ".join(f.read().decode(errors="replace").strip().splitlines()[-4:]) or "(empty log)"
    except OSError:
        return "(no log)"
