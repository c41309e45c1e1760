"""The uid behind a loopback TCP connection (transport/peer.py), asked of the kernel two ways: sock_diag, which a
keeper uses for each forwarded connection, and /proc/net/tcp, its fallback. Both must name the connecting
process's user, here `nobody` (a real child process), never the listener's."""

from __future__ import annotations

import os
import pwd
import socket
import subprocess

import pytest

from pdctl.transport.peer import _diag_uid, _table_uid, tcp_peer_uid


@pytest.fixture
def nobody_connection():
    if os.getuid() != 0:
        pytest.skip("needs root to run a child as another user")
    nobody = pwd.getpwnam("nobody")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    # bash's /dev/tcp: a binary nobody may run (this interpreter may live under a private home); it holds the
    # connection until the listener closes it
    child = subprocess.Popen(
        ["/bin/bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{srv.getsockname()[1]}; read -u 3"],
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
        cwd="/",
    )
    srv.settimeout(30)
    conn, _ = srv.accept()
    try:
        yield conn, nobody.pw_uid
    finally:
        conn.close()
        srv.close()
        child.wait(30)


def test_sock_diag_and_proc_net_tcp_both_name_the_connecting_user(nobody_connection):
    conn, uid = nobody_connection
    assert uid != os.getuid()
    assert _diag_uid(conn.getpeername(), conn.getsockname()) == uid
    assert tcp_peer_uid(conn) == uid
    assert _table_uid(conn, "/proc/net/tcp") == uid


def test_a_socket_that_is_not_there_is_none_from_sock_diag():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        port = srv.getsockname()[1]
        assert _diag_uid(("127.0.0.1", port), ("127.0.0.1", 9)) is None


def test_a_peer_closed_before_the_accept_is_unknown_not_root():
    """connect, write, close, then the accept: the kernel keeps the closed socket as an orphan with uid 0. Read as
    root, a keeper running as root would forward another user's request: it must be "not found" instead."""
    if os.getuid() != 0:
        pytest.skip("needs root to run a child as another user")
    nobody = pwd.getpwnam("nobody")
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        subprocess.run(
            ["/bin/bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}; echo GET >&3; exec 3>&-"],
            user=nobody.pw_uid,
            group=nobody.pw_gid,
            extra_groups=[],
            cwd="/",
            check=True,
            timeout=30,
        )
        srv.settimeout(10)
        conn, _ = srv.accept()
        with conn:
            assert conn.recv(10) == b"GET\n"  # the bytes are still there to forward
            assert _diag_uid(conn.getpeername(), conn.getsockname()) is None
            assert _table_uid(conn, "/proc/net/tcp") is None
            assert tcp_peer_uid(conn) is None
