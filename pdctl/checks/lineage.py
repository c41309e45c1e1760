"""Restart lineage (layer "lineage"): the seed's degraded-bootstrap hazard, judged from pids and start times.

The incident: prefill ran 17 h while decode was restarted several times against it; NIXL piled up stale peers and
transfers failed silently until a clean co-restart prefill -> decode -> router. So:
- with a record of the last co-restart (label -> {"role","pid","start"}, written by pdctl after deploy or
  restart --pair): a decode whose (pid, start) differs from the record while a prefill it pairs with is
  unchanged = FAIL, recommend `pdctl restart --pair` (observed: which process changed; inferred: the hazard);
  a prefill restarted under an unchanged decode = FAIL too (decode keeps the dead prefill's bootstrap state);
- without a record: a decode started more than `window_s` after a prefill = WARN with the same advice
  (inferred only from start times: pdctl cannot know whether the restart was a co-restart).
Every decode is taken to pair with every prefill. Which restarts are the hazard is `lone_restart_hazard`, the one
rule `pdctl restart` refuses by too: one side of the KV pair restarted without the other. The router holds no KV
bootstrap state (it re-reads its workers), so restarting it alone is allowed and never flagged here.
Pure: give `now` to make it deterministic.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from pdctl.checks.result import NEXT_PAIR_RESTART, CheckResult, Status

LAYER = "lineage"
ACTION = "run `pdctl restart --pair` (prefill -> decode -> router)"
#: start times from different readers (systemd, /proc) differ by rounding; closer than this = the same start
START_TOLERANCE_S = 2.0


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


def make_lineage_record(starts: Mapping[str, tuple[str, int, float | None]]) -> dict[str, dict[str, Any]]:
    """The record to store after a clean co-restart: label -> {"role", "pid", "start"}."""
    return {label: {"role": role, "pid": pid, "start": start} for label, (role, pid, start) in starts.items()}


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


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _record_entries(record: Mapping[str, Any] | None) -> dict[str, tuple[str | None, int | None, float | None]] | None:
    if record is None:
        return None
    roles = record.get("roles", record) if isinstance(record, Mapping) else {}
    out = {}
    for label, v in roles.items():
        if isinstance(v, Mapping):
            out[label] = (v.get("role"), v.get("pid"), v.get("start"))
        elif isinstance(v, (list, tuple)) and len(v) == 3:
            out[label] = (v[0], v[1], v[2])
    return out


def judge_lineage(starts: Mapping[str, tuple[str, int, float | None]], record: Mapping[str, Any] | None,
                  window_s: float = 900.0, *, now: float | None = None) -> list[CheckResult]:
    """One CheckResult per observed instance: prefills report their uptime; decodes and routers their lineage."""
    now = time.time() if now is None else now
    rec = _record_entries(record)
    prefills = {l: v for l, v in starts.items() if v[0] == "prefill"}
    others = {l: v for l, v in starts.items() if v[0] != "prefill"}

    def changed(label: str) -> bool | None:
        """True/False against the record; None when it cannot be told (no start time)."""
        _role, pid, start = starts[label]
        if rec is None or label not in rec:
            return True
        _r, rpid, rstart = rec[label]
        if pid != rpid:
            return True
        if start is None or rstart is None:
            return None if start is None else True
        return abs(float(start) - float(rstart)) > START_TOLERANCE_S

    results: list[CheckResult] = []
    for label, (role, pid, start) in prefills.items():
        if start is None:
            results.append(CheckResult(LAYER, label, "prefill uptime", Status.SKIP, observed=f"pid {pid}, start unknown"))
            continue
        note = ""
        if rec is not None:
            note = "; same process as at the last co-restart" if changed(label) is False else \
                "; NOT the process recorded at the last co-restart"
        results.append(CheckResult(LAYER, label, "prefill uptime", Status.PASS,
                                   observed=f"up {_human(now - start)} (pid {pid}, since {_when(start)})",
                                   detail=f"observed{note}", data={"pid": pid, "start": start, "uptime_s": now - start}))

    for label, (role, pid, start) in others.items():
        data: dict[str, Any] = {"pid": pid, "start": start, "record": rec is not None}
        if start is None:
            results.append(CheckResult(LAYER, label, "restart lineage", Status.SKIP,
                                       observed=f"pid {pid}, start unknown", detail="cannot judge without a start time",
                                       data=data))
            continue
        if rec is not None:
            me = changed(label)
            same_p = [p for p in prefills if changed(p) is False]
            new_p = [p for p in prefills if changed(p) is True]
            if me and same_p and lone_restart_hazard([role], ["prefill"]):
                p = same_p[0]
                old = rec.get(label)
                was = f"pid {old[1]} started {_when(old[2])}" if old and old[2] else "not in the record"
                results.append(CheckResult(
                    LAYER, label, "restart lineage", Status.FAIL,
                    observed=f"restarted alone: pid {pid} started {_when(start)} (recorded: {was})",
                    expected="co-restarted with its prefill",
                    detail=(f"observed: {role} changed since the last co-restart while {p} (pid {prefills[p][1]}, "
                            f"up {_human(now - prefills[p][2]) if prefills[p][2] else '?'}) ran on; inferred: the "
                            f"degraded-bootstrap hazard (silent transfer failures); {ACTION}"),
                    next_step=NEXT_PAIR_RESTART, data={**data, "hazard": "degraded-bootstrap", "prefill": p}))
                continue
            if me is False and new_p and lone_restart_hazard(["prefill"], [role]):
                p = new_p[0]
                results.append(CheckResult(
                    LAYER, label, "restart lineage", Status.FAIL,
                    observed=f"unchanged (pid {pid}) while {p} was restarted",
                    expected="co-restarted with its prefill",
                    detail=(f"observed: {p} restarted since the last co-restart, {label} did not; inferred: {role} "
                            f"holds the old prefill's bootstrap state; {ACTION}"),
                    next_step=NEXT_PAIR_RESTART, data={**data, "hazard": "prefill-restarted-alone", "prefill": p}))
                continue
            if me is False:
                results.append(CheckResult(LAYER, label, "restart lineage", Status.PASS,
                                           observed=f"unchanged since the last co-restart (pid {pid})",
                                           expected="co-restarted with its prefill",
                                           detail="observed: same pid and start time as recorded", data=data))
                continue
            if me and same_p:      # restarted alone, but holding no KV bootstrap state (the router)
                results.append(CheckResult(LAYER, label, "restart lineage", Status.PASS,
                                           observed=f"restarted alone: pid {pid} started {_when(start)}",
                                           expected="co-restarted with its prefill, unless it holds no KV state",
                                           detail=f"observed: {role} restarted since the last co-restart; it holds "
                                                  "no KV bootstrap state, so this is not the degraded-bootstrap "
                                                  "hazard", data=data))
                continue
            # everything changed (or unknown) since the record: judge the order from start times as without one
            data["record_stale"] = True
        results.append(_judge_by_start_times(label, role, pid, start, prefills, window_s, now, data))
    return results


def _judge_by_start_times(label: str, role: str, pid: int, start: float, prefills: Mapping[str, tuple],
                          window_s: float, now: float, data: dict[str, Any]) -> CheckResult:
    stale = " (the co-restart record does not match these processes)" if data.get("record_stale") else \
        " (no co-restart record)"
    for p, (_r, ppid, pstart) in prefills.items():
        if pstart is None:
            continue
        delta = start - pstart
        data.setdefault("after_prefill_s", {})[p] = delta
        if delta > window_s and lone_restart_hazard([role], ["prefill"]):
            return CheckResult(
                LAYER, label, "restart lineage", Status.WARN,
                observed=f"started {_human(delta)} after {p} (pid {ppid}, up {_human(now - pstart)})",
                expected=f"started within {_human(window_s)} of its prefill",
                detail=(f"observed: start times only{stale}; inferred: {role} was likely restarted against a "
                        f"running prefill, the seed's degraded-bootstrap hazard; {ACTION}"),
                next_step=NEXT_PAIR_RESTART, data={**data, "hazard": "degraded-bootstrap", "prefill": p})
        if delta < -START_TOLERANCE_S and lone_restart_hazard(["prefill"], [role]):
            return CheckResult(
                LAYER, label, "restart lineage", Status.WARN,
                observed=f"started {_human(-delta)} BEFORE {p} (pid {ppid})",
                expected="started after its prefill",
                detail=(f"observed: start times only{stale}; inferred: the prefill was restarted under a running "
                        f"decode, which keeps the old bootstrap state; {ACTION}"),
                next_step=NEXT_PAIR_RESTART, data={**data, "hazard": "prefill-restarted-alone", "prefill": p})
    return CheckResult(LAYER, label, "restart lineage", Status.PASS,
                       observed=f"pid {pid} started {_when(start)}",
                       expected=f"started within {_human(window_s)} of its prefill",
                       detail=f"observed: start order consistent with a co-restart{stale}", data=data)
