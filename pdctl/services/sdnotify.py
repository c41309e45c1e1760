"""sd_notify(3) without a dependency: one datagram per state to the socket systemd names in $NOTIFY_SOCKET.

systemd gives a Type=notify service NOTIFY_SOCKET (a filesystem path, or an abstract name written with a leading
`@`, which is a NUL byte on the wire) and, with WatchdogSec=, WATCHDOG_USEC (the limit in microseconds) and
WATCHDOG_PID (the pid it expects the pings from). Outside systemd NOTIFY_SOCKET is unset and every call is a no-op,
so the watch notifies unconditionally. A send that fails is swallowed: a notification lost must never stop the
watch (systemd then restarts it, which is the watchdog's point).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Mapping

SEND_TIMEOUT_S = 1.0  # a manager that does not read (its queue full) must not stall the watch's loop

READY = "READY=1"
WATCHDOG = "WATCHDOG=1"
STOPPING = "STOPPING=1"


def socket_address(value: str) -> str | bytes | None:
    """$NOTIFY_SOCKET as an address for AF_UNIX: `@name` -> b"\\0name" (abstract), `/path` as is; None when unset
    or of a kind this client does not speak (systemd also allows vsock: `vsock:CID:PORT`)."""
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None


def watchdog_seconds(env: Mapping[str, str], pid: int) -> float | None:
    """The watchdog limit systemd set for this process, in seconds; None when there is none (or it is meant for
    another pid: WATCHDOG_PID names the one process whose pings count)."""
    usec, owner = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if owner and (not owner.isdigit() or int(owner) != pid):
        return None
    return int(usec) / 1e6


@dataclass
class Notifier:
    """The service's side of sd_notify. `address` None: not under systemd, nothing is sent."""

    address: str | bytes | None = None
    watchdog_s: float | None = None  # ping at least every half of it while the watch makes progress
    sent: dict[str, int] = field(default_factory=dict)  # how many of each state were sent (not a list: days of pings)
    _sock: socket.socket | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, unset: bool = False) -> "Notifier":
        """From `env` (default os.environ). `unset`: take the variables out of os.environ, so that a process the
        watch starts (a heal's restart) does not notify in its name (sd_notify's unset_environment)."""
        env = os.environ if env is None else env
        n = cls(socket_address(env.get("NOTIFY_SOCKET", "")), watchdog_seconds(env, os.getpid()))
        if unset:
            for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
                os.environ.pop(name, None)
        return n

    @property
    def active(self) -> bool:
        return self.address is not None

    def notify(self, state: str) -> bool:
        """Send `state` ("READY=1", "WATCHDOG=1", "STATUS=...", newline-separated for several). True if sent."""
        if self.address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.settimeout(SEND_TIMEOUT_S)
            self._sock.sendto(state.encode(), self.address)
        except OSError:  # no such socket, refused, or not sent within SEND_TIMEOUT_S (TimeoutError)
            return False
        key = state.split("=", 1)[0]
        self.sent[key] = self.sent.get(key, 0) + 1
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
