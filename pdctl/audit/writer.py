"""The audit log's writing side: one JSON line per mutating action or playbook run, appended under an exclusive
file lock (`append`), and `audited`, the block that appends an action's final record however it ends (its result,
the error that stopped it with the exit code the CLI gives that error, or the interrupt).

A record names the inventory twice: `inventory`, the file the command was given (absolute), and `deployment`, the
name that file declares: the deployment's identity (its lock and service names), the same through a copy of the file
(`deployment_name`). Records written before `deployment` existed are matched by their path. A record an action
appends while a playbook runs its steps names that run (`playbook_run`, see set_playbook_run).

Records never carry secrets: callers pass env through `pdctl.secrets.mask_env` first, and `append` masks again any
mapping under a key named "env", and every string with `mask_text` (secret assignments and flags, and the userinfo
of every URL: `http://user:***@host`), as a last line of defence.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Iterator

from pdctl import state
from pdctl.errors import ExitCode, InventoryError, PdctlError, UsageError

STARTED = "started"  # the result of the record a mutating action appends before it starts (`audited(mark_start=)`)


def _mask_nested(obj: Any) -> Any:
    from pdctl.secrets import mask_env, mask_text

    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "env" and isinstance(v, dict):
                out[k] = mask_env({str(a): str(b) for a, b in v.items()})
            else:
                out[k] = _mask_nested(v)
        return out
    if isinstance(obj, list):
        return [_mask_nested(v) for v in obj]
    if isinstance(obj, str):
        return mask_text(obj)  # SECRET=value or --api-key value inside an error message or a log tail
    return obj


def _open_for_append(p: Path) -> int:
    """An fd open for appending to the log at `p` (made 0600 when missing, its directory 0700), opened by
    pdctl.safe_write: never through a symbolic link, never a file with other hard links or another user's in a
    sticky world-writable directory, never a FIFO, device or directory (and never blocking on one). Raises
    UsageError naming the log."""
    from pdctl.safe_write import open_append

    try:
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return open_append(p, UsageError, "audit log")
    except OSError as e:  # the directory could not be made
        raise UsageError(f"audit log {p}: cannot be written ({e.strerror or e})", hint=_UNWRITABLE_HINT) from None
    except UsageError as e:
        raise UsageError(e.message, hint=_UNWRITABLE_HINT) from None


_UNWRITABLE_HINT = (
    "every mutating action is recorded first: fix that path, or point PDCTL_AUDIT_LOG at a writable file "
    "(the file itself, not a link to it)"
)


def check_writable(path: Path | None = None) -> Path:
    """Raise UsageError (exit 2) naming the log unless it can be appended to; creates it (empty) if missing."""
    p = path or state.audit_log_path()
    os.close(_open_for_append(p))
    return p


# the playbook run under way in this context (pdctl.playbook.run_audit sets it around the run's steps)
_PLAYBOOK_RUN: ContextVar[str | None] = ContextVar("pdctl_playbook_run", default=None)


def set_playbook_run(run: str | None) -> None:
    """From now on in this context, every record but the run's own names the playbook run `run` under
    `playbook_run` (None: none): a restart or deploy that a step ran is then known as the run's, and the run's end
    says how it all ended (the heal ledger reads it so). Changes only this context (thread) of this process."""
    _PLAYBOOK_RUN.set(run)


def _load_inventory(path: str | os.PathLike):
    from pdctl.inventory import load_inventory  # lazy: the models are not needed to append a record

    try:
        return load_inventory(path)
    except UnicodeDecodeError:  # the YAML loader reads text and lets this one through
        raise InventoryError(f"{path}: cannot read inventory: not UTF-8 text") from None


def inventory_name_of(path: str) -> str | None:
    """The name the inventory file at `path` declares, through the inventory loader (None when the file is gone or
    no longer loads; the embedded default is "local"). Reads the file; never raises."""
    if not path or path.startswith("<"):
        return "local" if path == "<embedded default>" else None
    try:
        return _load_inventory(path).name
    except UsageError:
        return None


_NAMES: dict[tuple[str, int, int, int, int], str | None] = {}  # deployment_name's answers, by file and version


def deployment_name(inventory: str) -> str | None:
    """The deployment's name as the inventory file `inventory` declares it ("local" for the embedded default), or
    None when it is no file that loads (gone, unreadable, invalid). Reads the file once per version of it (its
    inode, size and mtime). Never raises."""
    if not inventory or inventory.startswith("<"):
        return inventory_name_of(inventory)
    try:
        st = os.stat(inventory)
    except (OSError, ValueError):
        return None
    key = (inventory, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _NAMES:
        if len(_NAMES) >= 64:  # a process names a few inventories; a long-lived one must not grow without end
            _NAMES.clear()
        _NAMES[key] = inventory_name_of(inventory)
    return _NAMES[key]


def append(
    action: str,
    *,
    inventory: str,
    args: dict[str, Any] | None = None,
    result: str,
    started: float,
    extra: dict[str, Any] | None = None,
    path: Path | None = None,
    deployment: str | None = None,
) -> dict[str, Any]:
    """Append one record and return it. `deployment` is the name the inventory declares (None: read from the
    inventory file, see deployment_name; left out when that file does not load). Safe with concurrent writers
    (flock + a single write of one line). Raises UsageError naming the log when it cannot be written (missing
    directory made, FIFO or directory refused)."""
    now = time.time()
    # a path as an absolute one: `history -i` from another directory must find (and not mistake) it
    source = inventory if not inventory or inventory.startswith("<") else os.path.abspath(inventory)
    name = deployment if deployment is not None else deployment_name(source)
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
        "operator": state.operator(),
        "inventory": source,
        **({"deployment": name} if name is not None else {}),
        "action": action,
        "args": _mask_nested(args or {}),
        "result": result,
        "duration_s": round(now - started, 3),
    }
    if extra:
        record.update(_mask_nested(extra))
    within = _PLAYBOOK_RUN.get()
    if within is not None and record.get("run") != within:
        record["playbook_run"] = within
    record["result"] = _mask_nested(record["result"])
    line = (json.dumps(record, sort_keys=False, default=str) + "\n").encode()
    p = path or state.audit_log_path()
    fd = _open_for_append(p)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    except OSError as e:  # e.g. a full disk
        raise UsageError(f"audit log {p}: cannot be written ({e.strerror or e})", hint=_UNWRITABLE_HINT) from None
    finally:
        os.close(fd)  # closing drops the flock
    return record


_RECORDED_BY = "pdctl_recorded_by"  # the attribute `audited` puts on an interrupt it recorded


def interrupt_recorded_by(e: BaseException) -> str | None:
    """The action whose `audited` block recorded the interrupt `e`, or one `e` was raised while handling (an op
    re-raises an interrupt as an Interrupted carrying what it left), else None: no audited action was running,
    so none recorded it, and none held the deployment lock (every lock is taken inside an audited block)."""
    seen: BaseException | None = e
    while seen is not None:
        action = getattr(seen, _RECORDED_BY, None)
        if isinstance(action, str):
            return action
        seen = seen.__context__
    return None


class Audited:
    """What an audited action fills in while it runs: its result line and extra fields for the record. `run`
    is the id shared by the action's "started" record and its final one."""

    def __init__(self) -> None:
        self.result = "error"
        self.extra: dict[str, Any] = {}
        self.run = uuid.uuid4().hex[:12]


