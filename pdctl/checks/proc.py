"""A live process as the kernel sees it: argv, environment and start time from /proc, in ONE remote command.

Observe: `proc_command(pid)` is one small POSIX shell command that prints base64 of /proc/PID/cmdline,
/proc/PID/environ and /proc/PID/stat plus the boot time and clock tick; services/proc_read.read_process and
services/observe.py run it over the transport. Parse: the pure `parse_cmdline`, `parse_environ`,
`parse_stat_starttime` and `parse_proc_dump`. Works on Linux hosts (coreutils or
busybox `base64`). The environ of another user's process needs root: then `env` is None, never guessed.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from dataclasses import dataclass, field

from pdctl.errors import PdctlError
from pdctl.secrets import mask_argv, mask_env

GONE_MARK = "PDCTL_PROC_GONE"


class ProcReadError(PdctlError):
    """The /proc read command itself failed on a reachable host (no /bin/sh or base64); a timeout is
    UnreachableError."""


@dataclass
class ProcessInfo:
    pid: int
    argv: list[str]
    env: dict[str, str] | None  # None: /proc/PID/environ not readable (permissions)
    start_time: float | None  # epoch seconds (boot time + starttime ticks / CLK_TCK)
    start_ticks: int | None = None  # raw starttime: with pid, identifies a process exactly (pid reuse)
    notes: list[str] = field(default_factory=list)

    def masked(self) -> dict:
        """A JSON-safe view with secret-looking env values and argv flags masked."""
        return {
            "pid": self.pid,
            "argv": mask_argv(self.argv),
            "env": None if self.env is None else mask_env(self.env),
            "start_time": self.start_time,
            "start_ticks": self.start_ticks,
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:  # never leak env through a repr in a traceback or log
        return f"ProcessInfo(pid={self.pid}, argv={mask_argv(self.argv)!r}, start_time={self.start_time!r})"


def parse_cmdline(data: bytes) -> list[str]:
    """NUL-separated /proc/PID/cmdline -> argv. A trailing NUL is dropped; empty args inside are kept."""
    if not data:
        return []
    if data.endswith(b"\0"):
        data = data[:-1]
    return [a.decode("utf-8", errors="surrogateescape") for a in data.split(b"\0")]


def parse_environ(data: bytes) -> dict[str, str]:
    """NUL-separated /proc/PID/environ -> dict. Entries without '=' are skipped; a later duplicate wins."""
    env: dict[str, str] = {}
    for entry in data.split(b"\0"):
        if not entry or b"=" not in entry:
            continue
        k, v = entry.split(b"=", 1)
        env[k.decode("utf-8", errors="surrogateescape")] = v.decode("utf-8", errors="surrogateescape")
    return env


def parse_stat_starttime(stat: str) -> int:
    """Field 22 (starttime, clock ticks after boot) of /proc/PID/stat. The comm field may hold spaces and ')'."""
    rest = stat[stat.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state); starttime is field 22
    return int(rest[22 - 3])


def proc_command(pid: int) -> str:
    """The one shell command `read_process` runs: `key base64` lines, or GONE_MARK if the pid does not exist."""
    p = shlex.quote(f"/proc/{int(pid)}")
    return (
        f"if [ ! -d {p} ]; then echo {GONE_MARK}; exit 0; fi; "
        f"for f in cmdline environ stat; do printf '%s ' \"$f\"; "
        f"if out=$(base64 2>/dev/null < {p}/$f); then printf '%s' \"$out\" | tr -d '\\n'; echo; "
        f"else echo '!'; fi; done; "
        "printf 'btime '; awk '/^btime/{print $2}' /proc/stat; "
        "printf 'clk '; getconf CLK_TCK 2>/dev/null || echo 100"
    )


def parse_proc_dump(pid: int, stdout: str) -> ProcessInfo | None:
    """Parse the output of `proc_command(pid)`. None when the process is gone (before or during the read)."""
    if GONE_MARK in stdout:
        return None
    fields: dict[str, str] = {}
    for line in stdout.splitlines():
        key, _, val = line.partition(" ")
        fields[key] = val.strip()
    notes: list[str] = []

    def blob(key: str) -> bytes | None:
        v = fields.get(key)
        if v is None or v == "!":
            return None
        try:
            return base64.b64decode(v, validate=False)
        except (binascii.Error, ValueError):
            notes.append(f"{key}: undecodable output")
            return None

    cmdline, environ, stat = blob("cmdline"), blob("environ"), blob("stat")
    if stat is None or not stat:
        return None  # no stat: the pid vanished while we read it
    if cmdline is None:
        notes.append("cmdline not readable")
    elif not cmdline:
        notes.append("empty cmdline (zombie or kernel thread)")
    if environ is None:
        notes.append("environ not readable (another user's process needs root)")
    start_ticks = start_time = None
    try:
        start_ticks = parse_stat_starttime(stat.decode(errors="replace"))
        btime = int(fields["btime"])
        clk = int(fields.get("clk") or 100)
        start_time = btime + start_ticks / clk
    except (ValueError, IndexError, KeyError):
        notes.append("start time not readable")
    return ProcessInfo(
        pid=int(pid),
        argv=parse_cmdline(cmdline or b""),
        env=None if environ is None else parse_environ(environ),
        start_time=start_time,
        start_ticks=start_ticks,
        notes=notes,
    )
