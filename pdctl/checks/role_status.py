"""One row of `pdctl status`: a role instance's service as observed, or why its host could not be asked.

Built by ops.lifecycle.status, read by render.status, the CLI and the restart-lineage judges. A row whose host could
not be asked is "unknown", never "stopped": nothing is known about its services."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

RoleState = Literal["running", "stopped", "unknown"]

# the keys a --json row of each kind never has (both kinds share one class, so each leaves out the other's keys)
_REACHED_ONLY = ("started_at", "restarts")
_UNKNOWN_ONLY = ("error_exit_code", "error", "hint")


@dataclass(frozen=True)
class RoleStatus:
    """The fields in the order of `pdctl status --json`'s row. A reached row has `started_at` and `restarts` (None
    when stopped, or for a pidfile service); an unknown row has `error`, `error_exit_code` and `hint` instead."""

    label: str
    role: str
    index: int
    host: str
    service: str
    active: bool
    state: RoleState = dataclasses.field(init=False)  # from `active` and `error`: never out of step with them
    pid: int | None = None
    started_at: float | None = None  # epoch seconds the running main process started
    uptime_s: float | None = None
    detail: str = ""
    restarts: int | None = None  # systemd's NRestarts; None for pidfile services
    error_exit_code: int | None = None  # why the host could not be asked: the error's exit code, message and hint
    error: str | None = None
    hint: str | None = None

    def __post_init__(self) -> None:
        if self.error is not None and (self.active or self.started_at is not None or self.restarts is not None):
            raise ValueError(f"{self.label}: a host that could not be asked has no service facts")
        state: RoleState = "unknown" if self.error is not None else ("running" if self.active else "stopped")
        object.__setattr__(self, "state", state)  # frozen: the one assignment, at construction

    @property
    def json_omit_empty(self) -> tuple[str, ...]:
        """serialize.to_data's per-row omission: the other kind's keys (always None in this row) are left out, so
        each kind keeps its own --json shape."""
        return _REACHED_ONLY if self.state == "unknown" else _UNKNOWN_ONLY
