"""The service-manager interface shared by systemd and pidfile managers.

A ServiceSpec is everything needed to (re)create a role's process. `install` reports whether anything changed so
that a re-run of deploy with nothing changed restarts nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pdctl.checks.proc import ProcessInfo


@dataclass(frozen=True)
class ServiceSpec:
    name: str  # unit name (systemd) or pidfile stem
    argv: tuple[str, ...]  # the launch command, unquoted; managers quote it
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    description: str = ""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    active: bool
    main_pid: int | None
    started_at: float | None  # epoch seconds the main process started (from /proc or systemd), None if down
    detail: str = ""  # e.g. systemd ActiveState/SubState, or "stale pidfile"
    restarts: int | None = None  # systemd's NRestarts: restarts systemd made on its own since the last manual start


def spec_changes(old: ServiceSpec | None, new: ServiceSpec) -> list[str]:
    """What installing `new` over `old` changes, one line each: secret-looking env values masked, and the declared
    secret values of either spec scrubbed wherever they appear (an env name that embeds one included)."""
    from pdctl.secrets import mask_argv, mask_env, mask_text, secret_values

    if old is None:
        return ["new service"]
    out = []
    if old.argv != new.argv:
        was, now = mask_argv(list(old.argv)), mask_argv(list(new.argv))
        removed = [a for a in was if a not in now]
        added = [a for a in now if a not in was]
        out.append(
            "command: " + " ".join([f"-{a}" for a in removed] + [f"+{a}" for a in added])
            if removed or added
            else "command: argument order changed"
        )
    secrets = secret_values(old.env, old.argv) | secret_values(new.env, new.argv)
    old_env, new_env = mask_env(old.env), mask_env(new.env)  # by name; the lines are scrubbed below
    for k in sorted(set(old.env) | set(new.env)):
        if k not in new.env:
            out.append(f"env: -{k}")
        elif k not in old.env:
            out.append(f"env: +{k}={new_env[k]}")
        elif old.env[k] != new.env[k]:
            out.append(f"env: {k} {old_env[k]} -> {new_env[k]}")
    if old.workdir != new.workdir:
        out.append(f"workdir: {old.workdir} -> {new.workdir}")
    return [mask_text(line, secrets) for line in out]


class ServiceManager(ABC):
    @abstractmethod
    def install(self, spec: ServiceSpec) -> bool:
        """Write the unit/launcher for `spec`. Returns True when it differs from what was installed."""

    @abstractmethod
    def start(self, name: str) -> None:
        """Start the service; no-op if running. Raises StepFailed if it exits at once."""

    @abstractmethod
    def stop(self, name: str, *, grace: float = 20.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds. No-op if not running."""

    def is_current(self, spec: ServiceSpec) -> bool:
        """True when `spec` is exactly what is installed now, so deploy would change nothing. Writes nothing."""
        raise NotImplementedError

    def installed_spec(self, name: str) -> ServiceSpec | None:
        """The spec installed now, when the manager can read it back (None: unknown or not installed)."""
        return None

    def not_installed(self, name: str) -> str | None:
        """Why `name` could not be started because its definition is not on the host (e.g. "spec file X
        missing"), or None when it is there or the manager cannot tell. Reads only: checked before a restart
        stops anything."""
        return None

    def restart(self, name: str, *, grace: float = 20.0) -> None:
        self.stop(name, grace=grace)
        self.start(name)

    @abstractmethod
    def status(self, name: str) -> ServiceStatus:
        """Observe the service: active, main pid and its start time."""

    def observe(self, names: list[str]) -> dict[str, tuple[ServiceStatus, "ProcessInfo | None"]]:
        """Each service's status and its live main process (argv, env, start time; None when not running), for
        every name. The managers read all of them in one remote command; this fallback asks one by one.
        Raises like `status` (UnreachableError when the host did not answer: unknown, never stopped)."""
        from pdctl.services.proc_read import read_process

        out = {}
        for name in names:
            st = self.status(name)
            transport = getattr(self, "t", None)
            info = read_process(transport, st.main_pid) if st.active and st.main_pid and transport else None
            out[name] = (st, info)
        return out

    def purge(self, name: str) -> list[str]:
        """Remove what `install` and the service's runs left on the host (rendered spec/unit, log); the service must
        be stopped. Returns the paths removed (or what could not be, said in words)."""
        raise NotImplementedError

    def missing_log(self, name: str) -> str | None:
        """Where the service's log file was looked for when it does not exist on the host (never started there, or
        purged); None when it exists or the log is not a file (the journal)."""
        return None

    @abstractmethod
    def log_tail(self, name: str, lines: int = 200) -> str:
        """The last `lines` lines of the service's log (journal or log file)."""
