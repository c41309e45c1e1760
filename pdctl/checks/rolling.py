"""The rolling co-restart's plan and judges (issue 14, `pdctl restart --rolling`). Pure.

How units are formed, and why. The hazard (pdctl.checks.lineage) is a decode that comes back as a new process under
a prefill that had already paired with it. Behind a router every prefill pairs with every decode, so no subset of
prefills and decodes can be co-restarted on its own: the prefills left running have paired with its decodes. A unit
is therefore one GROUP OF DECODES (the decodes split into two halves, so the other half serves meanwhile) together
with EVERY PREFILL, restarted in this order:
  1. the group's decodes are taken out of every router, and their in-flight requests finish;
  2. each prefill in turn is taken out, drained, restarted, canaried straight against the decodes still serving,
     and put back: a fresh prefill pairs only with serving decodes, so it never meets the group's old processes;
  3. the group's decodes restart (no running prefill has ever paired with their old processes), every
     prefill x group pair is canaried, and the group goes back into every router.
Two units restart every prefill twice and every decode once; at least one prefill and half of the decodes serve
throughout. Workers that do not serve now (out of a router, or unhealthy in it) and pairs already known broken (the
restart lineage's hazards) decide the order: such decodes form the first group, so the decodes left serving during
unit 1 are the sound ones (a router retrying on a broken pair while its healthy decodes are out opens that decode's
circuit breaker: no decode at all), and such prefills roll first.
Routers hold no KV bootstrap state and are not restarted (`restart --role router` does that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from pdctl.checks.rolling_progress import Progress, still_out
from pdctl.serialize import JSON_OFF
from pdctl.role_ref import RoleRef

Worker = RoleRef  # a prefill or a decode


@dataclass(frozen=True)
class Unit:
    index: int  # 0-based; shown 1-based
    decodes: tuple[int, ...]  # the decode group restarted by this unit
    prefills: tuple[int, ...]  # every prefill, rolled one at a time while the group is out

    @property
    def name(self) -> str:
        return f"unit {self.index + 1}"

    def members(self) -> list[Worker]:
        return [RoleRef("prefill", i) for i in self.prefills] + [RoleRef("decode", j) for j in self.decodes]


def form_units(n_prefill: int, n_decode: int, first: Iterable[Worker] = ()) -> list[Unit]:
    """The units of a rolling restart of `n_prefill` x `n_decode` (see the module docstring): the decodes in two
    halves, the first half the larger; one unit when there is a single decode (which `refusal` refuses).
    `first`: workers to restart first (not serving now, or in a pair known broken): such decodes go in the first
    half (as many as fit), such prefills roll first in every unit. Otherwise index order."""
    first = set(first)
    prefills = tuple(sorted(range(n_prefill), key=lambda i: (RoleRef("prefill", i) not in first, i)))
    decodes = sorted(range(n_decode), key=lambda j: (RoleRef("decode", j) not in first, j))
    half = (n_decode + 1) // 2
    groups = [tuple(sorted(decodes[:half])), tuple(sorted(decodes[half:]))]
    return [Unit(k, g, prefills) for k, g in enumerate(g for g in groups if g)]


def refusal(units: Sequence[Unit], serving: Mapping[str, Iterable[Worker]]) -> str | None:
    """Why this rolling restart must not start, or None. `serving`: router label -> the workers its worker list
    holds now as healthy. The units are followed in order: a worker restarted by an earlier step serves again
    after it (it was canaried and put back), one that does not serve now and was not restarted yet does not.
    Refused when any step would leave a router with no prefill or no decode serving."""
    for router, present in serving.items():
        now = set(present)
        decodes_now = sorted(j for role, j in now if role == "decode")
        prefills_now = sorted(i for role, i in now if role == "prefill")
        fresh: set[Worker] = set()
        for unit in units:
            up = now | fresh
            if not {j for role, j in up if role == "decode"} - set(unit.decodes):
                gone = ", ".join(f"decode[{j}]" for j in unit.decodes)
                return (
                    f"taking {gone} out would leave {router} with no decode "
                    f"(it routes to {_serving(decodes_now, 'decode')}); a rolling restart needs two"
                )
            for i in unit.prefills:
                if not {k for role, k in now | fresh if role == "prefill"} - {i}:
                    return (
                        f"taking prefill[{i}] out would leave {router} with no prefill "
                        f"(it routes to {_serving(prefills_now, 'prefill')}); a rolling restart needs two"
                    )
                fresh.add(RoleRef("prefill", i))
            fresh |= {RoleRef("decode", j) for j in unit.decodes}
    return None


ROLLING_COMMAND, PAIR_COMMAND = "pdctl restart --rolling", "pdctl restart --pair"


def least_disruptive_co_restart(
    n_prefill: int, n_decode: int, serving: Mapping[str, Iterable[Worker]]
) -> tuple[str, str | None]:
    """The co-restart to advise now, so every screen advises the same one: `pdctl restart --rolling` (the service
    stays up; the workers some router does not route to go first) unless `refusal` refuses it with what the
    routers hold now (`serving`, as for `refusal`; {} when unknown: then the inventory's shape alone decides), then
    `pdctl restart --pair` (the service is down meanwhile) and why. Returns (command, why the rolling one is
    refused or None). Pure."""
    if n_prefill < 2 or n_decode < 2:  # with one of either, some unit leaves every router without it
        role, n = ("prefill", n_prefill) if n_prefill < 2 else ("decode", n_decode)
        return PAIR_COMMAND, f"a rolling restart needs two of each role and there is {n} {role}"
    declared = [RoleRef("prefill", i) for i in range(n_prefill)] + [RoleRef("decode", j) for j in range(n_decode)]
    held = {router: set(ws) for router, ws in serving.items()}
    idle = [w for w in declared if any(w not in ws for ws in held.values())]
    why = refusal(form_units(n_prefill, n_decode, idle), held)
    return (ROLLING_COMMAND, None) if why is None else (PAIR_COMMAND, why)


def _serving(indices: list[int], role: str) -> str:
    if not indices:
        return f"no healthy {role}"
    return f"{_count(len(indices), role)}: " + ", ".join(f"{role}[{k}]" for k in indices)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def same_url(a: str, b: str) -> bool:
    """Worker URLs as a router lists them and as pdctl renders them (trailing slash and case of the scheme/host
    aside)."""
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def listed(workers: Sequence[Mapping[str, Any]], url: str) -> Mapping[str, Any] | None:
    """The entry of `url` in a router's GET /workers list, or None."""
    return next((w for w in workers if same_url(str(w.get("url", "")), url)), None)


def back_in_service(workers: Sequence[Mapping[str, Any]], url: str, role: str) -> bool:
    """`url` is in the list as `role`, the router calls it healthy and (smg) its status is ready: it takes traffic
    again."""
    w = listed(workers, url)
    return (
        w is not None
        and w.get("worker_type") == role
        and w.get("is_healthy") is not False
        and w.get("status", "ready") == "ready"
    )


def drained(gauges: Mapping[str, float]) -> bool:
    """No request queued, transferring or running on one worker (its inflight gauges, pdctl.checks.inflight)."""
    return all(v == 0 for v in gauges.values())


@dataclass
class UnitState:
    """What one unit went through: `state` is "not started", "running", "done", "interrupted" or "failed at
    <step>"; `workers` each member's Progress (pdctl.checks.rolling_progress); `out` the labels of the members
    still out of the routers when the restart stopped (the operator must know what is not serving)."""

    unit: Unit = field(metadata=JSON_OFF)  # shown as its name and members' labels
    state: str = "not started"
    detail: str = ""
    out: list[str] | None = field(default=None, metadata=JSON_OFF)
    workers: dict[RoleRef, Progress] = field(default_factory=dict, metadata=JSON_OFF)
    json_extra = (
        ("unit", "unit.name"),
        ("decodes", "decode_labels"),
        ("prefills", "prefill_labels"),
        ("out_of_routers", "out_of_routers"),
        ("workers", "worker_progress"),
    )

    def __post_init__(self) -> None:
        for w in self.unit.members():
            self.workers.setdefault(w, Progress.UNTOUCHED)

    @property
    def worker_progress(self) -> dict[str, str]:
        """`{"prefill[0]": "back", "decode[0]": "restarting", ...}` for --json and the audit record."""
        return {w.short: p.value for w, p in self.workers.items()}

    def still_out(self) -> list[RoleRef]:
        """The members this unit leaves out of the routers."""
        return still_out([self.workers])

    @property
    def decode_labels(self) -> list[str]:
        return [f"decode[{j}]" for j in self.unit.decodes]

    @property
    def prefill_labels(self) -> list[str]:
        return [f"prefill[{i}]" for i in self.unit.prefills]

    @property
    def out_of_routers(self) -> list[str]:
        return self.out or []
