"""Read one live process from /proc on a host: argv, env and start time in ONE remote command. The observe half
of checks/proc.py (which holds the command and the pure parsers): a command that does not answer in time is turned
into `no_answer` here, where the transport is asked, so checks/ imports nothing of transport/."""

from __future__ import annotations

from pdctl.checks.proc import ProcessInfo, ProcReadError, parse_proc_dump, proc_command
from pdctl.transport.base import Transport, no_answer


def read_process(transport: Transport, pid: int, *, timeout: float = 10.0) -> ProcessInfo | None:
    """Read argv, env and start time of `pid` on the transport's host in one command.

    Returns None when the pid does not exist (or vanished during the read). Changes nothing on the host. Raises
    UnreachableError when the host cannot be reached or the read overruns `timeout` ("unknown: ... did not answer",
    never "no process"), and ProcReadError when the command itself failed (e.g. no base64), with its stderr.
    """
    res = transport.run(proc_command(pid), timeout=timeout)
    name = getattr(transport, "name", "?")
    if res.timed_out:
        raise no_answer(name, timeout, f"reading /proc/{int(pid)}")
    if not res.ok:
        raise ProcReadError(f"reading /proc/{pid} on {name} failed (exit {res.exit_code}): {res.stderr.strip()[:300]}")
    return parse_proc_dump(pid, res.stdout)
