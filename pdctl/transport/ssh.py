"""SshTransport: one paramiko SSH connection per host, reused for commands, SFTP and HTTP tunnels.

Host keys are checked against known_hosts (the inventory's file or ~/.ssh/known_hosts) by known_hosts.py: an unknown
key is refused unless the host says `accept_new_host_key: true` (then it is appended to that file); a changed key is
always refused.
Connect failures (refused, timeout, auth) raise UnreachableError naming the host. paramiko is imported lazily so that
`import pdctl` stays fast.
"""

from __future__ import annotations

import getpass
import os
import select
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pdctl.errors import HostKeyRefused, StepFailed, UnreachableError
from pdctl.shell import export_prefix, quote
from pdctl.transport.base import CommandResult, Transport
from pdctl.transport.forward import Forwarder
from pdctl.transport.known_hosts import HostKeyPolicy, changed_key_refused, load_known_hosts

if TYPE_CHECKING:
    from pdctl.inventory import Host

_PID_MARK = "PDCTL-PID "


@dataclass(frozen=True)
class SshTarget:
    """Where and as whom to connect, after ssh_config is applied."""

    address: str
    port: int
    user: str
    key_files: tuple[str, ...]
    known_hosts: str
    proxy_jump: str | None = None       # [user@]host[:port][,...] (first hop is dialled first)
    proxy_command: str | None = None    # ssh_config ProxyCommand, tokens already expanded


def resolve_target(host: Host) -> SshTarget:
    """Apply ssh_config (HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand) to the inventory's host.

    Explicit inventory values win: `user`, `key`, and `port` when it is not the default 22.
    """
    address, port, user, keys = host.address, host.port, host.user, [host.key] if host.key else []
    jump, command = host.proxy_jump, None
    cfg_path = host.ssh_config or os.path.expanduser("~/.ssh/config")
    if os.path.exists(cfg_path):
        import paramiko

        cfg = paramiko.SSHConfig.from_path(cfg_path).lookup(host.address)
        address = cfg.get("hostname", address)
        if host.port == 22 and "port" in cfg:
            port = int(cfg["port"])
        user = user or cfg.get("user")
        if not keys:
            keys = [os.path.expanduser(k) for k in cfg.get("identityfile", [])]
        if jump is None and cfg.get("proxyjump", "none").lower() != "none":
            jump = cfg["proxyjump"]
        if jump is None and cfg.get("proxycommand", "none").lower() != "none":
            command = cfg["proxycommand"]
    known = os.path.expanduser(host.known_hosts or "~/.ssh/known_hosts")
    return SshTarget(address, port, user or getpass.getuser(), tuple(os.path.expanduser(k) for k in keys), known,
                     jump, command)


