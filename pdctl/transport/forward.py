"""Local port forwarding over an SSH connection: how pdctl reaches a role that listens on 127.0.0.1 of its host."""

from __future__ import annotations

import select
import socket
import threading


class Forwarder:
    """A listening socket on 127.0.0.1:<ephemeral> piping each connection through a direct-tcpip channel."""

    def __init__(self, ssh_transport, host: str, port: int):
        self.ssh = ssh_transport
        self.host, self.port = host, port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.local_port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
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
        with self._conns_lock:
            self._conns.add(conn)
        chan = None
        try:
            chan = self.ssh.open_channel("direct-tcpip", (self.host, self.port), peer, timeout=10)
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
                chan.close()
            conn.close()
            with self._conns_lock:
                self._conns.discard(conn)

    def close(self) -> None:
        self._stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)   # wakes the accept loop now, not at its next 0.2 s timeout
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
