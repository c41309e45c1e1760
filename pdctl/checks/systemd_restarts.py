"""Restarts systemd made on its own (layer "lineage"): the seed's decode-only restart, done silently by Restart=.

With `Restart=on-failure` (pdctl's default) or `always`, a decode that crashes is started again by systemd while the
prefill runs on: the degraded-bootstrap hazard of the seed, without anyone typing a command. systemd counts these
restarts in the unit's `NRestarts` (a manual start or restart, as `pdctl restart --pair` does, resets it), so the
count is observed, not guessed:
- a prefill or decode unit with NRestarts > 0 whose KV pair (a running instance of the other role) started before
  its current process = FAIL, naming the unit and the count, recommending `pdctl restart --pair`;
- the same with every pair started after it (the pair was restarted since) = PASS, the count reported;
- a router with NRestarts > 0 = PASS with the count: it holds no KV bootstrap state (see `lone_restart_hazard`);
- NRestarts = 0 = PASS.
Only services that report NRestarts (systemd) are judged; pidfile services give no row here. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pdctl.checks.lineage import ACTION, LAYER, START_TOLERANCE_S, lone_restart_hazard
from pdctl.checks.result import NEXT_PAIR_RESTART, CheckResult, Status

CHECK = "systemd restarts"


@dataclass(frozen=True)
class UnitRestarts:
    """One running unit as systemd reports it: its role, unit name, NRestarts, main pid and start (epoch s)."""

    role: str
    unit: str
    restarts: int
    pid: int | None
    start: float | None


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def judge_systemd_restarts(units: Mapping[str, UnitRestarts]) -> list[CheckResult]:
    """One CheckResult per unit (label -> UnitRestarts), in the order given."""
    results = []
    for label, u in units.items():
        data = {"unit": u.unit, "restarts": u.restarts, "pid": u.pid, "start": u.start}
        observed = f"NRestarts={u.restarts} on {u.unit}"
        if u.restarts == 0:
            results.append(
                CheckResult(
                    LAYER,
                    label,
                    CHECK,
                    Status.PASS,
                    observed=observed,
                    expected="NRestarts=0",
                    detail="observed: systemd has not restarted it since it was last started",
                    data=data,
                )
            )
            continue
        other = {"prefill": "decode", "decode": "prefill"}.get(u.role)
        ran_on = [
            (lbl, p)
            for lbl, p in units.items()
            if p.role == other and p.start is not None and u.start is not None and p.start < u.start - START_TOLERANCE_S
        ]
        if ran_on and other and lone_restart_hazard([u.role], [other]):
            peer, p = ran_on[0]
            results.append(
                CheckResult(
                    LAYER,
                    label,
                    CHECK,
                    Status.FAIL,
                    observed=f"{observed}: systemd restarted it {_times(u.restarts)} on its own; now pid {u.pid}",
                    expected="NRestarts=0 (no restart without its pair)",
                    detail=(
                        f"observed: {u.unit} was restarted by systemd (Restart=) while {peer} (pid {p.pid}) ran "
                        f"on; inferred: the degraded-bootstrap hazard (silent transfer failures); {ACTION}"
                    ),
                    next_step=NEXT_PAIR_RESTART,
                    data={**data, "hazard": "systemd-restarted-alone", "peer": peer},
                )
            )
            continue
        why = (
            "it holds no KV bootstrap state"
            if other is None
            else f"every running {other} started after it"
            if any(p.role == other for p in units.values())
            else f"no running {other} to pair with"
        )
        results.append(
            CheckResult(
                LAYER,
                label,
                CHECK,
                Status.PASS,
                observed=f"{observed}: systemd restarted it {_times(u.restarts)} on its own",
                expected="NRestarts=0, or a restart that left no stale pair",
                detail=f"observed: {why}, so this is not the degraded-bootstrap hazard",
                data=data,
            )
        )
    return results
