"""The narrow transport interface (pyinfra-style): ask a host, never judge the answer here.

`run` never raises on a non-zero exit: it returns a CommandResult. It raises UnreachableError only when the host
itself cannot be reached (connect refused or timed out, auth failed) and HostKeyRefused when the host key is unknown
or changed. Every call has a timeout; a command that times out returns ok=False, timed_out=True.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Transport(ABC):
    """One host. Implementations keep one connection open and reuse it across calls until `close()`."""

    #: the inventory's name of the host, used in every message about it
    name: str

    @abstractmethod
    def run(self, command: str, *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        """Run a shell command (already quoted by the caller with shlex.quote) on the host."""

    @abstractmethod
    def put_file(self, path: str, content: str, *, mode: int = 0o644) -> None:
        """Write `content` to `path` on the host atomically (temp file + rename), creating parent dirs."""

    @abstractmethod
    def read_file(self, path: str, *, timeout: float = 10.0) -> bytes | None:
        """Return the bytes of `path` on the host, or None if it does not exist or cannot be read."""

    @abstractmethod
    def http_base_url(self, port: int, *, host: str = "127.0.0.1") -> str:
        """A base URL through which this machine can reach `host:port` as seen from the host.

        Local: the URL itself. SSH with http=tunnel: a local forwarded port over the one SSH connection.
        """

    def close(self) -> None:
        """Release connections and forwarders. Safe to call twice."""

    def __enter__(self) -> "Transport":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
