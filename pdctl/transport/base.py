"""The narrow transport interface (pyinfra-style): ask a host, never judge the answer here.

The contract, for every implementation (local.py: subprocess on this machine; ssh.py: one paramiko connection;
kept.py: that same connection held by a keeper process between pdctl runs, when the host's keep_connection is on):
- `run` never raises on a non-zero exit: it returns a CommandResult. A command that overruns its timeout is killed
  with its process group and returns exit_code -9, ok=False, timed_out=True. A caller that observes the host turns
  timed_out into `no_answer(...)` (UnreachableError, exit 3): a command that did not answer says nothing about
  the service or process it asked about, so it is "unknown", never "stopped" or "gone".
- UnreachableError (exit 3) when the host itself cannot be reached (connect refused or timed out, auth failed, no
  session could be opened); HostKeyRefused (exit 4) when its SSH host key is unknown or changed (known_hosts.py).
  The local transport raises neither.
- Every remote wait is bounded: `run` and `read_file` by their `timeout`, an SSH `put_file` by the host's
  `command_timeout`, the SSH connect, session and SFTP-channel opening by its `connect_timeout`.
- Safe to share between threads; one connection per host is reused until `close()`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable

from pdctl.errors import UnreachableError


def no_answer(host: str, seconds: float, what: str) -> UnreachableError:
    """The one error for a host or command that did not answer in time (exit 3): "unknown", never "stopped"."""
    return UnreachableError(
        f"unknown: {host} did not answer within {seconds:g} s ({what})",
        target=host,
        hint="the host, its sshd or its /proc is hung or overloaded; nothing was concluded about its services, "
        "so do not redeploy or restart on this result; retry, or raise the host's command_timeout",
    )


def within(seconds: float, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a daemon thread: its value or its exception, or TimeoutError after `seconds` (fn is then
    left to finish or fail on its own; the caller closes what it waits on). For library calls that wait without a
    limit (paramiko's exec/subsystem requests)."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # handed to the caller below
            box["error"] = e

    th = threading.Thread(target=call, name="pdctl-bounded", daemon=True)
    th.start()
    th.join(seconds)
    if th.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


@dataclass(frozen=True)
class CommandResult:
    """What a command did: its exit code (-9 when pdctl killed it on timeout), its output decoded as UTF-8 (bad
    bytes replaced) and whether it timed out. A timeout also appends a `[pdctl] command timed out ...` line to
    stderr."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Transport(ABC):
    """One host. Implementations keep one connection open and reuse it across calls until `close()`.

    SSH connects on the first call that needs the host (or in `SshTransport.open()`, which `connect(eager=True)`
    uses) and again after the connection dropped; a call that connects may raise UnreachableError or HostKeyRefused.
    """

    #: the inventory's name of the host, used in every message about it
    name: str

    @abstractmethod
    def run(self, command: str, *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        """Run a shell command (already quoted by the caller with pdctl.shell.quote) on the host; wait for it.

        Changes whatever the command changes, nothing else. Runs under a POSIX shell: locally `/bin/sh -c` in a new
        session (stdin /dev/null), over SSH the user's shell, which sshd runs with -c as a session leader. `env` is
        added to the environment: locally on top of this process's environment, over SSH as `export` assignments
        ahead of the command (a name that is not a valid variable name raises ValueError there).

        `timeout` (seconds) bounds the command, not the connect. On expiry the process group is SIGKILLed and the
        result is exit_code -9, timed_out=True; locally up to 5 s more are spent collecting output, over SSH the
        kill runs in a second session bounded by connect_timeout.

        Never raises on a non-zero exit. Raises UnreachableError / HostKeyRefused (SSH) when the host cannot be
        reached or no session can be opened.
        """

    @abstractmethod
    def put_file(self, path: str, content: str | bytes, *, mode: int = 0o644) -> None:
        """Write `content` (str is UTF-8 encoded) to `path` on the host with permissions `mode`, atomically.

        Changes `path` and creates its missing parent directories. A temp file in the same directory is written,
        chmodded and renamed over `path`, so a reader sees the old or the new content, never a part; the temp file
        is removed if writing fails. Safe to repeat; the last of two concurrent writers wins.

        Raises: locally OSError (e.g. permission denied); over SSH StepFailed when the directory cannot be made
        or the SFTP write fails, `no_answer` (UnreachableError) when either overruns the host's command_timeout,
        UnreachableError / HostKeyRefused when the host cannot be reached.
        """

    @abstractmethod
    def read_file(self, path: str, *, timeout: float = 10.0) -> bytes | None:
        """Return the bytes of `path` on the host, or None if it does not exist or cannot be read.

        Changes nothing; safe at any time. Over SSH a read (or the SFTP session it opens) that overruns `timeout`
        raises `no_answer` (UnreachableError "unknown: ... did not answer"), never None: a pidfile that could not be
        read is not a missing pidfile. UnreachableError also when no SFTP session can be opened (HostKeyRefused on an
        unknown or changed host key). Locally `timeout` is not used.
        """

    @abstractmethod
    def http_base_url(self, port: int, *, host: str = "127.0.0.1") -> str:
        """A base URL through which this machine can reach `host:port` as seen from the host.

        Local: the URL itself; changes nothing and never raises. SSH with http=direct: the same URL with the host's
        address in place of 127.0.0.1/localhost. SSH with http=tunnel: connects if needed (UnreachableError /
        HostKeyRefused) and starts, once per (host, port), a forwarder listening on 127.0.0.1 of this machine
        through the one SSH connection (remade if that connection dropped); the URL works until `close()`.
        Nothing is sent to `host:port` here: whether something listens there shows on the first request.
        """

    def open(self) -> object:
        """Connect now rather than at the first call that needs the host (`connect(eager=True)`): raises
        UnreachableError / HostKeyRefused here. Nothing to do for a transport that runs commands on this machine."""
        return None

    def reach(self) -> None:
        """Make sure the host answers a command, bounded by its connect timeout (+5 s): raises UnreachableError /
        HostKeyRefused when it cannot be reached. Nothing to do on this machine (it always answers; a `true` would
        only cost a fork)."""

    @property
    def http_tunnel(self) -> bool:
        """Whether http_base_url gives a local tunnel port rather than the role's own address."""
        return False

    def tunnel_failure(self, url: str, since: float = 0.0) -> str | None:
        """Why the host could not connect a tunnel URL from `http_base_url` to its target, as the host said it
        (e.g. "connection refused"), for a failure at or after monotonic `since`; None when it did not fail, the
        URL is no tunnel (local, http=direct) or nothing is known. Changes nothing; never raises."""
        return None

    def close(self) -> None:
        """Release connections and forwarders (tunnel URLs stop working). Never connects; safe to call twice.
        Over SSH a later call connects again. A kept connection (kept.py) is the keeper's: it and its forwarders
        stay until `pdctl ssh --close` or its idle expiry."""

    def __enter__(self) -> "Transport":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
