"""Restart lineage (layer "lineage"): the seed's degraded-bootstrap hazard per prefill x decode pair, judged from pids
and start times.

The incident: prefill ran 17 h while decode was restarted several times against it; NIXL piled up stale peers and
transfers failed silently until a clean co-restart prefill -> decode -> router. Every decode pairs with every
prefill, so each (prefill, decode) pair is judged on its own (`pair_hazards`):
- with a record of the last co-restart (checks/lineage_record.py: each process's role, pid and start then, written
  by pdctl after deploy or restart --pair), FAIL (observed: which process changed):
  - the decode changed since the record while that prefill is unchanged = "degraded-bootstrap": the decode came
    back as a new process under a prefill that had already paired with its old one (the prefill keeps stale
    peer state: the hazard the engine's drill models);
  - the prefill changed while that decode is unchanged = "prefill-restarted-alone": the decode keeps the dead
    prefill's bootstrap state;
  - both unchanged = clean;
  - both changed (or one cannot be told): the record says nothing about their order, so it is stale for that
    pair and the start times judge it, as without a record;
- without a record (or a stale one for the pair), WARN (inferred only from start times: pdctl cannot know whether
  the restarts were a co-restart):
  - the decode started more than `window_s` after that prefill = "degraded-bootstrap" (the prefill ran on, and
    likely paired with the old decode, when the new one came up; a co-restart starts decode within the window);
  - the decode started before that prefill (beyond START_TOLERANCE_S) = "prefill-restarted-alone": a prefill
    started after the decode's new start is fresh (no stale peer: never the degraded-bootstrap kind), but the
    decode ran on under the old prefill, and a co-restart never starts decode first. This is what
    `pdctl restart` refuses too: the second of `restart --role decode` then `restart --role prefill` is a prefill
    restarted without decode while decode runs on (`lone_restart_hazard`), whatever happened before;
  - otherwise (prefill first, decode within the window) = clean.
Each of these is `lone_restart_hazard` applied to one pair at the moment of the later restart: one side of the KV
pair restarted while the other ran on. The router holds no KV bootstrap state (it re-reads its workers), so
restarting it alone is allowed and never flagged here.

Shown: one CheckResult per instance; a decode's names EVERY prefill it is hazardous with, `data["pairs"]` lists
those pairs ({"prefill", "decode", "hazard", "basis"}), `data["hazard"]`/`data["prefill"]` the first of them.
Pure: give `now` to make it deterministic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator, Mapping

from pdctl.checks.lineage_record import LineageRecord
from pdctl.checks.result import NEXT_PAIR_RESTART, CheckResult, Status
from pdctl.engines import HazardKnowledge
from pdctl.serialize import JSON_OFF, to_data

LAYER = "lineage"
ACTION = "run `pdctl restart --pair` (prefill -> decode -> router)"
#: start times from different readers (systemd, /proc) differ by rounding; closer than this = the same start
START_TOLERANCE_S = 2.0
DEGRADED, PREFILL_ALONE = "degraded-bootstrap", "prefill-restarted-alone"
RECORD, START_TIMES = "record", "start times"


#: the roles that hold KV bootstrap state with each other
KV_PAIR = ("prefill", "decode")


def lone_restart_hazard(restarted: Iterable[str], running: Iterable[str] = KV_PAIR) -> str | None:
    """Why restarting the roles `restarted` while the roles `running` run on is the seed's degraded-bootstrap
    hazard, or None. The hazard: prefill or decode restarted without its pair while the pair runs on (decode keeps
    a stale bootstrap with the prefill, or the prefill forgets a decode still bound to it). The router holds no KV
    bootstrap state, so it never makes or avoids the hazard. Pure; used by `pdctl restart` and by the judge below."""
    kv = set(restarted) & set(KV_PAIR)
    if len(kv) != 1:
        return None
    (one,) = kv
    other = "decode" if one == "prefill" else "prefill"
    if other not in set(running):
        return None
    return f"{one} restarted without {other} while {other} runs on"


@dataclass(frozen=True)
class PairHazard:
    """One hazardous (prefill, decode) pair: its kind and what it was judged from."""

    prefill: str  # label
    decode: str  # label
    hazard: str  # DEGRADED | PREFILL_ALONE
    basis: str  # RECORD (who changed since the co-restart) | START_TIMES (inferred)
    # decode start - prefill start, when both are known (the check's data has it as `after_prefill_s`, per pair)
    after_prefill_s: float | None = field(default=None, metadata=JSON_OFF)

    @property
    def status(self) -> Status:
        return Status.FAIL if self.basis == RECORD else Status.WARN


#: label -> (role, pid, start epoch or None) of the live main processes: what this judge is given
Starts = Mapping[str, tuple[str, int, float | None]]


@dataclass(frozen=True)
class LineageData:
    """A lineage row's `data` (its --json): what was observed of the process, then what was judged of it; a value
    not judged is left out."""

    pid: int
    start: float | None
    record: bool  # a co-restart record was read
    after_prefill_s: dict[str, float] | None = None  # prefill label -> decode/router start - its start
    record_stale: bool | None = None  # True: both sides changed since the record (start times judged the pair)
    hazard: str | None = None  # the first hazardous pair's kind
    prefill: str | None = None  # and its prefill
    confidence: str | None = None  # "known" | "possible" (pdctl.engines)
    pairs: list[PairHazard] | None = None  # every hazardous pair
    json_omit_empty = ("after_prefill_s", "record_stale", "hazard", "prefill", "confidence", "pairs")


def _human(seconds: float) -> str:
    s = int(max(0, seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m"
    if m:
        return f"{m}m {s}s"
    return f"{s}s"


def _unchanged(label: str, pid: int, seen: LineageData) -> CheckResult:
    """PASS: the process is the one the last co-restart recorded."""
    return CheckResult(
        LAYER,
        label,
        "restart lineage",
        Status.PASS,
        observed=f"unchanged since the last co-restart (pid {pid})",
        expected="co-restarted with its prefill",
        detail="observed: same pid and start time as recorded",
        data=to_data(seen),
    )


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _changed(label: str, starts: Starts, rec: LineageRecord | None) -> bool | None:
    """True/False against the record; None when it cannot be told (same pid, no start time)."""
    _role, pid, start = starts[label]
    old = rec.get(label) if rec is not None else None
    if old is None:
        return True
    rpid, rstart = old.pid, old.start
    if pid != rpid:
        return True
    if start is None or rstart is None:
        return None if start is None else True
    return abs(float(start) - float(rstart)) > START_TOLERANCE_S


def _pair(
    p: str, d: str, starts: Starts, rec: LineageRecord | None, window_s: float
) -> tuple[str | None, str, float | None]:
    """(hazard kind or None, basis, decode start - prefill start) of one pair, by the rules of the docstring."""
    pstart, dstart = starts[p][2], starts[d][2]
    delta = None if pstart is None or dstart is None else float(dstart) - float(pstart)
    if rec is not None:
        cp, cd = _changed(p, starts, rec), _changed(d, starts, rec)
        if cd is True and cp is False and lone_restart_hazard(["decode"], ["prefill"]):
            return DEGRADED, RECORD, delta
        if cd is False and cp is True and lone_restart_hazard(["prefill"], ["decode"]):
            return PREFILL_ALONE, RECORD, delta
        if cd is False and cp is False:
            return None, RECORD, delta
    if delta is None:
        return None, START_TIMES, delta
    if delta > window_s:
        return DEGRADED, START_TIMES, delta
    if delta < -START_TOLERANCE_S:
        return PREFILL_ALONE, START_TIMES, delta
    return None, START_TIMES, delta


#: (prefill, decode, hazard kind or None, basis, decode start - prefill start)
JudgedPair = tuple[str, str, str | None, str, float | None]
#: one decode's verdict with one prefill: (prefill, hazard kind or None, basis, decode start - prefill start)
WithPrefill = tuple[str, str | None, str, float | None]


def _judged_pairs(starts: Starts, rec: LineageRecord | None, window_s: float) -> Iterator[JudgedPair]:
    """(prefill, decode, kind or None, basis, delta) for every pair whose decode has a start time; decodes, then
    prefills, in the order of `starts`."""
    prefills = [label for label, v in starts.items() if v[0] == "prefill"]
    for d, (role, _pid, start) in starts.items():
        if role != "decode" or start is None:
            continue
        for p in prefills:
            yield (p, d, *_pair(p, d, starts, rec, window_s))


def pair_hazards(starts: Starts, record: LineageRecord | None, window_s: float = 900.0) -> list[PairHazard]:
    """Every hazardous (prefill, decode) pair of `starts` (label -> (role, pid, start)) against the co-restart
    `record` (or None), by the rules of this module's docstring: decode by decode, prefill by prefill. Pure."""
    return [
        PairHazard(p, d, kind, basis, delta)
        for p, d, kind, basis, delta in _judged_pairs(starts, record, window_s)
        if kind
    ]


