"""LocalTransport: run commands on this machine with subprocess.

Commands run under `/bin/sh -c` in a new session so that a timeout kills the whole process group. Never raises on a
non-zero exit; a command that overruns its timeout returns timed_out=True (exit_code -9).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile

from pdctl.transport.base import CommandResult, Transport


class LocalTransport(Transport):
    def __init__(self, name: str = "local"):
        self.name = name

    def run(self, command: str, *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        """Run `command` with /bin/sh; `env` is added on top of the current environment."""
        full_env = None
        if env:
            full_env = dict(os.environ)
            full_env.update({k: str(v) for k, v in env.items()})
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            try:
                out, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a grandchild holds the pipes open; give up on the output
                out, err = b"", b""
            return CommandResult(
                exit_code=-9,
                stdout=out.decode(errors="replace"),
                stderr=err.decode(errors="replace") + f"\n[pdctl] command timed out after {timeout:g}s",
                timed_out=True,
            )
        return CommandResult(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))

    def put_file(self, path: str, content: str | bytes, *, mode: int = 0o644) -> None:
        """Write atomically: a temp file in the same directory, chmod, rename. Creates parent dirs."""
        data = content.encode() if isinstance(content, str) else content
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".pdctl-", dir=parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def read_file(self, path: str, *, timeout: float = 10.0) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    def http_base_url(self, port: int, *, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{port}"

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"LocalTransport({self.name!r})"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
