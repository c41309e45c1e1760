"""`python -m pdctl.transport.keeper SPEC`: one host's SSH connection, kept between pdctl runs (keep_connection).

Started detached by pdctl/transport/kept.py: its own session, stdin /dev/null, output to a log beside its socket,
and no parent pdctl to outlive (it forks once at start). It holds one SshTransport, so the host-key rules,
ssh_config, proxy_jump and timeouts are exactly those of an unkept connection, and serves length-prefixed JSON
requests (wire.py) on a 0600 unix socket in the private control directory (control.py): one request per unix
connection, each in its own thread, errors sent typed. Every connection's peer uid is checked (SO_PEERCRED), and so
is the uid behind every connection to a forwarder it keeps (/proc/net/tcp): both must be the keeper's own.

It ends after `keep` seconds with no request, no request running and no forwarded connection open, on a `close`
request (`pdctl ssh --close`) or SIGTERM: its socket is unlinked first, connections already queued are still
answered, then the SSH connection and its forwarders are closed. A keeper that is stopped (SIGSTOP) or wedged can
do none of this: clients bypass it, and pdctl ends it by the pid it recorded at the start (keeper_pid.py), with
SIGCONT beside the SIGTERM so that the handler below runs.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from pdctl.transport.control import MAX_KEEP_S
from pdctl.transport.peer import tcp_peer_uid, unix_peer_uid
from pdctl.poll import poll_until
from pdctl.transport.host_ops import HOST_OPS, host_op
from pdctl.transport.ssh import SshTransport
from pdctl.transport.wire import encode_error, recv_frame, send_frame

if TYPE_CHECKING:
    from pdctl.inventory_hosts import SshHost

TICK_S = 0.5  # how often idleness and a stop are looked at
REQUEST_READ_S = 30.0  # a client that connects and sends no request is dropped after this
CLOSE_GRACE_S = 5.0  # on `close`, requests still running get this long, then the keeper exits under them


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} keeper[{os.getpid()}] {message}", file=sys.stderr, flush=True)


class Keeper:
    def __init__(self, name: str, host: SshHost, keep: float, socket_path: str):
        self.name, self.keep, self.socket_path = name, keep, socket_path
        self.ssh = SshTransport(name, host)
        self.ssh.tunnels.allow = self._same_user_tcp
        self.uid = os.getuid()
        self.started = time.time()
        self.requests = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns = 0  # unix connections being served
        self._busy = 0  # host requests running (info and close do not count as use)
        self._last = time.monotonic()
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of our socket file
        self.listener: socket.socket | None = None

    # -- the socket ---------------------------------------------------------------------------------------
    def listen(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is 0600 from its first instant, not after a chmod
        try:
            sock.bind(self.socket_path)
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)
        st = os.stat(self.socket_path)
        self._ident = (st.st_dev, st.st_ino)
        sock.listen(128)
        sock.setblocking(False)
        self.listener = sock

    def unlink(self) -> None:
        """Remove our socket file (not one a newer keeper bound at the same path): new clients start another."""
        try:
            st = os.stat(self.socket_path)
            if (st.st_dev, st.st_ino) == self._ident:
                os.unlink(self.socket_path)
        except OSError:
            pass

    @property
    def _listening(self) -> socket.socket:
        if self.listener is None:
            raise RuntimeError("the keeper serves only after listen()")
        return self.listener

    def _same_user_tcp(self, conn: socket.socket) -> bool:
        uid = tcp_peer_uid(conn)
        if uid != self.uid:
            log(f"refused a forwarded connection from uid {uid} (not {self.uid})")
        return uid == self.uid

    # -- serving ------------------------------------------------------------------------------------------
    def serve(self) -> None:
        while not self.stopping.is_set():
            try:
                readable, _, _ = select.select([self._listening], [], [], TICK_S)
            except InterruptedError:
                readable = []
            while readable and self._accept():
                pass
            if self._idle_for() >= self.keep:
                log(f"idle for {self.keep:g} s: ending")
                break
        self.shutdown(CLOSE_GRACE_S if self.stopping.is_set() else 600.0)

    def _accept(self) -> bool:
        try:
            conn, _ = self._listening.accept()
        except (BlockingIOError, InterruptedError):
            return False
        conn.setblocking(True)
        try:
            uid = unix_peer_uid(conn)
        except OSError:
            uid = None
        if uid != self.uid:
            log(f"refused a connection from uid {uid} (not {self.uid})")
            try:
                send_frame(conn, {"refused": f"this keeper serves uid {self.uid} only, not uid {uid}"})
            except OSError:
                pass
            conn.close()
            return True
        with self._lock:
            self._conns += 1
        threading.Thread(target=self._serve_conn, args=(conn,), name="pdctl-keeper-req", daemon=True).start()
        return True

    def _idle_for(self) -> float:
        """Seconds since the last host request or forwarded connection (0 while one runs). A connection whose
        request is not read yet does not count: if it is a host request, shutdown() still answers it."""
        now = time.monotonic()
        with self._lock:
            if self._busy or self.ssh.tunnels.open_connections():
                self._last = now
            return now - self._last

    def _serve_conn(self, conn: socket.socket) -> None:
        op = None
        try:
            conn.settimeout(REQUEST_READ_S)
            send_frame(conn, {"hello": os.getpid()})  # a client that gets no hello may start another keeper
            req = recv_frame(conn)
            conn.settimeout(None)
            op = req.get("op") if isinstance(req, dict) else None
            if op in HOST_OPS:
                with self._lock:
                    self._busy += 1
                    self.requests += 1
            try:
                reply = {"ok": True, "value": self.handle(req)}
            except Exception as e:
                reply = {"ok": False, "error": encode_error(e)}
            send_frame(conn, reply)
        except (OSError, ValueError) as e:  # the client went away or sent garbage: nobody to answer
            log(f"dropped a request ({op}): {type(e).__name__}: {e}")
        finally:
            conn.close()
            with self._lock:
                self._conns -= 1
                if op in HOST_OPS:
                    self._busy -= 1
                    self._last = time.monotonic()

    def handle(self, req: dict[str, Any]) -> Any:
        """One request's answer (JSON-ready); raises what the SshTransport raised."""
        if "keep" in req:  # the newest pdctl's keep_connection wins
            self.keep = min(max(float(req["keep"]), 0.0), MAX_KEEP_S)
        op = req.get("op")
        if op in HOST_OPS:
            return host_op(self.ssh, req)
        if op == "info":
            return self.info()
        if op == "close":
            log("asked to close")
            self.unlink()
            self.stopping.set()
            return self.info()
        raise ValueError(f"unknown request {op!r}")

    def info(self) -> dict[str, Any]:
        idle = self._idle_for()
        return {
            "name": self.name,
            "pid": os.getpid(),
            "socket": self.socket_path,
            "keep": self.keep,
            "idle_for": round(idle, 3),
            "expires_in": round(max(0.0, self.keep - idle), 3),
            "started": self.started,
            "requests": self.requests,
            "running": self._busy,
            "connected": self.ssh.connected,
            "target": f"{self.ssh.target.user}@{self.ssh.where}",
        }

    def _open_conns(self) -> int:
        with self._lock:
            return self._conns

    def shutdown(self, grace: float) -> None:
        """Unlink, answer what was already queued, wait up to `grace` for running requests, close, exit."""
        self.unlink()
        while self._accept():
            pass
        poll_until(self._open_conns, lambda n: n == 0, timeout=grace, interval=0.02, timeout_name="shutdown grace")
        self._listening.close()
        with self._lock:
            running = self._conns
        if running:  # exit under them: their clients see the keeper gone ("unknown"), never a half answer
            log(f"exiting with {running} request(s) unanswered")
        else:
            self.ssh.close()
        log("ended")
        os._exit(0)


