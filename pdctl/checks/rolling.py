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
throughout. Routers hold no KV bootstrap state and are not restarted (`restart --role router` does that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from pdctl.serialize import JSON_OFF

Worker = tuple[str, int]     # ("prefill" | "decode", index)


@dataclass(frozen=True)
class Unit:
    index: int                       # 0-based; shown 1-based
    decodes: tuple[int, ...]         # the decode group restarted by this unit
    prefills: tuple[int, ...]        # every prefill, rolled one at a time while the group is out

    @property
    def name(self) -> str:
        return f"unit {self.index + 1}"

    def members(self) -> list[Worker]:
        return [("prefill", i) for i in self.prefills] + [("decode", j) for j in self.decodes]


def form_units(n_prefill: int, n_decode: int) -> list[Unit]:
    """The units of a rolling restart of `n_prefill` x `n_decode` (see the module docstring): the decodes in two
    halves, the first half the larger; one unit when there is a single decode (which `refusal` refuses)."""
    prefills = tuple(range(n_prefill))
    half = (n_decode + 1) // 2
    groups = [tuple(range(half)), tuple(range(half, n_decode))]
    return [Unit(k, g, prefills) for k, g in enumerate(g for g in groups if g)]


def refusal(units: Sequence[Unit], in_service: Mapping[str, Iterable[Worker]]) -> str | None:
    """Why this rolling restart must not start, or None. `in_service`: router label -> the workers in its worker
    list now. Refused when any step would leave a router with no prefill or no decode: a unit's whole decode
    group out (every decode in one unit), or a prefill out when it is the router's only one."""
    for router, present in in_service.items():
        have = set(present)
        prefills = {i for role, i in have if role == "prefill"}
        decodes = {j for role, j in have if role == "decode"}
        for unit in units:
            left = decodes - set(unit.decodes)
            if not left:
                gone = ", ".join(f"decode[{j}]" for j in unit.decodes)
                return (f"taking {gone} out would leave {router} with no decode "
                        f"(it routes to {_count(len(decodes), 'decode')}); a rolling restart needs two")
            for i in unit.prefills:
                if not prefills - {i}:
                    return (f"taking prefill[{i}] out would leave {router} with no prefill "
                            f"(it routes to {_count(len(prefills), 'prefill')}); a rolling restart needs two")
    return None


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
    """`url` is in the list as `role` and the router calls it healthy: it takes traffic again."""
    w = listed(workers, url)
    return w is not None and w.get("worker_type") == role and w.get("is_healthy") is not False


def drained(gauges: Mapping[str, float]) -> bool:
    """No request queued, transferring or running on one worker (its inflight gauges, pdctl.checks.inflight)."""
    return all(v == 0 for v in gauges.values())


@dataclass
class UnitState:
    """What one unit went through: `state` is "not started", "done", or "failed at <step>"; `out` lists the
    members still out of the routers when the restart stopped (the operator must know what is not serving)."""
    unit: Unit = field(metadata=JSON_OFF)           # shown as its name and members' labels
    state: str = "not started"
    detail: str = ""
    out: list[str] | None = field(default=None, metadata=JSON_OFF)
    json_extra = (("unit", "unit.name"), ("decodes", "decode_labels"), ("prefills", "prefill_labels"),
                  ("out_of_routers", "out_of_routers"))

    @property
    def decode_labels(self) -> list[str]:
        return [f"decode[{j}]" for j in self.unit.decodes]

    @property
    def prefill_labels(self) -> list[str]:
        return [f"prefill[{i}]" for i in self.unit.prefills]

    @property
    def out_of_routers(self) -> list[str]:
        return self.out or []
