"""The deployment lock: one mutating operation at a time per inventory, visible to every operator.

The lock is a directory created with `mkdir` (atomic on POSIX) on the first prefill's host, so operators on
different machines see the same lock. Its owner.json says who holds it, since when and for what. A lock left by a
process that died on the same machine (or an owner-less one older than OWNERLESS_STALE_S) is abandoned: taking it
over is said through `on_takeover` (the caller reports and audits it), and `abandoned()` reports one without
taking it; any other held lock refuses with LockHeld (exit 4).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Optional
from shlex import quote

from pdctl.errors import LockHeld
from pdctl.transport.base import Transport

OWNERLESS_STALE_S = 30.0  # a lock dir with no owner.json this old was left by a holder that died mid-acquire


@dataclass
class LockInfo:
    operator: str
    action: str
    since: float
    hostname: str
    pid: int
    token: str
    run: str = ""  # the audit run id of the holder's action ("" when it had none)

    def describe(self) -> str:
        age = int(time.time() - self.since)
        return f"{self.operator} ({self.action}, pid {self.pid} on {self.hostname}, for {age}s)"

    @classmethod
    def from_json(cls, raw: str | bytes) -> "LockInfo | None":
        """Parsed owner.json, or None when it is no owner record (not JSON, a field missing or of the wrong kind, a
        pid <= 0 that os.kill would read as a process group, a `since` that is no finite time): such a lock is
        judged as one without an owner (held while fresh, abandoned once old). Unknown keys (a newer pdctl) are
        ignored."""
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        texts = ("operator", "action", "hostname", "token")
        pid, since, run = data.get("pid"), data.get("since"), data.get("run", "")
        if not all(isinstance(data.get(k), str) for k in texts) or not isinstance(run, str):
            return None
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
            return None
        if isinstance(since, bool) or not isinstance(since, (int, float)) or not math.isfinite(since):
            return None
        return cls(data["operator"], data["action"], float(since), data["hostname"], pid, data["token"], run)


@dataclass(frozen=True)
class Abandoned:
    """A lock whose holder is gone: who held it, for what, since when (None: it had no owner.json)."""

    lock_dir: str
    host: str
    owner: Optional[LockInfo]
    age_s: float | None = None

    def describe(self) -> str:
        if self.owner is None:
            age = f", {self.age_s:.0f}s old" if self.age_s is not None else ""
            return (
                f"abandoned deployment lock {self.lock_dir} on {self.host} (no owner.json{age}: its holder died "
                "while taking it)"
            )
        o = self.owner
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(o.since))
        run = f", run {o.run}" if o.run else ""
        return (
            f"abandoned deployment lock {self.lock_dir} on {self.host}: held by {o.operator} for "
            f"'{o.action}' since {since} (pid {o.pid} on {o.hostname}{run}), and that process is gone; "
            "what it was doing may be half done"
        )


@dataclass(frozen=True)
class LockState:
    """What one read of the lock says: at most one of the two is set (both None: the lock is free)."""

    holder: str | None  # a live holder, described ("alice (restart --pair, pid 7 on h1, for 12s)")
    abandoned: Abandoned | None  # a holder that is gone


class DeploymentLock:
    """Context manager. `DeploymentLock(transport, lock_dir, operator, action)`; raises LockHeld if taken."""

    def __init__(
        self,
        transport: Transport,
        lock_dir: str,
        operator: str,
        action: str,
        *,
        run: str = "",
        on_takeover: Callable[[Abandoned], None] | None = None,
        state_dir: str | None = None,
    ):
        """`on_takeover(abandoned)` is called once we hold a lock taken over from a dead holder. `state_dir`: the
        host's state directory the lock lives under, checked before the lock is made there
        (pdctl.services.state_dir_guard: another user's link on the way is refused)."""
        self.transport = transport
        self.lock_dir = lock_dir
        self.state_dir = state_dir
        self.info = LockInfo(
            operator=operator,
            action=action,
            since=time.time(),
            hostname=socket.gethostname(),
            pid=os.getpid(),
            token=uuid.uuid4().hex,
            run=run,
        )
        self.held = False
        self.on_takeover = on_takeover
        self.took_over: Abandoned | None = None

    def _owner(self) -> LockInfo | None:
        raw = self.transport.read_file(f"{self.lock_dir}/owner.json")
        return LockInfo.from_json(raw) if raw else None

    def _holder_dead(self, owner: LockInfo) -> bool:
        # Only a holder on this very machine can be checked; a remote holder is trusted to be alive.
        if owner.hostname != socket.gethostname():
            return False
        try:
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def _age(self) -> float | None:
        """Seconds since the lock directory was made, by the host's clock (None if it is gone)."""
        d = quote(self.lock_dir)
        res = self.transport.run(f"echo $(( $(date +%s) - $(stat -c %Y {d}) ))", timeout=15)
        try:
            return float(res.stdout.strip()) if res.ok else None
        except ValueError:
            return None

    def state(self) -> "LockState":
        """The lock as it stands, from one read of owner.json (and of the directory's age only when that names no
        owner). Reads only; for the read-only commands (status, triage) that say a change is under way or that a
        lock was abandoned."""
        owner = self._owner()
        if owner is not None:
            if self._holder_dead(owner):
                return LockState(None, Abandoned(self.lock_dir, self.transport.name, owner))
            return LockState(owner.describe(), None)
        age = self._age()
        if age is None:
            return LockState(None, None)
        if age > OWNERLESS_STALE_S:
            return LockState(None, Abandoned(self.lock_dir, self.transport.name, None, age))
        # a holder between mkdir and writing owner.json, or a record pdctl cannot read: never silence
        return LockState(
            f"an unknown holder ({self.lock_dir} on {self.transport.name}: its owner.json is missing or unreadable)",
            None,
        )

    def holder(self) -> str | None:
        """Who holds the lock now, described: a live holder (or one on another machine, trusted to be alive), or a
        fresh lock whose owner.json is missing or unreadable; None when it is free or abandoned."""
        return self.state().holder

    def abandoned(self) -> Abandoned | None:
        """The lock, if it is abandoned (held by a dead process on this machine, or owner-less and older than
        OWNERLESS_STALE_S); None when free or held by a live holder."""
        return self.state().abandoned

    def _take_over(self, stale_token: str | None) -> bool:
        """Move the stale lock (the one whose owner token we judged, or an owner-less one) aside with an atomic
        rename, then check that what we moved is really that lock: if another operator took over first and made a
        fresh lock meanwhile, we moved theirs, so we put it back and report it held."""
        aside = f"{self.lock_dir}.stale.{self.info.token}"
        res = self.transport.run(f"mv -T {quote(self.lock_dir)} {quote(aside)}", timeout=15)
        if not res.ok:
            time.sleep(0.2)  # someone else moved it first; the next mkdir decides who holds it
            return False
        raw = self.transport.read_file(f"{aside}/owner.json")
        try:
            moved = json.loads(raw).get("token") if raw else None
        except ValueError:
            moved = None
        if moved == stale_token:
            self.transport.run(f"rm -rf {quote(aside)}", timeout=15)
            return True
        self.transport.run(
            f"mv -T {quote(aside)} {quote(self.lock_dir)} 2>/dev/null || rm -rf {quote(aside)}", timeout=15
        )
        owner = self._owner()
        raise LockHeld(
            f"deployment lock {self.lock_dir} on {self.transport.name} was just taken over by "
            f"{owner.describe() if owner else 'another operator'}"
        )

    def acquire(self) -> None:
        if self.state_dir is not None:  # every write and removal of the lock comes after this one check
            from pdctl.services.state_dir_guard import ensure_state_dir

            ensure_state_dir(self.transport, self.state_dir)
        parent = os.path.dirname(self.lock_dir)
        for _attempt in range(3):
            res = self.transport.run(f"mkdir -p {quote(parent)} && mkdir {quote(self.lock_dir)}", timeout=15)
            if res.ok:
                try:
                    self.transport.put_file(f"{self.lock_dir}/owner.json", json.dumps(self.info.__dict__))
                except BaseException:
                    self.transport.run(f"rm -rf {quote(self.lock_dir)}", timeout=15)
                    raise
                self.held = True
                if self.took_over is not None and self.on_takeover is not None:
                    try:
                        self.on_takeover(self.took_over)
                    except BaseException:  # never keep a lock whose taking could not be said
                        self.release()
                        raise
                return
            if res.timed_out:  # unknown, not "failed": nothing is known of the lock or of the host
                from pdctl.transport.base import no_answer

                raise no_answer(self.transport.name, 15, f"creating the deployment lock {self.lock_dir}")
            owner = self._owner()
            if owner is None:
                # a holder between mkdir and writing owner.json; or one that died there
                time.sleep(0.5)
                owner = self._owner()
            if owner is None:
                age = self._age()
                if age is None:
                    continue  # released meanwhile: try again
                if age > OWNERLESS_STALE_S:
                    if self._take_over(None):
                        self.took_over = Abandoned(self.lock_dir, self.transport.name, None, age)
                    continue
            elif self._holder_dead(owner):
                if self._take_over(owner.token):
                    self.took_over = Abandoned(self.lock_dir, self.transport.name, owner)
                continue
            who = owner.describe() if owner else "an unknown holder (no owner.json yet)"
            raise LockHeld(
                f"deployment lock {self.lock_dir} on {self.transport.name} is held by {who}",
                hint="wait for that operation to finish; if its holder is gone, remove the lock directory by hand",
            )
        raise LockHeld(f"deployment lock {self.lock_dir} on {self.transport.name} could not be taken")

    def release(self) -> None:
        if not self.held:
            return
        owner = self._owner()
        if owner is None or owner.token == self.info.token:
            self.transport.run(f"rm -rf {quote(self.lock_dir)}", timeout=15)
        self.held = False

    def __enter__(self) -> "DeploymentLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