def judge_lineage(
    starts: Starts,
    record: LineageRecord | None,
    window_s: float = 900.0,
    *,
    now: float | None = None,
    known: HazardKnowledge | None = None,
) -> list[CheckResult]:
    """One CheckResult per observed instance: prefills report their uptime; decodes their lineage with every
    prefill (naming each one they are hazardous with); routers theirs. `known`: what is known of the hazard for
    the deployment's engine and transfer backend (pdctl.engines); a hazard only possible there is a warning that
    says so, never a failure (default: known, as the seed's)."""
    now = time.time() if now is None else now
    rec = record
    prefills = {label: v for label, v in starts.items() if v[0] == "prefill"}
    judged: dict[str, list[WithPrefill]] = {}
    for p, d, kind, basis, delta in _judged_pairs(starts, rec, window_s):
        judged.setdefault(d, []).append((p, kind, basis, delta))

    results: list[CheckResult] = []
    for label, (role, pid, start) in prefills.items():
        if start is None:
            results.append(
                CheckResult(LAYER, label, "prefill uptime", Status.SKIP, observed=f"pid {pid}, start unknown")
            )
            continue
        note = ""
        if rec is not None:
            note = (
                "; same process as at the last co-restart"
                if _changed(label, starts, rec) is False
                else "; NOT the process recorded at the last co-restart"
            )
        results.append(
            CheckResult(
                LAYER,
                label,
                "prefill uptime",
                Status.PASS,
                observed=f"up {_human(now - start)} (pid {pid}, since {_when(start)})",
                detail=f"observed{note}",
                data={"pid": pid, "start": start, "uptime_s": now - start},
            )
        )

    for label, (role, pid, start) in starts.items():
        if role == "prefill":
            continue
        seen = LineageData(pid, start, rec is not None)
        if start is None:
            results.append(
                CheckResult(
                    LAYER,
                    label,
                    "restart lineage",
                    Status.SKIP,
                    observed=f"pid {pid}, start unknown",
                    detail="cannot judge without a start time",
                    data=to_data(seen),
                )
            )
        elif role == "decode":
            results.append(_decode_result(label, starts, rec, judged.get(label, []), window_s, now, seen, known))
        else:
            results.append(_router_result(label, starts, rec, window_s, seen))
    return results


