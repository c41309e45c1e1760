"""SshTransport: one paramiko SSH connection per host, reused for commands, SFTP and HTTP tunnels.

Host keys are checked by known_hosts.py against the host's known_hosts (default ~/.ssh/known_hosts): an unknown key
is refused unless the host says `accept_new_host_key: true` (then it is appended there); a changed key always is.
Connect failures are one UnreachableError line naming host, hop and cause (paramiko's logger, whose thread prints
tracebacks, is silenced); a session, exec or SFTP request unanswered in time is `no_answer` ("unknown: ... did not
answer within N s"). paramiko is imported lazily so that `import pdctl` stays fast.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING

from pdctl.errors import HostKeyRefused, StepFailed, UnreachableError, UsageError
from pdctl.shell import export_prefix, quote
from pdctl.transport.base import CommandResult, Transport, no_answer, within
from pdctl.transport.forward import Tunnels
from pdctl.transport.ssh_target import parse_jump, resolve_target
from pdctl.transport.paramiko_import import import_paramiko
from pdctl.transport.known_hosts import (
    HostKeyPolicy,
    changed_key_refused,
    check_key_file,
    known_hosts_name,
    load_known_hosts,
)

if TYPE_CHECKING:
    from pdctl.inventory_hosts import SshHost

_PID_MARK = "PDCTL-PID "


def _quiet_paramiko() -> None:
    """paramiko logs its reader thread's errors with tracebacks (to stderr when no handler is set): pdctl says why."""
    log = logging.getLogger("paramiko")
    log.handlers, log.propagate = [logging.NullHandler()], False