@contextmanager
def audited(
    action: str,
    *,
    inventory: str,
    args: dict[str, Any],
    mark_start: bool = False,
    states: Callable[[], Any] | None = None,
    deployment: str | None = None,
) -> Iterator[Audited]:
    """Append one final record for `action` however it ends: the result the action set, the error that stopped
    it (refusals included), or "interrupted by SIGTERM" (the signal named when the interrupt carries one).

    Before the action runs, the log is checked writable (UsageError naming it otherwise, so nothing is done
    that cannot be recorded); with `mark_start` a "started" record with the same `run` id is appended first,
    so a run killed outright (kill -9) leaves a record with no end. On an interrupt, `states()` (best effort)
    goes into the record as "roles": what state the action left them in. `deployment`: as for `append`."""
    started = time.time()
    rec = Audited()
    try:
        if mark_start:
            append(
                action,
                inventory=inventory,
                args=args,
                result=STARTED,
                started=started,
                extra={"run": rec.run},
                deployment=deployment,
            )
        else:
            check_writable()
    except UsageError as e:
        raise UsageError(f"{e.message}: refusing to {action} (nothing was done)", hint=e.hint) from None
    failed = True
    interrupt: KeyboardInterrupt | None = None
    try:
        yield rec
        failed = False
    except KeyboardInterrupt as e:
        interrupt = e
        sig = getattr(e, "signal_name", None)
        rec.result = f"interrupted by {sig}" if sig else "interrupted"
        rec.extra["exit_code"] = ExitCode.INTERRUPTED
        if states is not None:
            try:
                rec.extra["roles"] = states()
            except Exception as err:  # the host may be what hung: the interrupt is still recorded
                rec.extra["roles"] = f"unknown: {getattr(err, 'message', None) or err}"
        raise
    except Exception as e:
        msg = getattr(e, "message", None) or str(e) or "no message"
        rec.result = f"{type(e).__name__}: {msg.splitlines()[0]}"
        # the CLI's exit code for it, which decides the result word (a StepFailed that got no answer is exit 3)
        rec.extra["exit_code"] = e.exit_code if isinstance(e, PdctlError) else ExitCode.CHECK_FAILED
        raise
    finally:
        rec.extra["run"] = rec.run
        try:
            append(
                action,
                inventory=inventory,
                args=args,
                result=rec.result,
                started=started,
                extra=rec.extra,
                deployment=deployment,
            )
            if interrupt is not None:  # the CLI's hint may now say that this action recorded where it stopped
                setattr(interrupt, _RECORDED_BY, action)
        except UsageError:
            if not failed:  # else the action's own error is the one to report
                raise