def _names(labels: list[str]) -> str:
    return ", ".join(labels)


def _decode_result(
    label: str,
    starts: Starts,
    rec: LineageRecord | None,
    pairs: list[WithPrefill],
    window_s: float,
    now: float,
    seen: LineageData,
    known: HazardKnowledge | None = None,
) -> CheckResult:
    _role, pid, start = starts[label]
    assert start is not None  # judge_lineage skips a process without a start time
    by_time = {p: delta for p, _k, basis, delta in pairs if basis == START_TIMES and delta is not None}
    # record_stale: for those pairs both sides changed since the record
    stale_record = rec is not None and any(basis == START_TIMES for _p, _k, basis, _d in pairs)
    seen = replace(seen, after_prefill_s=by_time or None, record_stale=stale_record or None)
    stale = " (no co-restart record)" if rec is None else " (the co-restart record does not match these processes)"
    bad = [PairHazard(p, label, kind, basis, delta) for p, kind, basis, delta in pairs if kind]
    if not bad:
        if rec is not None and _changed(label, starts, rec) is False:
            return _unchanged(label, pid, seen)
        return CheckResult(
            LAYER,
            label,
            "restart lineage",
            Status.PASS,
            observed=f"pid {pid} started {_when(start)}",
            expected=f"started within {_human(window_s)} of its prefill",
            detail=f"observed: start order consistent with a co-restart{stale}",
            data=to_data(seen),
        )
    observed, said = [], []

    def group(kind: str, basis: str) -> list[PairHazard]:
        return [h for h in bad if h.hazard == kind and h.basis == basis]

    def up(p: str) -> str:
        return f"up {_human(now - pstart)}" if (pstart := starts[p][2]) else "start unknown"

    # start times judge a pair without a record, or one whose two sides both changed since it
    by = " (no co-restart record)" if rec is None else " (both changed since the co-restart record)"
    if hz := group(DEGRADED, RECORD):
        observed.append(f"restarted alone under {_names([h.prefill for h in hz])}")
        old = rec.get(label) if rec else None
        was = f"pid {old.pid} started {_when(old.start)}" if old and old.start else "not in the record"
        said.append(
            f"observed: decode changed since the last co-restart (now pid {pid} started {_when(start)}; "
            f"recorded: {was}) while "
            + _names([f"{h.prefill} (pid {starts[h.prefill][1]}, {up(h.prefill)})" for h in hz])
            + " ran on"
        )
    if hz := group(DEGRADED, START_TIMES):
        observed.append("started " + _names([f"{_human(h.after_prefill_s or 0.0)} after {h.prefill}" for h in hz]))
        said.append(
            f"observed: start times only{by}; inferred: decode was likely restarted under "
            + _names([f"{h.prefill} ({up(h.prefill)})" for h in hz])
            + " running on"
        )
    if degraded := [h for h in bad if h.hazard == DEGRADED]:
        said.append(
            "inferred: the degraded-bootstrap hazard (silent transfer failures) on "
            + ("that pair" if len(degraded) == 1 else f"these {len(degraded)} pairs")
        )
    if hz := group(PREFILL_ALONE, RECORD):
        observed.append(f"unchanged (pid {pid}) while {_names([h.prefill for h in hz])} restarted")
        said.append(
            f"observed: {_names([h.prefill for h in hz])} restarted since the last co-restart, {label} did "
            "not; inferred: the decode holds the old prefill's bootstrap state"
        )
    if hz := group(PREFILL_ALONE, START_TIMES):
        observed.append("started " + _names([f"{_human(-(h.after_prefill_s or 0.0))} BEFORE {h.prefill}" for h in hz]))
        said.append(
            f"observed: start times only{by}; inferred: "
            + _names([h.prefill for h in hz])
            + " restarted under the running decode, which keeps the old bootstrap state"
        )
    plural = "s" if sum(1 for v in starts.values() if v[0] == "prefill") > 1 else ""
    expected = (
        f"co-restarted with its prefill{plural}"
        if any(h.basis == RECORD for h in bad)
        else f"started after its prefill{plural}, within {_human(window_s)}"
    )
    status = max((h.status for h in bad), key=_severity)
    if known is not None and not known.known:  # not reproduced for this engine and backend: say how sure
        status = Status.WARN
    if known is not None:
        said.append(("known for this engine and backend: " if known.known else "only possible here: ") + known.evidence)
    return CheckResult(
        LAYER,
        label,
        "restart lineage",
        status,
        observed="; ".join(observed),
        expected=expected,
        detail="; ".join(said + [ACTION]),
        next_step=NEXT_PAIR_RESTART,
        data=to_data(
            replace(
                seen,
                hazard=bad[0].hazard,
                prefill=bad[0].prefill,
                confidence="known" if known is None or known.known else "possible",
                pairs=bad,
            )
        ),
    )