def _ready(fd: int, line: str) -> None:
    try:
        os.write(fd, (line + "\n").encode())
        os.close(fd)
    except OSError:
        pass


def main(argv: list[str]) -> None:
    spec = json.loads(argv[1])
    fd = int(spec["ready_fd"])
    if os.fork() > 0:  # the spawning pdctl reaps this one at once; the keeper is nobody's child
        os._exit(0)
    try:
        import msgspec

        from pdctl.inventory_hosts import SshHost

        host = msgspec.convert(spec["host"], SshHost)  # as kept.py dumped it (its `transport: ssh` tag included)
        keeper = Keeper(spec["name"], host, float(spec["keep"]), spec["socket"])
        keeper.listen()
    except Exception as e:
        log(f"could not start: {type(e).__name__}: {e}")
        _ready(fd, f"error {type(e).__name__}: {e}")
        os._exit(1)
    signal.signal(signal.SIGTERM, lambda *_: keeper.stopping.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    log(
        f"serving {spec['name']} ({keeper.ssh.target.user}@{keeper.ssh.where}) on {spec['socket']}, "
        f"idle limit {keeper.keep:g} s"
    )
    _ready(fd, f"ready {os.getpid()}")
    keeper.serve()


if __name__ == "__main__":
    main(sys.argv)
