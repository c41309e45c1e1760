"""Who is on the other end of a local connection: the uid of a unix socket's peer (SO_PEERCRED) and of a loopback
TCP peer (sock_diag, else its row of /proc/net/tcp). A keeper serves only its own user: its SSH connection and the
forwarders it keeps open for hours must not become another local user's way onto the host.

A TCP socket its owner has closed (connect, write, close before the accept) stays in the kernel as an orphan with
uid 0 and inode 0: that reads as root. The owner is only known while the socket has an inode, so a peer without
one is "not found" (None), and the caller refuses it."""

from __future__ import annotations

import socket
import struct

_UCRED = struct.Struct("3i")  # pid, uid, gid


def unix_peer_uid(conn: socket.socket) -> int:
    """The effective uid of the process that connected this unix socket (recorded by the kernel at connect)."""
    _pid, uid, _gid = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return uid


def _proc_net_addr(addr: tuple[str, int]) -> str:
    """An IPv4 (address, port) as /proc/net/tcp spells it: the address's bytes as a native-endian hex word."""
    (word,) = struct.unpack("=I", socket.inet_aton(addr[0]))
    return f"{word:08X}:{addr[1]:04X}"


# sock_diag (what `ss` asks): one socket looked up by its four-tuple. /proc/net/tcp lists every socket of the
# machine, and reading it costs ~5 ms with a few hundred of them: a keeper checked each forwarded connection so.
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST = 4, 20, 1
_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_DIAG_REQ = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states
_SOCKID = struct.Struct(">HH16s16s")  # sport, dport, src, dst (network order)
_SOCKID_TAIL = struct.Struct("=III")  # interface, cookie (none: all ones)
_DIAG_MSG_UID = 4 + _SOCKID.size + _SOCKID_TAIL.size + 12  # family..retrans, id, expires, rqueue, wqueue


def _diag_uid(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The uid of the IPv4 TCP socket whose own address is `local` and whose peer is `remote` (sock_diag)."""
    req = (
        _DIAG_REQ.pack(socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
        + _SOCKID.pack(
            local[1],
            remote[1],
            socket.inet_aton(local[0]).ljust(16, b"\0"),
            socket.inet_aton(remote[0]).ljust(16, b"\0"),
        )
        + _SOCKID_TAIL.pack(0, 0xFFFFFFFF, 0xFFFFFFFF)
    )
    msg = _NLMSG.pack(_NLMSG.size + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + req
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(1.0)
        nl.send(msg)
        reply = nl.recv(4096)
    length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(reply)
    if kind != _SOCK_DIAG_BY_FAMILY or length < _NLMSG.size + _DIAG_MSG_UID + 8:
        return None  # NLMSG_ERROR: no such socket (or no sock_diag here)
    uid, inode = struct.unpack_from("=II", reply, _NLMSG.size + _DIAG_MSG_UID)
    return uid if inode else None  # an orphan (closed by its owner) reads uid 0


def tcp_peer_uid(conn: socket.socket, table: str = "/proc/net/tcp") -> int | None:
    """The uid owning the other end of an accepted IPv4 loopback TCP connection, or None when it cannot be found
    (then the caller refuses: the check fails closed). Asks sock_diag, else reads `table`."""
    try:
        uid = _diag_uid(conn.getpeername(), conn.getsockname())
        if uid is not None:
            return uid
    except (OSError, struct.error):
        pass
    return _table_uid(conn, table)


def _table_uid(conn: socket.socket, table: str) -> int | None:
    """The same, from /proc/net/tcp's row of the peer socket."""
    try:
        peer, me = _proc_net_addr(conn.getpeername()), _proc_net_addr(conn.getsockname())
        with open(table, encoding="ascii") as f:
            next(f)  # the header
            for line in f:
                cols = line.split()
                if len(cols) > 9 and cols[1] == peer and cols[2] == me:
                    return int(cols[7]) if cols[9] != "0" else None  # inode 0: an orphan, owner unknown
    except (OSError, ValueError, StopIteration):
        return None
    return None
