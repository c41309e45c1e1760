"""Where kept SSH connections live: the private control directory, one socket per host spec, the keep setting.

A host's connection is kept (pdctl/transport/keeper.py) when its `keep_connection` is > 0 seconds, or when
$PDCTL_SSH_KEEP says so (the environment wins over the inventory, so an operator can turn keeping on or off for one
shell without editing the inventory). The control directory is $XDG_RUNTIME_DIR/pdctl-ssh, else `ssh` under pdctl's
state directory; it must be a directory of this user with mode 0700, or nothing is kept (RefusedError naming it).
The socket's name is a hash of everything that decides how and where the connection is made, so a changed
inventory never reuses an old connection.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pdctl.errors import RefusedError, UsageError
from pdctl.inventory_hosts import MAX_KEEP_S, MIN_KEEP_S

if TYPE_CHECKING:
    from pdctl.inventory_hosts import SshHost

KEEP_ENV = "PDCTL_SSH_KEEP"
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with its NUL
# what decides the connection: a keeper made for other values must not answer for these
CONNECTION_FIELDS = (
    "address",
    "port",
    "user",
    "key",
    "known_hosts",
    "accept_new_host_key",
    "ssh_config",
    "proxy_jump",
    "connect_timeout",
    "command_timeout",
    "http",
)


def parse_keep(text: str, source: str) -> float:
    """Seconds of idle time a kept connection lives, from `text`; UsageError naming `source` when it is neither 0
    (off) nor a number from MIN_KEEP_S to MAX_KEEP_S. Pure."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value == 0 or MIN_KEEP_S <= value <= MAX_KEEP_S):  # also refuses nan and inf
        raise UsageError(
            f"{source}={text!r}: expected 0 (off) or seconds from {MIN_KEEP_S:g} to {MAX_KEEP_S:g}",
            hint=f"a shorter keep ends the connection between the requests of one run; e.g. {source}=600 keeps "
            "each SSH connection for 10 idle minutes",
        )
    return value


def keep_seconds(host: SshHost) -> float:
    """How long the host's SSH connection is kept idle between pdctl runs (0: not kept): $PDCTL_SSH_KEEP when set
    (UsageError when it is no number of seconds), else the host's keep_connection."""
    text = os.environ.get(KEEP_ENV, "").strip()
    return parse_keep(text, KEEP_ENV) if text else float(host.keep_connection)


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


def control_dir(create: bool = True) -> Path:
    """The private directory of the keepers' sockets, created 0700 when missing (unless not `create`). Raises
    RefusedError naming the path when it exists as anything but a 0700 directory owned by this user."""
    path = Path(control_dir_path())
    if create and not os.environ.get("XDG_RUNTIME_DIR"):
        from pdctl.state import state_dir

        state_dir()  # creates $XDG_STATE_HOME/pdctl, the directory's parent
    if create:
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise UsageError(
                f"cannot create the SSH control directory {path}: {e.strerror or e}",
                hint=f"make {path.parent} writable, or point XDG_RUNTIME_DIR elsewhere",
            ) from None
    check_private(path)
    return path


def check_private(path: Path) -> None:
    """RefusedError unless `path` is a real directory (no symlink) of this user with mode 0700; silent when it
    does not exist."""
    problem = private_problem(str(path))
    if problem:
        raise RefusedError(
            f"the SSH control directory {path} {problem}: no connection is kept through it",
            hint=f"remove {path} (pdctl recreates it 0700) or `chmod 700 {path}` if it is yours",
        )


@dataclass(frozen=True)
class KeptPaths:
    """A host spec's files in the control directory: its socket, the spawn lock beside it, the keeper's log, and
    the keeper's pid as the pdctl that started it recorded it (keeper_pid.py)."""

    socket: str
    lock: str
    log: str
    record: str


def spec_digest(name: str, host: SshHost) -> str:
    """A hash of the inventory's host name and its connection fields (and pdctl's version and wire protocol). Pure."""
    from pdctl import __version__
    from pdctl.transport.wire import PROTOCOL

    spec = {k: getattr(host, k) for k in CONNECTION_FIELDS}
    spec.update(name=name, pdctl=__version__, protocol=PROTOCOL)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:20]


def kept_paths(name: str, host: SshHost, directory: Path | None = None) -> KeptPaths:
    """The files of `name`'s kept connection; UsageError when the socket's path is too long for a unix socket."""
    d = directory if directory is not None else control_dir()
    stem = str(d / spec_digest(name, host))
    if len(stem + ".sock") > SOCKET_PATH_MAX:
        raise UsageError(
            f"the SSH control directory {d} is too long a path for a unix socket "
            f"({len(stem + '.sock')} > {SOCKET_PATH_MAX} bytes)",
            hint="set XDG_RUNTIME_DIR to a shorter directory, or keep_connection: 0",
        )
    return KeptPaths(stem + ".sock", stem + ".lock", stem + ".log", stem + ".pid")


@dataclass(frozen=True)
class KeptConnection:
    """One SSH host's kept connection as its keeper tells it; `state` is kept, none or not answering (then the pid
    and the expiry are pdctl's record of it: a keeper that does not answer says nothing)."""

    host: str
    socket: str
    keep: float  # the keep setting now ($PDCTL_SSH_KEEP, else keep_connection); 0: off
    state: str
    pid: int | None = None
    target: str | None = None  # user@address:port the keeper connects to
    connected: bool = False  # whether its SSH connection is up now
    idle_for: float | None = None
    expires_in: float | None = None
    closed: bool = False  # --close ended it (its process is gone)
    ended_by: str | None = None  # how --close ended it: "close request", "SIGTERM" or "SIGKILL"
    problem: str | None = None  # why --close could not end it (it still runs, or it could not be told apart)
