"""The incident's root cause and what it rules out, judged from what was recorded while it happened (the watch's
timeline and the audit log): after the fix a fresh triage sees a healthy deployment, so the evidence of the cause is
in those records. Each hypothesis the seeds know is a cause or ruled out, with its evidence: the degraded bootstrap
(a decode restarted alone against a long-running prefill), the update_status race (rooms pinned), a role down, a
host that did not answer; a pair broken for none of those is a cause of its own, unnamed. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pdctl.checks.incident_signals import Signals

CAUSE, RULED_OUT = "cause", "ruled out"

DEGRADED = "degraded bootstrap"
RACE = "update_status race (rooms pinned)"
ROLE_DOWN = "a role down"
UNREACHABLE = "a host that did not answer"
PAIR_BROKEN = "a pair broken (its cause not named by the evidence)"


@dataclass(frozen=True)
class Hypothesis:
    name: str
    verdict: str  # CAUSE | RULED_OUT
    evidence: list[str] = field(default_factory=list)


def _rise(series: Mapping[str, list[tuple[float, float]]]) -> dict[str, float]:
    """How much each worker's counter grew over its points (a drop is a restart: counted from 0 after it)."""
    out = {}
    for label, pts in series.items():
        total = 0.0
        for (_, a), (_, b) in zip(pts, pts[1:]):
            total += b - a if b >= a else b
        if total:
            out[label] = total
    return out


def judge_causes(
    lines: Sequence[Mapping[str, Any]], actions: Sequence[Mapping[str, Any]], sig: Signals
) -> list[Hypothesis]:
    """Causes first, then what is ruled out. `lines`: the watch's timeline lines in the window (none: nothing
    judged, []). `actions`: the audit records in the window."""
    if not lines:
        return []
    planned = _changes(lines)
    # a check that failed while a pdctl change held the lock (the operator's restart, the heal's) is that change's
    # doing: a role it stopped refuses connections, its rooms wait; not evidence of a cause of its own
    checks = [x for x in lines if "event" not in x and "check" in x and not _during(float(x["t"]), planned)]
    hazards = [x for x in lines if x.get("event") == "lineage" and x.get("status") == "hazard"]
    heals = [x for x in lines if x.get("event") == "heal" and x.get("outcome") in ("started", "done", "dry")]
    failed = _rise(sig.transfer_failed)
    boot_failed = _rise(sig.bootstrap_failed)
    bad_canaries = {p: [c for c in cs if c.status == "fail"] for p, cs in sig.canaries.items()}
    bad_canaries = {p: cs for p, cs in bad_canaries.items() if cs}
    kv = [f"{label} counted {n:g} KV transfer failure(s)" for label, n in failed.items()]
    kv += [f"{label} counted {n:g} bootstrap failure(s)" for label, n in boot_failed.items()]
    canaries = [f"pair {p}: {len(cs)} canary(ies) failed" for p, cs in bad_canaries.items()]
    out: list[Hypothesis] = []

    # the degraded bootstrap: the lineage judge's hazard, the heal's case, a decode restarted alone
    alone = [
        r
        for r in actions
        if str(r.get("action", "")).startswith("restart --role") and "prefill" not in str(r.get("action", ""))
    ]
    db_hazards = [x for x in hazards if x.get("hazard") == "degraded-bootstrap"]
    db_heals = [x for x in heals if x.get("case") == "degraded-bootstrap" and x.get("outcome") != "done"]
    # once per pair: every watch that starts (a restart of its service, a second watch) says a standing hazard again
    evidence = list(
        dict.fromkeys(
            f"lineage hazard degraded-bootstrap on {x.get('prefill')} -> {x.get('decode')}" for x in db_hazards
        )
    )
    evidence += [
        f"`pdctl {r.get('action')}` by {r.get('operator', '?')}"
        + (" with the hazard guard overridden" if (r.get("args") or {}).get("override_hazard") else "")
        for r in alone
    ]
    evidence += [f"the watch's heal named the case degraded-bootstrap ({x.get('observed', '')})" for x in db_heals]
    if db_hazards or db_heals:
        out.append(Hypothesis(DEGRADED, CAUSE, evidence + kv + canaries))
    else:
        out.append(
            Hypothesis(
                DEGRADED, RULED_OUT, ["no degraded-bootstrap lineage hazard and no heal of that case"] + evidence
            )
        )

    # the race: a pinned room waits for ever, it never fails
    pins = _pins(lines, planned)
    held = [(t, d) for t, d in pins if d >= PIN_HELD_S]
    if held:
        ev = [f"the inflight verdict read pinned for {d:.0f} s from {_clock(t)}" for t, d in held]
        out.append(Hypothesis(RACE, CAUSE, ev))
    else:
        longest = max((d for _, d in pins), default=0.0)
        why = (
            [f"the inflight verdict read pinned only briefly (at most {longest:.0f} s): a pinned room waits for ever"]
            if pins
            else ["the inflight verdict never read pinned in the window, but during a change"]
        )
        if kv:
            why.append("KV failures were counted, and a pinned room never fails: it waits (" + "; ".join(kv) + ")")
        if bad_canaries:
            why.append("pair canaries failed (" + "; ".join(canaries) + ")")
        out.append(Hypothesis(RACE, RULED_OUT, why))

    # a role's own /health: the router's readiness and breakers follow what its workers do, never a cause
    health = [x for x in checks if x.get("check") == "/health" and x.get("status") == "fail"]
    if health:
        ev = [f"{x.get('target')} {x.get('check')}: {x.get('observed')}" for x in health]
        out.append(Hypothesis(ROLE_DOWN, CAUSE, ev))
    else:
        out.append(Hypothesis(ROLE_DOWN, RULED_OUT, ["no role's /health failed in the window, but during a change"]))

    unknown = [x for x in lines if x.get("event") == "target" and x.get("status") == "unknown"]
    if unknown:
        ev = [f"{x.get('target')} unknown: {x.get('observed', '')}" for x in unknown]
        out.append(Hypothesis(UNREACHABLE, CAUSE, ev))
    else:
        out.append(Hypothesis(UNREACHABLE, RULED_OUT, ["every host answered every round (no target turned unknown)"]))

    if bad_canaries and not any(h.verdict == CAUSE for h in out):
        out.append(Hypothesis(PAIR_BROKEN, CAUSE, canaries + kv))
    return sorted(out, key=lambda h: h.verdict != CAUSE)


