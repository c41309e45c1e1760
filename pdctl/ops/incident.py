"""`pdctl incident`: gathers what the incident write-up is made of; pdctl.checks.incident_* judge, pdctl.render.
incident_* write it.

Read: the watch's timeline file (when given), the audit log's records of this deployment, Prometheus's ALERTS over
the window (when a URL is given: query_range, read-only), then the deployment itself: a triage (its short quiet
window, then final-health's triage layers), a fresh final-health of every layer but the load ones (pairs included:
the verification after the fix), each engine's /server_info (or /get_server_info) for its version and the router's
installed package version, and the render plan (command line and env per role, secrets masked). Read-only.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pdctl.checks.incident_cause import Hypothesis, judge_causes
from pdctl.checks.layers import DEFAULT_LAYERS
from pdctl.checks.incident_signals import Signals, signals
from pdctl.checks.incident_timeline import (
    AlertSpan,
    Entry,
    Window,
    alert_entries,
    alert_spans,
    audit_entries,
    default_window,
    merged,
    parse_timeline,
    timeline_entries,
)
from pdctl.errors import UnreachableError, UsageError
from pdctl.ops.context import Deployment
from pdctl.ops.render_plan import RenderPlan
from pdctl.ops.triage import TriageReport
from pdctl.ops.verify import HealthReport
from pdctl.serialize import JSON_OFF

TIMELINE_LIMIT = 256 << 20  # a timeline is read whole; a bigger file is rotated (logrotate) long before this
ALERTS_TIMEOUT_S = 10.0
MAX_POINTS = 2000  # query_range points per series: the step is the window over this, at least 1 s
#: the final-health layers of the verification after the fix: the default ones and a canary through every pair (the
#: other optional ones sample over a window, which triage did, or load the deployment)
VERIFY_LAYERS = (*DEFAULT_LAYERS, "pairs")


@dataclass
class Versions:
    pdctl: str
    engines: dict[str, str] = field(default_factory=dict)  # worker label -> "sglang 0.5.23" (or why unknown)
    routers: dict[str, str] = field(default_factory=dict)  # router label -> "smg 1.13.0" (or why unknown)


@dataclass
class IncidentReport:
    deployment: str
    inventory: str
    operator: str
    written_at: float  # unix time
    window: Window
    timeline: str | None  # the file read, None when no --timeline
    entries: list[Entry]
    signals: Signals
    causes: list[Hypothesis]
    triage: TriageReport | None  # None: the deployment could not be asked now (`unasked` says why)
    health: HealthReport | None
    plan: RenderPlan
    versions: Versions
    alerts: list[AlertSpan] = field(default_factory=list)
    prometheus: str | None = None  # the Prometheus asked for ALERTS, None when none was given
    notes: list[str] = field(default_factory=list)  # what could not be read or drawn (the write-up's gaps)
    lines: list[dict[str, Any]] = field(default_factory=list, metadata=JSON_OFF)  # the timeline lines in the window
    unasked: str = ""  # why no fresh triage and final-health: a host did not answer

    @property
    def healthy_now(self) -> bool:
        return self.health is not None and self.health.ok


def read_timeline(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The lines of the watch timeline at `path` (pdctl.checks.incident_timeline.parse_timeline). Raises UsageError
    naming --timeline when it is missing, no regular file, too big, or holds no timeline line at all."""
    from pdctl.safe_read import open_regular

    try:
        fd = open_regular(path, UsageError, "watch timeline", limit=TIMELINE_LIMIT)
    except UsageError as e:
        raise UsageError(f"--timeline {e.message}", hint=_TIMELINE_HINT) from None
    with os.fdopen(fd, "rb") as f:
        text = f.read().decode(errors="replace")
    lines, bad = parse_timeline(text)
    if not lines and text.strip():
        raise UsageError(f"--timeline {path}: no watch timeline line in it ({bad} other line(s))", hint=_TIMELINE_HINT)
    return lines, bad


_TIMELINE_HINT = "give the file `pdctl watch --timeline FILE` writes (JSON lines), or leave out --timeline"


