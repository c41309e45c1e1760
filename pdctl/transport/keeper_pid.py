"""A keeper's pid as the pdctl that started it recorded it, and ending that keeper by it.

A keeper that does not answer (SIGSTOPped, wedged) can be asked nothing, so neither `pdctl ssh --close` nor its
idle expiry can reach it through its socket. The pdctl that started it writes `<hash>.pid` beside the socket once
the keeper says "ready PID": the pid, the process's start time (a pid the kernel gave to another process since has
another start time) and the socket. Before any signal the process is checked to be that keeper: same start time,
same uid, argv `-m pdctl.transport.keeper` naming that socket; a pidfd then holds the process, so the signals
reach that keeper or nothing.

The record's mtime is when a client last got the keeper's greeting or answer: a keeper that no longer greets
and has had none for its keep seconds has outlived its idle limit, and the next run ends it (kept.py), since a
stopped process cannot end itself.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from dataclasses import dataclass

KEEPER_MODULE = "pdctl.transport.keeper"


@dataclass(frozen=True)
class KeeperRecord:
    pid: int
    start: int  # the process's start time, clock ticks after boot (/proc/PID/stat field 22)
    socket: str
    seen: float  # wall-clock time a client last got the keeper's greeting or answer (the record's mtime)


@dataclass(frozen=True)
class Ending:
    """What ending a recorded keeper came to: `ended` when its process is gone (by `how`), else `why` not."""

    ended: bool
    how: str | None = None  # "SIGTERM", "SIGKILL", or "already gone"
    why: str | None = None


def start_time(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks after boot), or None when there is no such process (or only
    its zombie: an ended keeper is nobody's child until init reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    if len(fields) < 20 or fields[0] == "Z":
        return None
    return int(fields[19])  # field 22 of the line; `fields` starts at field 3 (the state)


def write_record(path: str, pid: int, socket_path: str) -> None:
    """Record keeper `pid` serving `socket_path` at `path` (0600, replaced atomically, no link followed: the
    control directory is private). Raises OSError when it cannot be written, ValueError when `pid` is gone."""
    start = start_time(pid)
    if start is None:
        raise ValueError(f"process {pid} is gone")
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, json.dumps({"pid": pid, "start": start, "socket": socket_path}).encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_record(path: str) -> KeeperRecord | None:
    """The record at `path`, or None when there is none (or it is not one pdctl wrote)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        seen = os.fstat(fd).st_mtime
        data = json.loads(os.read(fd, 65536))
        return KeeperRecord(int(data["pid"]), int(data["start"]), str(data["socket"]), seen)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    finally:
        os.close(fd)


def mark_seen(path: str) -> None:
    """The keeper of this record just greeted or answered: its mtime says so. Never raises (no record: nothing)."""
    try:
        os.utime(path, follow_symlinks=False)
    except OSError:
        pass


def not_that_keeper(record: KeeperRecord) -> str | None:
    """Why process `record.pid` is not the recorded keeper (gone, a reused pid, another user's or another
    program), or None when it is. Reads /proc only."""
    pid = record.pid
    if start_time(pid) != record.start:
        return f"pid {pid} is no longer the keeper pdctl started (it ended)"
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return f"pid {pid} is no longer the keeper pdctl started (it ended)"
    if uid != os.getuid():
        return f"pid {pid} belongs to uid {uid}, not to this user"
    try:
        spec = json.loads(argv[3]) if argv[1:3] == [b"-m", KEEPER_MODULE.encode()] else None
    except (IndexError, ValueError):
        spec = None
    if not isinstance(spec, dict) or spec.get("socket") != record.socket:
        return f"pid {pid} is not the SSH keeper of {record.socket}"
    return None


def end_keeper(record: KeeperRecord, *, term_wait: float, kill_wait: float) -> Ending:
    """End the recorded keeper: SIGTERM (it unlinks its socket and answers what it had queued) with SIGCONT (a
    stopped process acts on SIGTERM only once continued), then SIGKILL after `term_wait` s. Signals nothing unless
    the process is that keeper. Ended is True when the process is gone, also when it was gone before."""
    try:
        pidfd = os.pidfd_open(record.pid)
    except ProcessLookupError:
        return Ending(True, "already gone")
    try:
        why = not_that_keeper(record)  # checked after the pidfd is open: the fd is this process, whatever comes
        if why is not None:
            gone = start_time(record.pid) != record.start
            return Ending(True, "already gone") if gone else Ending(False, why=why)
        return stop_process(pidfd, record.pid, term_wait=term_wait, kill_wait=kill_wait)
    finally:
        os.close(pidfd)


def stop_process(pidfd: int, pid: int, *, term_wait: float, kill_wait: float) -> Ending:
    """SIGTERM and SIGCONT to the process of `pidfd`, SIGKILL when it still runs after `term_wait` s; Ending.ended
    when it is gone within `kill_wait` s more. The caller has checked which process `pidfd` holds."""
    for sig, wait in ((signal.SIGTERM, term_wait), (signal.SIGKILL, kill_wait)):
        try:
            signal.pidfd_send_signal(pidfd, sig)
            if sig == signal.SIGTERM:
                signal.pidfd_send_signal(pidfd, signal.SIGCONT)
        except ProcessLookupError:  # it ended before this signal: by the one before, if any
            return Ending(True, "SIGTERM" if sig == signal.SIGKILL else "already gone")
        if _exited(pidfd, pid, wait):
            return Ending(True, sig.name)
    return Ending(False, why=f"pid {pid} still runs {term_wait + kill_wait:g} s after SIGTERM and SIGKILL")


def _exited(pidfd: int, pid: int, limit: float) -> bool:
    """Whether the process ended within `limit` s: a pidfd turns readable when its process exits (and a zombie
    left for init to reap counts as ended)."""
    deadline = time.monotonic() + limit
    while True:
        left = deadline - time.monotonic()
        if select.select([pidfd], [], [], max(0.0, min(left, 0.1)))[0] or start_time(pid) is None:
            return True
        if left <= 0:
            return False
