"""What `pdctl incident` prints: the verdict (the write-up was written; is the deployment healthy now) first, the
root cause, the window, what happened in counts, then where the files are and what to open, within 80x24; and its
--json document."""

from __future__ import annotations

from typing import Any

from pdctl import render
from pdctl.render.incident_document import SECTIONS, root_cause_line, verdict_now, when

GAPS_SHOWN = 2


def _counts(rep: Any) -> str:
    kinds = [e.kind for e in rep.entries]
    pages = sum(1 for e in rep.entries if e.kind == "page" and "firing" in e.what)
    return (
        f"{len(kinds)} timeline entries: {pages} alert(s) fired, {kinds.count('heal')} heal line(s), "
        f"{kinds.count('action')} operator action(s), {kinds.count('verdict')} verdict change(s)"
    )


def incident_screen(rep: Any, written: Any) -> None:
    """The screen after the write-up was written (`written`: pdctl.render.incident_files.Written)."""
    word = "UNKNOWN" if rep.health is None else ("HEALTHY" if rep.healthy_now else "NOT HEALTHY")
    style = "green" if rep.healthy_now else ("yellow" if rep.health is None else "bold red")
    render.wrapped(f"incident write-up written; {rep.deployment} is {word} now", style=style)
    render.wrapped("  " + verdict_now(rep).split(": ", 1)[1])
    render.wrapped(f"root cause: {root_cause_line(rep)}")
    render.wrapped(f"window: {when(rep.window.since)} to {when(rep.window.until)} ({rep.window.why})")
    render.wrapped(f"what happened: {_counts(rep)}")
    render.wrapped(f"markdown: {written.markdown}")
    render.wrapped(f"html:     {written.html}")
    if written.charts:
        render.wrapped(f"charts:   {len(written.charts)} SVG beside the markdown ({written.charts[0].name}, ...)")
    for note in rep.notes[:GAPS_SHOWN]:
        render.wrapped(f"gap: {note}", style="yellow")
    if len(rep.notes) > GAPS_SHOWN:
        render.wrapped(f"gap: {len(rep.notes) - GAPS_SHOWN} more in the write-up's Gaps section", style="yellow")
    step = _next(rep)
    render.wrapped(f"next: {step}" if step else f"next: open {written.html}", style="bold")


def _next(rep: Any) -> str:
    """Triage's recommended command while the deployment is not healthy; else nothing (open the write-up)."""
    if rep.healthy_now:
        return ""
    if rep.triage is None:  # nothing answered: which hosts do?
        return "pdctl status (which hosts answer?), then pdctl incident again"
    from pdctl.checks.triage_finding import recommended_step

    return recommended_step(rep.triage.findings) or "pdctl triage"


def incident_json(rep: Any, written: Any) -> dict[str, Any]:
    """The --json document: what was written, the verdict now, the sections, the window, what happened."""
    return {
        "ok": True,
        "healthy_now": rep.healthy_now,
        "unasked": rep.unasked,
        "verdict": verdict_now(rep),
        "root_cause": root_cause_line(rep),
        "deployment": rep.deployment,
        "operator": rep.operator,
        "written": {
            "markdown": str(written.markdown),
            "html": str(written.html),
            "charts": [str(p) for p in written.charts],
        },
        "sections": list(SECTIONS),
        "window": {"since": rep.window.since, "until": rep.window.until, "why": rep.window.why},
        "entries": {k: sum(1 for e in rep.entries if e.kind == k) for k in sorted({e.kind for e in rep.entries})},
        "causes": [{"name": h.name, "verdict": h.verdict, "evidence": h.evidence} for h in rep.causes],
        "versions": {"pdctl": rep.versions.pdctl, "engines": rep.versions.engines, "routers": rep.versions.routers},
        "notes": rep.notes,
    }