PIN_HELD_S = 60.0  # a pin the race makes lasts (the seed's: 16 minutes); the verdict flapping for seconds is none
CHANGE_GRACE_S = 10.0  # a role restarted by a change answers its first probes a little after the lock is let go
CHANGE_SEEN_LATE_S = 5.0  # the watch reads the lock every health round: a change is seen up to a round late


def _changes(lines: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """(start, end + CHANGE_GRACE_S) of each pdctl change the watch saw hold the deployment lock (a change still
    held at the last line lasts to the end)."""
    out: list[tuple[float, float]] = []
    began: float | None = None
    for x in lines:
        if x.get("event") != "change":
            continue
        if x.get("status") == "started" and began is None:
            began = float(x["t"]) - CHANGE_SEEN_LATE_S
        elif x.get("status") == "ended" and began is not None:
            out.append((began, float(x["t"]) + CHANGE_GRACE_S))
            began = None
    if began is not None:
        out.append((began, float("inf")))
    return out


def _during(t: float, spans: Sequence[tuple[float, float]]) -> bool:
    return any(a <= t <= b for a, b in spans)


def _clock(t: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(t).strftime("%H:%M:%S")


def _pins(lines: Sequence[Mapping[str, Any]], planned: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(start, seconds) of each time the inflight check read pinned (failed) outside a change; one still pinned at
    the last line lasts to it."""
    out: list[tuple[float, float]] = []
    began: float | None = None
    last = float(lines[-1]["t"]) if lines else 0.0
    for x in lines:
        if x.get("layer") != "inflight" or "event" in x:
            continue
        t = float(x["t"])
        if x.get("status") == "fail" and began is None and not _during(t, planned):
            began = t
        elif x.get("status") != "fail" and began is not None:
            out.append((began, t - began))
            began = None
    if began is not None:
        out.append((began, last - began))
    return out
