"""The incident write-up's timeline of what happened, from the watch's timeline lines (docs/watch.md "The timeline"),
the audit log's records and the alerts Prometheus fired: one typed Entry per verdict change, check that failed or
came back, page, heal, operator action, process restart, lineage hazard and target unknown. Also the default window:
from a little before the first failing event of the last 24 h to now, else the last hour. Pure: the caller reads
the files and gives the time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

#: a timeline line as read (a JSON object); a record of the audit log
Line = Mapping[str, Any]

LOOK_BACK_S = 24 * 3600.0  # how far back the default window looks for a first failing event
LEAD_S = 60.0  # the window starts this long before the first failing event: the healthy baseline in the charts
NO_FAILURE_S = 3600.0  # the window when nothing failed: the last hour

#: the write-up's entry kinds, in the order a reader meets them at equal times
KINDS = ("action", "verdict", "check", "page", "heal", "restart", "lineage", "target", "canary")


@dataclass(frozen=True)
class Entry:
    t: float  # unix time
    kind: str  # one of KINDS
    what: str  # one line: what happened
    who: str = ""  # the operator (actions), the target or pair (checks, restarts), the alert's labels (pages)
    detail: str = ""  # what was observed, an exit code, why


@dataclass(frozen=True)
class AlertSpan:
    """One alert series over the window (Prometheus's ALERTS): firing from `start` to `end` (None: still firing)."""

    name: str
    severity: str
    labels: str  # the series' other labels, "prefill=... decode=..."
    start: float
    end: float | None


@dataclass(frozen=True)
class Window:
    since: float
    until: float
    why: str  # how it was chosen: "--since/--until", "from the first failing event ...", "the last hour"


def parse_timeline(text: str) -> tuple[list[dict[str, Any]], int]:
    """The lines of a watch timeline that are JSON objects with a numeric "t", oldest first, and how many other
    (non-blank) lines were skipped (a cut line, another tool's). Pure."""
    out: list[dict[str, Any]] = []
    bad = 0
    for raw in text.splitlines():
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            bad += 1
            continue
        if isinstance(line, dict) and isinstance(line.get("t"), (int, float)) and not isinstance(line["t"], bool):
            out.append(line)
        else:
            bad += 1
    out.sort(key=lambda x: x["t"])
    return out, bad


def _is_check(line: Line) -> bool:
    return "event" not in line and "check" in line and "status" in line


def failing_line(line: Line) -> bool:
    """A timeline line that says something failed: a check failing, a target unknown, a lineage hazard, a heal."""
    event = line.get("event")
    if _is_check(line):
        return line.get("status") == "fail"
    return (
        (event == "target" and line.get("status") == "unknown")
        or (event == "lineage" and line.get("status") == "hazard")
        or event == "heal"
    )


def failing_record(record: Line) -> bool:
    """An audit record that starts or marks an incident: an action that did not end ok, a heal, or a hazard
    guard overridden (the decode-only restart that makes the degraded bootstrap)."""
    from pdctl.audit.records import result_word

    args = record.get("args") if isinstance(record.get("args"), dict) else {}
    if record.get("action") == "watch heal" or (isinstance(args, dict) and args.get("override_hazard")):
        return True
    return result_word(dict(record)).word not in ("ok", "unfinished")


def default_window(lines: Sequence[Line], records: Sequence[tuple[float, Line]], now: float) -> Window:
    """From LEAD_S before the first failing line or record of the last LOOK_BACK_S to `now`; the last hour when
    none failed. `records`: (unix time, record). Pure."""
    times = [float(x["t"]) for x in lines if failing_line(x) and now - float(x["t"]) <= LOOK_BACK_S]
    times += [t for t, r in records if failing_record(r) and now - t <= LOOK_BACK_S]
    if not times:
        return Window(now - NO_FAILURE_S, now, "the last hour: nothing failed in the last 24 h")
    first = min(times)
    return Window(first - LEAD_S, now, f"from {LEAD_S:g} s before the first failing event of the last 24 h")


def timeline_entries(lines: Sequence[Line], window: Window) -> list[Entry]:
    """The watch's lines as entries within the window: its verdict (fail while a cadence's last round failed) when it
    changes, a check that
    failed, turned unknown or came back (checks first seen passing are not news), heals, restarts, lineage hazards,
    targets unknown or recovered, canaries asked. The lines before the window set the statuses it starts from."""
    status: dict[tuple[str, str, str], str] = {}
    rounds_ok: dict[str, bool] = {}
    verdict: str | None = None
    out: list[Entry] = []
    for x in lines:
        t = float(x["t"])
        inside = window.since <= t <= window.until
        event = x.get("event")
        if _is_check(x):
            key = (str(x.get("layer", "")), str(x.get("target", "")), str(x.get("check", "")))
            was, now = status.get(key), str(x["status"])
            status[key] = now
            if inside and was != now and not (was is None and now == "pass"):  # a check seen again unchanged: no news
                what = f"{key[0]} {key[2]}: {was or 'new'} -> {now}"
                out.append(Entry(t, "check", what, key[1], _observed(x)))
            continue
        if event == "round":  # the verdict as the watch's rounds say it: a check it dropped leaves no line
            rounds_ok[str(x.get("cadence", ""))] = bool(x.get("ok"))
            failing = sorted(c for c, ok in rounds_ok.items() if not ok)
            new_verdict = "fail" if failing else "pass"
            if new_verdict != verdict:
                if inside and verdict is not None:
                    why = f"rounds failing: {', '.join(failing)}" if failing else "every cadence's last round passed"
                    out.append(Entry(t, "verdict", f"watch verdict {verdict} -> {new_verdict}", "", why))
                verdict = new_verdict
            continue
        if not inside:
            continue
        entry = _event_entry(x, t, str(event))
        if entry is not None:
            out.append(entry)
    return out


def _observed(x: Line) -> str:
    observed, expected = str(x.get("observed", "")), str(x.get("expected", ""))
    if x.get("status") in ("fail", "warn") and expected:
        return f"expected {expected}; found {observed}"
    return observed


def _event_entry(x: Line, t: float, event: str) -> Entry | None:
    get = lambda k: str(x.get(k, ""))  # noqa: E731
    if event == "heal":
        detail = "; ".join(v for v in (get("observed"), get("detail")) if v)
        return Entry(t, "heal", f"heal {get('outcome')}: {get('action')} ({get('case')})", "", detail)
    if event == "restart":
        return Entry(t, "restart", "process restarted", get("target"), get("observed"))
    if event == "lineage":
        pair = f"{get('prefill')} -> {get('decode')}"
        return Entry(t, "lineage", f"lineage {get('status')}: {get('hazard')}", pair)
    if event == "target":
        return Entry(t, "target", f"target {get('status')}", get("target"), get("observed"))
    if event == "canary":
        return Entry(t, "canary", "pair canary asked at once", "", get("why"))
    return None


def audit_entries(records: Sequence[tuple[float, Line]], window: Window) -> list[Entry]:
    """Each audit record within the window as an operator action: who, what (the action and the flags that matter:
    an overridden hazard guard), its result in a word and its exit code."""
    from pdctl.audit.records import result_word

    out = []
    for t, r in records:
        if not window.since <= t <= window.until:
            continue
        args = r.get("args") if isinstance(r.get("args"), dict) else {}
        flags = [f"--{k.replace('_', '-')}" for k, v in (args or {}).items() if v is True and k != "verify"]
        if isinstance(args, dict) and args.get("verify") is False:
            flags.append("--no-verify")
        what = " ".join([f"pdctl {r.get('action', '?')}", *flags])
        word = result_word(dict(r))
        code = r.get("exit_code")
        detail = word.word + (f" ({word.detail})" if word.detail else "")
        if isinstance(code, int) and not isinstance(code, bool):
            detail += f", exit {code}"
        out.append(Entry(t, "action", what, str(r.get("operator", "")), detail))
    return out


def alert_entries(spans: Sequence[AlertSpan], window: Window) -> list[Entry]:
    """A page (severity critical) or an alert (any other) firing, and its resolution, within the window."""
    out = []
    for s in spans:
        word = "page" if s.severity == "critical" else f"alert ({s.severity or 'no severity'})"
        if window.since <= s.start <= window.until:
            out.append(Entry(s.start, "page", f"{word} firing: {s.name}", s.labels))
        if s.end is not None and window.since <= s.end <= window.until:
            out.append(Entry(s.end, "page", f"{word} resolved: {s.name}", s.labels))
    return out


def merged(*groups: Iterable[Entry]) -> list[Entry]:
    """Every entry, by time (at equal times in KINDS order). Pure."""
    rank = {k: i for i, k in enumerate(KINDS)}
    return sorted((e for g in groups for e in g), key=lambda e: (e.t, rank.get(e.kind, len(rank))))


def alert_spans(result: Sequence[Mapping[str, Any]], step_s: float, until: float) -> list[AlertSpan]:
    """Prometheus's query_range answer for ALERTS{alertstate="firing"} (its data.result) as spans: a series'
    samples no more than 2 steps apart are one span, which ended at its last sample, or is still firing (end None)
    when that sample is within 2 steps of `until`. Pure."""
    out: list[AlertSpan] = []
    for series in result:
        labels = dict(series.get("metric", {}))
        name = str(labels.pop("alertname", "?"))
        severity = str(labels.pop("severity", ""))
        for k in ("__name__", "alertstate", "deployment", "job", "instance"):
            labels.pop(k, None)
        text = " ".join(f"{k}={v}" for k, v in sorted(labels.items()))
        times = sorted(float(v[0]) for v in series.get("values", []))
        runs: list[list[float]] = []
        for t in times:
            if runs and t - runs[-1][1] <= 2 * step_s:
                runs[-1][1] = t
            else:
                runs.append([t, t])
        for i, (start, last) in enumerate(runs):
            still = i == len(runs) - 1 and until - last <= 2 * step_s
            out.append(AlertSpan(name, severity, text, start, None if still else last))
    return out