class SshTransport(Transport):
    """Commands, files and HTTP on one SSH host. Connects on first use (or `open()`); thread-safe."""

    def __init__(self, name: str, host: SshHost):
        self.name = name
        self.host = host
        self.target = resolve_target(host, name)
        self.where = f"{self.target.address}:{self.target.port}"
        self._client = None
        self._jump: SshTransport | None = None
        self._lock = threading.Lock()
        self.tunnels = Tunnels(name)
        self._failed: tuple[float, Exception] | None = None  # (when, why) of the last failed connect

    # -- connection ------------------------------------------------------------------------------------------
    def open(self):
        """Connect (once) and return the paramiko SSHClient. Raises UnreachableError or HostKeyRefused; a caller
        that waited while another's attempt failed gets that failure, not one more connect_timeout."""
        asked = time.monotonic()
        with self._lock:
            if self._client is not None:
                t = self._client.get_transport()
                if t is not None and t.is_active():
                    return self._client
                self._client.close()
                self._client = None
            if self._failed is not None and self._failed[0] >= asked:
                raise self._failed[1]
            try:
                self._client = self._connect()
            except (UnreachableError, HostKeyRefused, UsageError) as e:
                self._failed = (time.monotonic(), e)
                raise
            return self._client

    def _connect(self):
        paramiko = import_paramiko()

        _quiet_paramiko()
        tgt = self.target
        for key in tgt.key_files:  # one line naming host and file here, not paramiko's hang or traceback
            check_key_file(key, repr(self.name))
        client = paramiko.SSHClient()
        who = f"{self.name!r} ({self.where})"
        load_known_hosts(client, tgt.known_hosts, who, known_hosts_name(tgt.address, tgt.port))
        client.set_missing_host_key_policy(
            HostKeyPolicy(who, tgt.known_hosts, accept_new=self.host.accept_new_host_key, inventory_name=self.name)
        )
        timeout = self.host.connect_timeout
        sock = self._proxy_sock(timeout)
        started = time.monotonic()
        try:
            client.connect(
                sock=sock,
                hostname=tgt.address,
                port=tgt.port,
                username=tgt.user,
                key_filename=list(tgt.key_files) or None,
                look_for_keys=not tgt.key_files,
                allow_agent=not tgt.key_files,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
            )
        except Exception as e:
            why = self._connect_error(e, client, time.monotonic() - started)
            self._abandon(client)
            raise why from None
        tr = client.get_transport()
        tr.set_keepalive(15)
        if isinstance(tr.sock, socket.socket):  # small request/reply packets: Nagle + delayed ACK cost 40 ms each
            tr.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return client

    def _connect_error(self, e: Exception, client, elapsed: float) -> Exception:
        """What a failed connect raises: one line naming host, hop and cause (`e` itself when it is no SSH error)."""
        paramiko = import_paramiko()

        tgt, timeout = self.target, self.host.connect_timeout
        if isinstance(e, (UnicodeDecodeError, ValueError)):  # a ~/.ssh/id_* key paramiko found itself
            return UsageError(f"host {self.name!r}: cannot use an SSH key: {e}", hint="give the host a `key`")
        if not isinstance(e, (OSError, paramiko.SSHException, EOFError)):  # e.g. HostKeyRefused from the policy
            return e
        if isinstance(e, paramiko.BadHostKeyException):
            return changed_key_refused(f"{self.name!r} ({self.where})", e, tgt.known_hosts, tgt.address, tgt.port)
        if isinstance(e, paramiko.AuthenticationException):
            return self._unreachable(f"authentication failed for user {tgt.user!r}: {e}")
        if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError):
            causes = "; ".join(sorted({os.strerror(err.errno) if err.errno else str(err) for err in e.errors.values()}))
            return self._unreachable(causes or str(e))
        if isinstance(e, TimeoutError):  # socket.timeout too
            return self._unreachable(f"connect timed out after {timeout:g}s ({e or 'timeout'})")
        # paramiko's own words here ("No existing session", "Error reading SSH protocol banner") hide the cause
        tr = client.get_transport()
        if tr is not None and not tr.remote_version:
            return self._unreachable(
                "the connection closed before any SSH banner"
                if elapsed < timeout * 0.9
                else f"no SSH answer within {timeout:g} s (banner timeout)"
            )
        if tr is not None and tr.session_id is None:
            return self._unreachable(f"SSH handshake with {tr.remote_version!r} unfinished after {timeout:g} s")
        return self._unreachable(f"{type(e).__name__}: {e}")

    def _abandon(self, client) -> None:
        """A connect failed: drop the half-made client and the jump hop opened for it."""
        client.close()
        jump, self._jump = self._jump, None
        if jump is not None:
            jump.close()

    def _proxy_sock(self, timeout: float):
        """A socket-like path to the target through ProxyCommand or a jump host (same known_hosts and key
        rules), or None for a direct connection."""
        paramiko = import_paramiko()

        tgt = self.target
        if tgt.proxy_command:
            try:
                return paramiko.ProxyCommand(tgt.proxy_command)
            except (OSError, paramiko.SSHException) as e:
                raise self._unreachable(f"ProxyCommand {tgt.proxy_command!r} failed: {e}") from None
        if not tgt.proxy_jump:
            return None
        from pdctl.inventory_hosts import SshHost

        try:
            user, addr, port, earlier = parse_jump(tgt.proxy_jump)
        except ValueError:
            raise self._unreachable(f"cannot parse proxy_jump {tgt.proxy_jump!r} ([user@]host[:port][,...])") from None
        h = self.host
        if self._jump is not None:  # reconnecting: the old hop goes with the old connection
            self._jump.close()
        hop = SshHost(
            address=addr,
            port=port or 22,
            user=user,
            key=h.key,
            known_hosts=h.known_hosts,
            accept_new_host_key=h.accept_new_host_key,
            ssh_config=h.ssh_config,
            connect_timeout=h.connect_timeout,
            command_timeout=h.command_timeout,
            proxy_jump=earlier,
        )
        self._jump = SshTransport(f"{self.name} (jump {addr})", hop)
        try:
            return (
                self._jump.open()
                .get_transport()
                .open_channel("direct-tcpip", (tgt.address, tgt.port), ("127.0.0.1", 0), timeout=timeout)
            )
        except (OSError, paramiko.SSHException, EOFError) as e:
            raise self._unreachable(f"jump host {addr} could not reach {self.where}: {e}") from None

    def _unreachable(self, cause: str) -> UnreachableError:
        tgt = self.target
        via = (
            f" via hop {tgt.proxy_jump!r}"
            if tgt.proxy_jump
            else f" via ProxyCommand {tgt.proxy_command!r}"
            if tgt.proxy_command
            else ""
        )
        return UnreachableError(
            f"host {self.name!r} ({tgt.user}@{self.where}{via}) unreachable over SSH: {cause}",
            target=self.name,
            hint="check the address, port, user and key in the inventory, and that sshd runs there",
        )

    # -- commands --------------------------------------------------------------------------------------------
    def run(self, command: str, *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        """Run `command` under the login shell. A command overrunning `timeout` has its process group killed."""
        client = self.open()
        wrapped = f"printf '{_PID_MARK}%s\\n' $$ >&2\n{export_prefix(env)}{command}"
        chan = self._session(client, "exec")
        try:  # paramiko waits for the exec reply without a limit
            within(self.host.connect_timeout, chan.exec_command, wrapped)
        except Exception as e:  # no reply, or the connection dropped between open() and here
            chan.close()
            if isinstance(e, TimeoutError):
                raise no_answer(self.name, self.host.connect_timeout, "no reply to a command request") from None
            raise self._unreachable(f"cannot start a command: {type(e).__name__}: {e}") from None
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        timed_out = False
        try:
            while True:
                got = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    got = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    got = True
                if got:
                    continue
                if chan.exit_status_ready() and (chan.eof_received or chan.closed):
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                select.select([chan], [], [], min(remaining, 0.1))
            if timed_out:
                self._kill_remote(err)
                exit_code = -9
            else:
                exit_code = chan.recv_exit_status()
        finally:
            chan.close()
        stderr = err.decode(errors="replace")
        if stderr.startswith(_PID_MARK):  # the line that told _kill_remote whom to kill
            stderr = stderr.partition("\n")[2]
        if timed_out:
            stderr += f"\n[pdctl] command timed out after {timeout:g}s on {self.name}"
        return CommandResult(exit_code, out.decode(errors="replace"), stderr, timed_out)

    def _kill_remote(self, err: bytes | bytearray) -> None:
        """Kill the process group of a timed-out command (sshd makes the shell a session leader). Never raises."""
        first = bytes(err).split(b"\n", 1)[0].decode(errors="replace")
        if not first.startswith(_PID_MARK):
            return
        pid = int(first[len(_PID_MARK) :])
        kill = f"kill -KILL -{pid} 2>/dev/null || kill -KILL {pid} 2>/dev/null; true"
        try:  # bounded as a whole: a host that hangs commands may hang this one too
            chan = self._session(self._client, "kill")
            within(self.host.connect_timeout, lambda: (chan.exec_command(kill), chan.recv_exit_status()))
            chan.close()
        except Exception:
            pass

    def _session(self, client, what: str):
        """A new session channel, its opening bounded by connect_timeout."""
        try:
            return client.get_transport().open_session(timeout=self.host.connect_timeout)
        except Exception as e:  # the connection dropped, or the server did not answer the channel request
            if "Timeout" in str(e):
                raise no_answer(self.name, self.host.connect_timeout, f"no {what} session opened") from None
            raise self._unreachable(f"cannot open a session: {type(e).__name__}: {e}") from None

    # -- files -----------------------------------------------------------------------------------------------
    def _sftp(self, timeout: float, what: str):
        """An SFTP client whose every request is bounded by `timeout` (paramiko's open_sftp() has no limit)."""
        paramiko = import_paramiko()

        chan = self._session(self.open(), "SFTP")
        try:
            chan.settimeout(timeout)  # bounds the version handshake and every later request
            within(timeout, chan.invoke_subsystem, "sftp")
            return paramiko.SFTPClient(chan)
        except (OSError, EOFError, paramiko.SSHException) as e:  # socket.timeout is an OSError
            chan.close()
            if isinstance(e, TimeoutError):
                raise no_answer(self.name, timeout, f"SFTP session to {what}") from None
            raise UnreachableError(f"{self.name}: cannot open SFTP to {what}: {e}", target=self.name) from None

    def put_file(self, path: str, content: str | bytes, *, mode: int = 0o644) -> None:
        """Write via SFTP to a temp file next to `path`, chmod, then posix-rename over it. Creates parent dirs."""
        data = content.encode() if isinstance(content, str) else content
        parent = os.path.dirname(path) or "."
        limit = self.host.command_timeout
        res = self.run(f"mkdir -p -- {quote(parent)}", timeout=limit)
        if res.timed_out:
            raise no_answer(self.name, limit, f"creating {parent}")
        if not res.ok:
            raise StepFailed(f"{self.name}: cannot create {parent}: {res.stderr.strip()}")
        tmp = f"{parent}/.pdctl-{uuid.uuid4().hex[:12]}.tmp"
        paramiko = import_paramiko()

        sftp = self._sftp(limit, f"write {path}")
        try:
            try:
                with sftp.open(tmp, "wb") as f:
                    f.write(data)
                sftp.chmod(tmp, mode)
                sftp.posix_rename(tmp, path)
            except BaseException:
                with contextlib.suppress(Exception):
                    sftp.remove(tmp)
                raise
        except TimeoutError:
            raise no_answer(self.name, limit, f"writing {path} over SFTP") from None
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise StepFailed(f"{self.name}: writing {path} over SFTP failed: {e}") from None
        finally:
            sftp.close()

    def read_file(self, path: str, *, timeout: float = 10.0) -> bytes | None:
        sftp = self._sftp(timeout, f"read {path}")
        try:
            with sftp.open(path, "rb") as f:
                return f.read()
        except TimeoutError:  # before OSError (socket.timeout is one): a timeout is not "no such file"
            raise no_answer(self.name, timeout, f"reading {path} over SFTP") from None
        except OSError:
            return None
        finally:
            sftp.close()

    # -- http ------------------------------------------------------------------------------------------------
    def http_base_url(self, port: int, *, host: str = "127.0.0.1") -> str:
        """direct: http://{address}:{port}; tunnel: a local forwarder to host:port through this connection."""
        if self.host.http_route == "direct":
            addr = self.target.address if host in ("127.0.0.1", "localhost") else host
            return f"http://{addr}:{port}"
        return self.tunnels.url(host, port, lambda: self.open().get_transport())

    @property
    def http_tunnel(self) -> bool:
        return self.host.http_route == "tunnel"

    def tunnel_failure(self, url: str, since: float = 0.0) -> str | None:
        return self.tunnels.failure(url, since)

    def reach(self) -> None:
        self.run("true", timeout=self.host.connect_timeout + 5)

    @property
    def connected(self) -> bool:
        """Whether the SSH connection is up now (never connects)."""
        client = self._client
        tr = client.get_transport() if client is not None else None
        return bool(tr is not None and tr.is_active())

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            jump, self._jump = self._jump, None
        self.tunnels.close()
        if client is not None:
            client.close()
        if jump is not None:
            jump.close()

    def __repr__(self) -> str:
        return f"SshTransport({self.name!r}, {self.target.user}@{self.where})"
