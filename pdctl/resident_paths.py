"""Where the resident pdctl listens, and which code it runs: the standard library only, because the resident
client reads these before anything else is imported (resident_client.py).

The socket lives in the private control directory of the kept SSH connections (transport/control.py owns its
creation and the 0700 rule; `control_dir_path` is the one place its path is spelled). Its name carries a stamp of
the code a run would execute (the interpreter, pdctl's directory, the import path after its first entry, and the
newest modification time of pdctl's sources), so a resident started before an upgrade or an edit is never asked
to serve the new code: a run with another stamp looks for another socket.
"""

from __future__ import annotations

import os
import stat
import sys
import zlib

SOCKET_PATH_MAX = 107     # sun_path is 108 bytes with its NUL
RESIDENT_ENV = "PDCTL_RESIDENT"   # 0/off/no/false: never ask a resident pdctl
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def control_dir_path() -> str:
    """$XDG_RUNTIME_DIR/pdctl-ssh, else `ssh` under pdctl's state directory ($XDG_STATE_HOME/pdctl)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "pdctl-ssh")
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "pdctl", "ssh")


def private_problem(path: str) -> str | None:
    """Why `path` may not hold pdctl's sockets (not a real directory of this user with mode 0700), or None when it
    may, or does not exist."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})"
    if stat.S_IMODE(st.st_mode) != 0o700:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0700"
    return None


def code_stamp() -> str:
    """A digest of what decides the code a run executes: the interpreter, pdctl's directory, the import path after
    its first entry, and every source of pdctl by path, size and modification time (an edit, an upgrade, a deleted
    file or a rollback that keeps old times all change it). Walking ~200 sources costs about a millisecond;
    zlib's two checksums, not hashlib, whose import alone costs ~5 ms: this names a socket in a private directory,
    it guards against stale code, not against an attacker."""
    entries = [sys.executable, PACKAGE_DIR, *sys.path[1:]]
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(root, f))
                entries.append(f"{root}/{f}:{st.st_size}:{st.st_mtime_ns}")
    data = "\0".join(entries).encode()
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def resident_socket(directory: str | None = None, stamp: str | None = None) -> str:
    """The resident pdctl's socket path for this code (None-free: the caller checks the directory)."""
    d = directory if directory is not None else control_dir_path()
    return os.path.join(d, f"resident-{stamp or code_stamp()}.sock")


def resident_to_ask() -> str | None:
    """The socket of a resident pdctl for this code, when there is one to ask: its file exists in a private control
    directory and $PDCTL_RESIDENT does not turn it off. Costs a run without a resident ~2 ms, not the client's
    imports."""
    if os.environ.get(RESIDENT_ENV, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    directory = control_dir_path()
    path = resident_socket(directory)
    if not os.path.exists(path) or private_problem(directory) is not None:
        return None
    return path
