"""Who is on the other end of a local connection: the uid of a unix socket's peer (SO_PEERCRED) and of a loopback
TCP peer (its row of /proc/net/tcp). A keeper serves only its own user: its SSH connection and the forwarders it
keeps open for hours must not become another local user's way onto the host."""

from __future__ import annotations

import socket
import struct

_UCRED = struct.Struct("3i")   # pid, uid, gid


def unix_peer_uid(conn: socket.socket) -> int:
    """The effective uid of the process that connected this unix socket (recorded by the kernel at connect)."""
    _pid, uid, _gid = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return uid


def _proc_net_addr(addr: tuple[str, int]) -> str:
    """An IPv4 (address, port) as /proc/net/tcp spells it: the address's bytes as a native-endian hex word."""
    (word,) = struct.unpack("=I", socket.inet_aton(addr[0]))
    return f"{word:08X}:{addr[1]:04X}"


def tcp_peer_uid(conn: socket.socket, table: str = "/proc/net/tcp") -> int | None:
    """The uid owning the other end of an accepted IPv4 loopback TCP connection, or None when it cannot be found
    (then the caller refuses: the check fails closed)."""
    try:
        peer, me = _proc_net_addr(conn.getpeername()), _proc_net_addr(conn.getsockname())
        with open(table, encoding="ascii") as f:
            next(f)   # the header
            for line in f:
                cols = line.split()
                if len(cols) > 7 and cols[1] == peer and cols[2] == me:
                    return int(cols[7])
    except (OSError, ValueError, StopIteration):
        return None
    return None