def _severity(status: Status) -> int:
    return 2 if status is Status.FAIL else 1


def _router_result(
    label: str, starts: Starts, rec: LineageRecord | None, window_s: float, seen: LineageData
) -> CheckResult:
    """A router holds no KV bootstrap state: restarted alone or not, never the hazard (lone_restart_hazard)."""
    role, pid, start = starts[label]
    assert start is not None  # judge_lineage skips a process without a start time
    prefills = [p for p, v in starts.items() if v[0] == "prefill"]
    if rec is not None:
        me = _changed(label, starts, rec)
        if me is False:
            return _unchanged(label, pid, seen)
        if (
            me
            and any(_changed(p, starts, rec) is False for p in prefills)
            and lone_restart_hazard([role], ["prefill"]) is None
        ):
            return CheckResult(
                LAYER,
                label,
                "restart lineage",
                Status.PASS,
                observed=f"restarted alone: pid {pid} started {_when(start)}",
                expected="co-restarted with its prefill, unless it holds no KV state",
                detail=f"observed: {role} restarted since the last co-restart; it holds no KV "
                "bootstrap state, so this is not the degraded-bootstrap hazard",
                data=to_data(seen),
            )
        seen = replace(seen, record_stale=True)
    stale = " (the co-restart record does not match these processes)" if rec is not None else " (no co-restart record)"
    by_time = {p: float(start) - float(pstart) for p in prefills if (pstart := starts[p][2]) is not None}
    seen = replace(seen, after_prefill_s=by_time or None)
    return CheckResult(
        LAYER,
        label,
        "restart lineage",
        Status.PASS,
        observed=f"pid {pid} started {_when(start)}",
        expected=f"started within {_human(window_s)} of its prefill",
        detail=f"observed: start order consistent with a co-restart{stale}",
        data=to_data(seen),
    )