def audit_records(dep: Deployment) -> list[tuple[float, dict[str, Any]]]:
    """(unix time, record) of this deployment's audit records, oldest first, a run shown once by its end."""
    from pdctl import state
    from pdctl.audit.records import InventoryFilter, fold_runs, query, read_records, record_time

    name = dep.inv.name
    got = query(read_records(state.audit_log_path()), inventory=InventoryFilter(name=name))
    out = []
    for r in fold_runs(got):
        when = record_time(r) if isinstance(r, dict) else None
        if isinstance(r, dict) and when is not None:
            out.append((when.timestamp(), r))
    return out


def check_prometheus_url(url: str) -> str:
    """The --prometheus URL without a trailing slash; UsageError unless it is http(s)://host[:port][/path]."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--prometheus {url!r}: not an http(s) URL", hint="e.g. --prometheus http://127.0.0.1:9090")
    return url.rstrip("/")


def read_alerts(url: str, deployment: str, window: Window) -> tuple[list[AlertSpan], str]:
    """The alerts of `deployment` that fired within the window (ALERTS, query_range), and "" or why they could not be
    read (Prometheus not answering is a gap in the write-up, never its failure)."""
    from pdctl.checks.http_util import client

    step = max(1.0, (window.until - window.since) / MAX_POINTS)
    query = f'ALERTS{{alertstate="firing",deployment="{deployment}"}}'
    params = {"query": query, "start": f"{window.since:.3f}", "end": f"{window.until:.3f}", "step": f"{step:g}"}
    try:
        r = client().get(f"{url}/api/v1/query_range", params=params, timeout=ALERTS_TIMEOUT_S)
        body = r.json()
    except Exception as e:  # httpx's errors and a body that is no JSON alike: said, not raised
        return [], f"Prometheus at {url} not read: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if not isinstance(body, dict) or body.get("status") != "success":
        why = body.get("error") if isinstance(body, dict) else None
        return [], f"Prometheus at {url} answered {r.status_code}: {why or 'not a query result'}"
    return alert_spans(body.get("data", {}).get("result", []), step, window.until), ""


def engine_versions(dep: Deployment) -> dict[str, str]:
    """worker label -> "<engine> <version>" from its /server_info, else /get_server_info (older SGLang), else why
    not. Asked in parallel."""
    from pdctl.checks.http_util import client

    def one(role: str, i: int) -> str:
        base = dep.base_url(role, i)
        for path in ("/server_info", "/get_server_info"):
            try:
                r = client().get(f"{base}{path}", timeout=dep.inv.final_health.health_timeout)
                body = r.json() if r.status_code == 200 else None
            except Exception:
                body = None
            if isinstance(body, dict) and body.get("version"):
                return f"{body.get('engine') or 'sglang'} {body['version']}"
        return "unknown (neither /server_info nor /get_server_info answered with a version)"

    return {r.label: r.value or f"unknown ({r.error})" for r in dep.each_instance(one, roles=("prefill", "decode"))}


def router_versions(dep: Deployment) -> dict[str, str]:
    """router label -> "<kind> <version>": the router kind's package version, asked of the interpreter its
    installed service runs with on its host."""
    from pdctl.ops.lint import installed_specs

    specs = installed_specs(dep, ("router",))
    out = {}
    for (role, i), spec in specs.items():
        kind = dep.inv.router_kind(i)
        label = dep.inv.label(role, i)
        python = spec.argv[0] if spec.argv else "python3"
        code = f"import importlib.metadata as m; print(m.version({kind.dist!r}))"
        host = dep.inv.roles.router[i].host
        try:
            r = dep.transport(host).run(f"{shlex.quote(python)} -c {shlex.quote(code)}", timeout=20)
            version = r.stdout.strip().splitlines()[-1] if r.exit_code == 0 and r.stdout.strip() else ""
        except Exception as e:
            version, r = "", None
            out[label] = f"{kind.name} (version unknown: {type(e).__name__})"
            continue
        out[label] = f"{kind.name} {version}" if version else f"{kind.name} (version unknown: {kind.dist} not found)"
    return out


def gather_incident(
    dep: Deployment,
    *,
    timeline: Path | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    prometheus: str | None = None,
    now: float | None = None,
) -> IncidentReport:
    """Everything the write-up says. Raises UsageError for a bad --timeline or window, RefusedError for a refused
    host key. A deployment that does not answer (triage and final-health raise UnreachableError) leaves the
    write-up without a fresh triage and final-health, said in `unasked` and the notes; Prometheus that does not
    answer, a version that cannot be read: notes."""
    from pdctl import __version__, state
    from pdctl.ops.render_plan import render_plan
    from pdctl.ops.triage import triage
    from pdctl.ops.verify import final_health

    now = time.time() if now is None else now
    notes: list[str] = []
    lines: list[dict[str, Any]] = []
    if timeline is not None:
        lines, bad = read_timeline(timeline)
        if bad:
            notes.append(f"{bad} line(s) of {timeline} were no timeline lines and were skipped")
    else:
        notes.append("no --timeline: the write-up has no watch verdicts, samples or canaries (no charts)")
    records = audit_records(dep)
    window = _window(lines, records, since, until, now)
    alerts: list[AlertSpan] = []
    if prometheus is not None:
        alerts, why = read_alerts(prometheus, dep.inv.name, window)
        if why:
            notes.append(why)
    else:
        notes.append("no --prometheus: pages (ALERTS) not read; the watch's failing checks are in the timeline")
    in_window = [x for x in lines if window.since <= float(x["t"]) <= window.until]
    acted = [r for t, r in records if window.since <= t <= window.until]
    sig = signals(lines, window.since, window.until)
    entries = merged(timeline_entries(lines, window), audit_entries(records, window), alert_entries(alerts, window))
    sig.marks = [(e.t, e.what) for e in entries if e.kind in ("heal", "action") and not e.what.startswith("heal ")]
    sig.marks += [(e.t, e.what.split(":", 1)[0]) for e in entries if e.kind == "heal"]
    if timeline is not None:
        notes += sig.gaps()

    # a deployment that cannot be asked now still gets its write-up: the records say what happened
    rep_triage: TriageReport | None = None
    health: HealthReport | None = None
    unasked = ""
    try:
        rep_triage = triage(dep)
        health = final_health(dep, layers=VERIFY_LAYERS)
        versions = Versions(__version__, engine_versions(dep), router_versions(dep))
    except UnreachableError as e:  # a refused host key still stops it (exit 4): that is the operator's decision
        unasked = e.message
        notes.append(f"the deployment could not be asked now ({e.message}): no fresh triage, final-health or versions")
        versions = Versions(__version__, {}, {})
    return IncidentReport(
        deployment=dep.inv.name,
        inventory=dep.inv.source,
        operator=state.operator(),
        written_at=now,
        window=window,
        timeline=str(timeline) if timeline is not None else None,
        entries=entries,
        signals=sig,
        causes=judge_causes(in_window, acted, sig),
        triage=rep_triage,
        health=health,
        plan=render_plan(dep.inv),
        versions=versions,
        alerts=alerts,
        prometheus=prometheus,
        notes=notes,
        lines=in_window,
        unasked=unasked,
    )


def _window(
    lines: list[dict[str, Any]],
    records: list[tuple[float, dict[str, Any]]],
    since: datetime | None,
    until: datetime | None,
    now: float,
) -> Window:
    """--since/--until when given (UsageError naming them when since is not before until), else the default."""
    if since is None and until is None:
        return default_window(lines, records, now)
    default = default_window(lines, records, now)
    start = since.timestamp() if since is not None else default.since
    end = until.timestamp() if until is not None else now
    if start >= end:
        raise UsageError(
            "--since must be before --until" if since and until else "--since/--until: the window is empty",
            hint="e.g. --since 2h --until 30m, or an ISO time: --since 2025-01-01T10:00",
        )
    return Window(start, end, "--since/--until")
