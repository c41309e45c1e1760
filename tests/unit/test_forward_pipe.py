"""Forwarder's per-connection pipe when the SSH transport goes away under it (the end of a cold run closes the
connection while a pooled HTTP connection's pipe is still open). A fake channel: paramiko's EOFError from
Channel.close on a closed transport is the one behaviour under test; the real tunnel is tested in tests/e2e."""

from __future__ import annotations

import socket
import threading

from pdctl.transport.forward import Forwarder


class _ClosedTransportChannel:
    """A channel whose peer already hung up and whose close() finds the transport's socket gone."""

    def __init__(self):
        self.a, self.b = socket.socketpair()
        self.b.close()

    def fileno(self):
        return self.a.fileno()

    def recv(self, n):
        return b""

    def sendall(self, data):
        pass

    def close(self):
        self.a.close()
        raise EOFError()


class _Ssh:
    def open_channel(self, *args, **kwargs):
        return _ClosedTransportChannel()


def test_a_channel_closed_on_a_gone_transport_ends_the_pipe_quietly():
    raised = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: raised.append(args.exc_type)
    fwd = Forwarder(_Ssh(), "127.0.0.1", 9)
    try:
        client = socket.create_connection(("127.0.0.1", fwd.local_port), timeout=5)
        client.settimeout(5)
        assert client.recv(1) == b""  # the pipe ended and closed the local side
        client.close()
        for t in [t for t in threading.enumerate() if t.name.startswith("Thread-") and "_pipe" in t.name]:
            t.join(5)
    finally:
        fwd.close()
        threading.excepthook = old_hook
    assert raised == []
