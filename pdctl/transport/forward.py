"""Local port forwarding over an SSH connection: how pdctl reaches a role that listens on 127.0.0.1 of its host.

A tunnel's local port means nothing to an operator: `Tunnels.failure(url)` says why the host's sshd could not
connect a tunnel URL to its target (e.g. "connection refused"), so that a role down behind a tunnel is reported by
its address on the host and sshd's reason, not by a local port and a reset connection.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from typing import Callable


OPEN_CONNECT_FAILED = 2  # RFC 4254 5.1: the server's connect() to the target failed (refused, for a closed port)


def channel_failure(exc: BaseException) -> str:
    """Why a direct-tcpip channel did not open, in plain words. paramiko hands the server's refusal to one waiting
    thread only; the others get a bare "Unable to open channel.", which is the same refusal."""
    code = getattr(exc, "code", None)  # paramiko.ChannelException(code, text)
    if code == OPEN_CONNECT_FAILED or "Unable to open channel" in str(exc):
        return "connection refused"
    text = getattr(exc, "text", None) or str(exc)
    return f"the SSH server opened no channel ({text})" if text else f"no channel opened ({type(exc).__name__})"


class Forwarder:
    """A listening socket on 127.0.0.1:<ephemeral> piping each connection through a direct-tcpip channel."""

    def __init__(self, ssh_transport, host: str, port: int, allow: Callable[[socket.socket], bool] | None = None):
        self.ssh = ssh_transport
        self.host, self.port = host, port
        self.allow = allow  # who may use the forwarder (a keeper's: only its own user); None: anyone local
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.local_port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self.last_failure: tuple[float, str] | None = None  # (when, why) the last channel did not open
        self._thread = threading.Thread(target=self._accept_loop, name=f"pdctl-fwd-{port}", daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(conn, peer), daemon=True).start()

    def _pipe(self, conn: socket.socket, peer) -> None:
        if self.allow is not None and not self.allow(conn):
            conn.close()
            return
        with self._conns_lock:
            self._conns.add(conn)
        chan = None
        try:
            try:
                chan = self.ssh.open_channel("direct-tcpip", (self.host, self.port), peer, timeout=10)
            except Exception as e:  # said by whoever asked, through Tunnels.failure(), not logged here
                self.last_failure = (time.monotonic(), channel_failure(e))
                raise
            while not self._stop.is_set():
                r, _, _ = select.select([conn, chan], [], [], 0.2)
                if conn in r:
                    data = conn.recv(65536)
                    if not data:
                        break
                    chan.sendall(data)
                if chan in r:
                    data = chan.recv(65536)
                    if not data:
                        break
                    conn.sendall(data)
        except Exception:
            pass  # the client sees its connection closed; the HTTP layer reports it
        finally:
            if chan is not None:
                try:
                    chan.close()
                except Exception:  # the SSH transport closed under us (EOFError at the end of a run): nothing to say
                    pass
            conn.close()
            with self._conns_lock:
                self._conns.discard(conn)

    def close(self) -> None:
        self._stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept loop now, not at its next 0.2 s timeout
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=2)

    def open_connections(self) -> int:
        with self._conns_lock:
            return len(self._conns)


class Tunnels:
    """The forwarders of one SSH host, one per (address on the host, port); thread-safe."""

    def __init__(self, host_name: str, allow: Callable[[socket.socket], bool] | None = None):
        self.host_name = host_name
        self.allow = allow  # handed to every forwarder made from here on
        self._lock = threading.Lock()
        self._by_target: dict[tuple[str, int], Forwarder] = {}

    def url(self, host: str, port: int, ssh_transport: Callable[[], object]) -> str:
        """A local URL forwarded to host:port on the host, made once and remade when its connection dropped.
        `ssh_transport()` gives the live paramiko Transport (connecting if needed; it may raise)."""
        key = (host, port)
        with self._lock:
            fwd = self._by_target.get(key)
            if fwd is not None and not fwd.ssh.is_active():  # the connection dropped: forward over a new one
                self._by_target.pop(key).close()
                fwd = None
        if fwd is None:
            ssh = ssh_transport()
            with self._lock:
                fwd = self._by_target.get(key)
                if fwd is None:
                    fwd = self._by_target[key] = Forwarder(ssh, host, port, self.allow)
        return f"http://127.0.0.1:{fwd.local_port}"

    def _find(self, url: str) -> Forwarder | None:
        with self._lock:
            return next(
                (f for f in self._by_target.values() if url.startswith(f"http://127.0.0.1:{f.local_port}")), None
            )

    def failure(self, url: str, since: float = 0.0) -> str | None:
        """Why the host's sshd last failed to connect a tunnel URL to its target (at or after monotonic `since`)."""
        fwd = self._find(url)
        if fwd is None or fwd.last_failure is None or fwd.last_failure[0] < since:
            return None
        return fwd.last_failure[1]

    def open_connections(self) -> int:
        """How many forwarded connections are open now (a keeper does not expire while one is)."""
        with self._lock:
            forwarders = list(self._by_target.values())
        return sum(f.open_connections() for f in forwarders)

    def close(self) -> None:
        with self._lock:
            forwarders, self._by_target = list(self._by_target.values()), {}
        for fwd in forwarders:
            fwd.close()