def parse_jump(spec: str) -> tuple[str | None, str, int | None, str | None]:
    """`hop1,hop2,...,hopN` (each `[user@]host[:port]`, `[v6]:port` accepted) -> the LAST hop, which dials the
    target, as (user, host, port, earlier hops or None): like `ssh -J`, hop1 is dialled first. Pure."""
    earlier, _, last = spec.rpartition(",")
    user, _, hostport = last.rpartition("@")
    if hostport.startswith("["):
        host, _, tail = hostport[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") else None
    elif hostport.count(":") == 1:
        host, _, p = hostport.partition(":")
        port = int(p)
    else:
        host, port = hostport, None
    return user or None, host, port, earlier or None


class SshTransport(Transport):
    """Commands, files and HTTP on one SSH host. Connects on first use (or `open()`); thread-safe."""

    def __init__(self, name: str, host: Host):
        self.name = name
        self.host = host
        self.target = resolve_target(host)
        self._client = None
        self._jump: SshTransport | None = None
        self._lock = threading.Lock()
        self._forwarders: dict[tuple[str, int], Forwarder] = {}

    # -- connection ------------------------------------------------------------------------------------------
    @property
    def where(self) -> str:
        return f"{self.target.address}:{self.target.port}"

    def open(self):
        """Connect (once) and return the paramiko SSHClient. Raises UnreachableError or HostKeyRefused."""
        with self._lock:
            if self._client is not None:
                t = self._client.get_transport()
                if t is not None and t.is_active():
                    return self._client
                self._client.close()
                self._client = None
            self._client = self._connect()
            return self._client

    def _connect(self):
        import paramiko

        tgt = self.target
        client = paramiko.SSHClient()
        who = f"{self.name!r} ({self.where})"
        load_known_hosts(client, tgt.known_hosts, who)
        client.set_missing_host_key_policy(
            HostKeyPolicy(who, tgt.known_hosts, accept_new=self.host.accept_new_host_key, inventory_name=self.name))
        timeout = self.host.connect_timeout
        sock = self._proxy_sock(timeout)
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
        except HostKeyRefused:
            self._abandon(client)
            raise
        except paramiko.BadHostKeyException as e:
            self._abandon(client)
            raise changed_key_refused(who, e, tgt.known_hosts, tgt.address, tgt.port) from None
        except paramiko.AuthenticationException as e:
            self._abandon(client)
            raise self._unreachable(f"authentication failed for user {tgt.user!r}: {e}") from None
        except (socket.timeout, TimeoutError) as e:
            self._abandon(client)
            raise self._unreachable(f"connect timed out after {timeout:g}s ({e or 'timeout'})") from None
        except paramiko.ssh_exception.NoValidConnectionsError as e:
            self._abandon(client)
            causes = "; ".join(sorted({os.strerror(err.errno) if err.errno else str(err) for err in e.errors.values()}))
            raise self._unreachable(causes or str(e)) from None
        except (OSError, paramiko.SSHException, EOFError) as e:
            self._abandon(client)
            raise self._unreachable(f"{type(e).__name__}: {e}") from None
        tr = client.get_transport()
        tr.set_keepalive(15)
        return client

    def _abandon(self, client) -> None:
        """A connect failed: drop the half-made client and the jump hop opened for it."""
        client.close()
        jump, self._jump = self._jump, None
        if jump is not None:
            jump.close()

    def _proxy_sock(self, timeout: float):
        """A socket-like path to the target through ProxyCommand or a jump host (same known_hosts and key
        rules), or None for a direct connection."""
        import paramiko

        tgt = self.target
        if tgt.proxy_command:
            try:
                return paramiko.ProxyCommand(tgt.proxy_command)
            except (OSError, paramiko.SSHException) as e:
                raise self._unreachable(f"ProxyCommand {tgt.proxy_command!r} failed: {e}") from None
        if not tgt.proxy_jump:
            return None
        from pdctl.inventory import Host

        try:
            user, addr, port, earlier = parse_jump(tgt.proxy_jump)
        except ValueError:
            raise self._unreachable(f"cannot parse proxy_jump {tgt.proxy_jump!r} ([user@]host[:port][,...])") from None
        h = self.host
        if self._jump is not None:   # reconnecting: the old hop goes with the old connection
            self._jump.close()
        hop = Host(transport="ssh", address=addr, port=port or 22, user=user, key=h.key, known_hosts=h.known_hosts,
                   accept_new_host_key=h.accept_new_host_key, ssh_config=h.ssh_config,
                   connect_timeout=h.connect_timeout, command_timeout=h.command_timeout, proxy_jump=earlier)
        self._jump = SshTransport(f"{self.name} (jump {addr})", hop)
        try:
            return self._jump.open().get_transport().open_channel(
                "direct-tcpip", (tgt.address, tgt.port), ("127.0.0.1", 0), timeout=timeout)
        except (OSError, paramiko.SSHException, EOFError) as e:
            raise self._unreachable(f"jump host {addr} could not reach {self.where}: {e}") from None

    def _unreachable(self, cause: str) -> UnreachableError:
        return UnreachableError(
            f"host {self.name!r} ({self.target.user}@{self.where}) unreachable over SSH: {cause}",
            target=self.name,
            hint="check the address, port, user and key in the inventory, and that sshd runs there",
        )

    # -- commands --------------------------------------------------------------------------------------------
    def run(self, command: str, *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        """Run `command` under the login shell. A command overrunning `timeout` has its process group killed."""
        client = self.open()
        wrapped = f"printf '{_PID_MARK}%s\\n' $$ >&2\n{export_prefix(env)}{command}"
        try:
            chan = client.get_transport().open_session(timeout=self.host.connect_timeout)
            chan.exec_command(wrapped)
        except Exception as e:  # the connection dropped between open() and here
            raise self._unreachable(f"cannot open a session: {type(e).__name__}: {e}") from None
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
        stderr = _strip_pid_mark(err.decode(errors="replace"))
        if timed_out:
            stderr += f"\n[pdctl] command timed out after {timeout:g}s on {self.name}"
        return CommandResult(exit_code, out.decode(errors="replace"), stderr, timed_out)

    def _kill_remote(self, err: bytes) -> None:
        """Kill the process group of a timed-out command (sshd makes the shell a session leader)."""
        first = bytes(err).split(b"\n", 1)[0].decode(errors="replace")
        if not first.startswith(_PID_MARK):
            return
        pid = int(first[len(_PID_MARK):])
        try:
            chan = self._client.get_transport().open_session(timeout=self.host.connect_timeout)
            chan.settimeout(self.host.connect_timeout)
            chan.exec_command(f"kill -KILL -{pid} 2>/dev/null || kill -KILL {pid} 2>/dev/null; true")
            deadline = time.monotonic() + self.host.connect_timeout
            while not chan.exit_status_ready() and time.monotonic() < deadline:
                time.sleep(0.05)
            chan.close()
        except Exception:
            pass

    # -- files -----------------------------------------------------------------------------------------------
    def put_file(self, path: str, content: str | bytes, *, mode: int = 0o644) -> None:
        """Write via SFTP to a temp file next to `path`, chmod, then posix-rename over it. Creates parent dirs."""
        data = content.encode() if isinstance(content, str) else content
        parent = os.path.dirname(path) or "."
        res = self.run(f"mkdir -p -- {quote(parent)}", timeout=self.host.command_timeout)
        if not res.ok:
            raise StepFailed(f"{self.name}: cannot create {parent}: {res.stderr.strip()}")
        tmp = f"{parent}/.pdctl-{uuid.uuid4().hex[:12]}.tmp"
        import paramiko

        try:
            self._put_via_sftp(tmp, path, data, mode)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise StepFailed(f"{self.name}: writing {path} over SFTP failed: {e}") from None

    def _put_via_sftp(self, tmp: str, path: str, data: bytes, mode: int) -> None:
        sftp = self.open().open_sftp()
        try:
            sftp.get_channel().settimeout(self.host.command_timeout)
            try:
                with sftp.open(tmp, "wb") as f:
                    f.write(data)
                sftp.chmod(tmp, mode)
                sftp.posix_rename(tmp, path)
            except BaseException:
                try:
                    sftp.remove(tmp)
                except Exception:
                    pass
                raise
        finally:
            sftp.close()

    def read_file(self, path: str, *, timeout: float = 10.0) -> bytes | None:
        import paramiko

        try:
            sftp = self.open().open_sftp()
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise UnreachableError(f"{self.name}: cannot open SFTP to read {path}: {e}", target=self.name) from None
        try:
            sftp.get_channel().settimeout(timeout)
            with sftp.open(path, "rb") as f:
                return f.read()
        except (OSError, socket.timeout):
            return None
        finally:
            sftp.close()

    # -- http ------------------------------------------------------------------------------------------------
    def http_base_url(self, port: int, *, host: str = "127.0.0.1") -> str:
        """direct: http://{address}:{port}; tunnel: a local forwarder to host:port through this connection."""
        if self.host.http == "direct":
            addr = self.target.address if host in ("127.0.0.1", "localhost") else host
            return f"http://{addr}:{port}"
        key = (host, port)
        with self._lock:
            fwd = self._forwarders.get(key)
            if fwd is not None and not fwd.ssh.is_active():   # the connection dropped: forward over a new one
                self._forwarders.pop(key).close()
                fwd = None
        if fwd is None:
            client = self.open()
            with self._lock:
                fwd = self._forwarders.get(key)
                if fwd is None:
                    fwd = Forwarder(client.get_transport(), host, port)
                    self._forwarders[key] = fwd
        return f"http://127.0.0.1:{fwd.local_port}"

    def close(self) -> None:
        with self._lock:
            forwarders, self._forwarders = list(self._forwarders.values()), {}
            client, self._client = self._client, None
            jump, self._jump = self._jump, None
        for fwd in forwarders:
            fwd.close()
        if client is not None:
            client.close()
        if jump is not None:
            jump.close()

    def __repr__(self) -> str:
        return f"SshTransport({self.name!r}, {self.target.user}@{self.where})"


def _strip_pid_mark(stderr: str) -> str:
    if stderr.startswith(_PID_MARK):
        return stderr.split("\n", 1)[1] if "\n" in stderr else ""
    return stderr

