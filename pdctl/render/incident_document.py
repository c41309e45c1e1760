"""The incident write-up as a document: its sections, each a list of blocks (paragraphs, lists, tables, code, charts),
composed once from an IncidentReport (pdctl.ops.incident; render names no ops type) and written twice, as markdown
(incident_markdown.py) and as HTML (incident_html.py), so the two always say the same. Every text goes through the
secret maskers here (the inventory's declared secret values too), whatever its source already did. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Union

from pdctl.checks.incident_cause import CAUSE, RULED_OUT
from pdctl.render.incident_charts import Chart

#: the sections every write-up has, in order (their headings)
SECTIONS = (
    "Summary",
    "Timeline",
    "Charts",
    "Root cause",
    "Ruled out",
    "Configuration",
    "Verification after the fix",
    "Versions",
    "Gaps",
)


@dataclass(frozen=True)
class Para:
    text: str
    strong: bool = False


@dataclass(frozen=True)
class Items:
    items: list[str]


@dataclass(frozen=True)
class Table:
    head: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Code:
    text: str
    title: str = ""


@dataclass(frozen=True)
class Figure:
    chart: Chart


Block = Union[Para, Items, Table, Code, Figure]


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2  # 2 a section, 3 a part of one


@dataclass
class Document:
    title: str
    stamp: list[tuple[str, str]]  # (what, value): time, deployment, operator, pdctl version, window
    sections: list[Section]


def when(t: float) -> str:
    """Local time with its offset, to the second."""
    return datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S%z")


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%H:%M:%S")


def verdict_now(rep: Any) -> str:
    """'HEALTHY now: final-health passed (N checks)', 'NOT HEALTHY now: K check(s) failed, U unknown', or 'UNKNOWN
    now: the deployment could not be asked (why)'."""
    if rep.health is None:
        return f"UNKNOWN now: the deployment could not be asked ({rep.unasked})"
    n = sum(len(rs) for rs in rep.health.layers.values())
    if rep.healthy_now:
        return f"HEALTHY now: final-health passed ({n} checks, every layer: {', '.join(rep.health.layers)})"
    return (
        f"NOT HEALTHY now: final-health found {len(rep.health.failures())} failed and "
        f"{len(rep.health.unknown())} unknown check(s) of {n}"
    )


def root_cause_line(rep: Any) -> str:
    """The cause(s) in one line: what the incident's evidence names, else triage's first finding, else none."""
    causes = [h.name for h in rep.causes if h.verdict == CAUSE]
    if causes:
        return "; ".join(causes)
    if rep.triage is not None and rep.triage.findings:
        return rep.triage.findings[0].title
    if rep.triage is None:
        return "not named: no watch evidence of a known cause, and the deployment could not be asked now"
    return "not named: no watch evidence of a known cause, and triage finds nothing now"


def compose(rep: Any, charts: list[Chart], secrets: Iterable[str] = ()) -> Document:
    """The write-up of `rep` with `charts` (drawn from rep.signals). Pure."""
    secret_set = set(secrets)
    sections = [
        _summary(rep),
        _timeline(rep),
        _charts(rep, charts),
        _root_cause(rep),
        _ruled_out(rep),
        _configuration(rep),
        _verification(rep),
        _versions(rep),
        Section("Gaps", [Items(rep.notes) if rep.notes else Para("None: every source was read.")]),
    ]
    stamp = [
        ("written", when(rep.written_at)),
        ("deployment", rep.deployment),
        ("operator", rep.operator),
        ("pdctl", rep.versions.pdctl),
        ("window", f"{when(rep.window.since)} to {when(rep.window.until)}"),
    ]
    doc = Document(f"Incident write-up: {rep.deployment}", stamp, sections)
    return _masked(doc, secret_set)


def _summary(rep: Any) -> Section:
    heals = [e for e in rep.entries if e.kind == "heal"]
    actions = [e for e in rep.entries if e.kind == "action"]
    pages = [e for e in rep.entries if e.kind == "page" and "firing" in e.what]
    return Section(
        "Summary",
        [
            Para(verdict_now(rep), strong=True),
            Items(
                [
                    f"Root cause: {root_cause_line(rep)}",
                    f"Window: {when(rep.window.since)} to {when(rep.window.until)} ({rep.window.why})",
                    f"Deployment: {rep.deployment} (inventory {rep.inventory})",
                    f"Written by {rep.operator} at {when(rep.written_at)} with pdctl {rep.versions.pdctl}",
                    f"What happened: {len(rep.entries)} timeline entries; {len(pages)} alert(s) fired, "
                    f"{len(heals)} heal line(s), {len(actions)} operator action(s)",
                    f"Triage now: {rep.triage.headline}" if rep.triage else f"Triage now: not asked ({rep.unasked})",
                ]
            ),
        ],
    )


def _timeline(rep: Any) -> Section:
    src = [f"the watch timeline {rep.timeline}" if rep.timeline else "no watch timeline", "the audit log"]
    src.append(
        f"Prometheus's ALERTS ({len(rep.alerts)} fired)" if rep.prometheus else "no alerts read (no --prometheus)"
    )
    blocks: list[Block] = [Para("From " + ", ".join(src) + ". Times are local.")]
    if rep.entries:
        rows = [[_clock(e.t), e.kind, e.what, e.who, e.detail] for e in rep.entries]
        blocks.append(Table(["time", "kind", "what", "who / where", "detail"], rows))
    else:
        blocks.append(Para("Nothing recorded in the window."))
    return Section("Timeline", blocks)


def _charts(rep: Any, charts: list[Chart]) -> Section:
    if not charts:
        return Section("Charts", [Para("No chart: " + ("; ".join(rep.signals.gaps()) or "no signal in the window"))])
    blocks: list[Block] = [
        Para("Drawn from the watch's sample and pair lines; heals and operator actions are the dotted lines.")
    ]
    blocks += [Figure(c) for c in charts]
    return Section("Charts", blocks)


def _root_cause(rep: Any) -> Section:
    blocks: list[Block] = []
    causes = [h for h in rep.causes if h.verdict == CAUSE]
    if causes:
        blocks.append(Para("From what the watch and the audit log recorded while it happened:"))
        for h in causes:
            blocks.append(Para(h.name, strong=True))
            blocks.append(Items([f"evidence: {e}" for e in h.evidence] or ["evidence: none recorded"]))
    elif not rep.causes:
        blocks.append(Para("Not judged from records: no watch timeline in the window."))
    else:
        blocks.append(Para("No known cause in the watch's records of the window."))
    if rep.triage is None:
        blocks.append(Para(f"No fresh triage: the deployment could not be asked ({rep.unasked}).", strong=True))
        return Section("Root cause", blocks)
    blocks.append(Para(f"A fresh triage now: {rep.triage.headline}", strong=True))
    for f in rep.triage.findings:
        items = [f"observed: {o}" for o in f.observed] + [f"inferred: {i}" for i in f.inferred]
        items.append(f"action: {f.action}")
        blocks += [Para(f"{f.title} ({f.severity})"), Items(items)]
    return Section("Root cause", blocks)


def _ruled_out(rep: Any) -> Section:
    blocks: list[Block] = []
    for h in (h for h in rep.causes if h.verdict == RULED_OUT):
        blocks += [Para(h.name, strong=True), Items([f"evidence: {e}" for e in h.evidence])]
    findings = rep.triage.findings if rep.triage is not None else []
    triage_out = [r for f in findings for r in f.ruled_out]
    if triage_out:
        blocks += [Para("Ruled out by triage now:", strong=True), Items(triage_out)]
    passing = [o for o in rep.triage.observations if o.status.value == "pass"] if rep.triage is not None else []
    if passing:
        rows = [[o.what, o.target, o.observed] for o in passing]
        blocks += [
            Para("Checked by triage now and found fine:", strong=True),
            Table(["what", "target", "observed"], rows),
        ]
    return Section("Ruled out", blocks or [Para("Nothing judged.")])


def _configuration(rep: Any) -> Section:
    blocks: list[Block] = [
        Para(
            f"What deploy renders from {rep.plan.inventory} (pdctl render): command line and env per role, "
            "secrets masked."
        )
    ]
    for r in rep.plan.roles:
        env = "\n".join(f"{k}={v}" for k, v in sorted(r.env.items())) or "(none)"
        blocks.append(
            Code(
                f"# {r.label} on {r.host} ({r.manager} service {r.service})\n"
                + " ".join(_shell_word(a) for a in r.argv)
                + "\n\n# env\n"
                + env,
                title=r.label,
            )
        )
    return Section("Configuration", blocks)


def _shell_word(a: str) -> str:
    import shlex

    return shlex.quote(a)


def _verification(rep: Any) -> Section:
    blocks: list[Block] = [Para(verdict_now(rep), strong=True)]
    for layer, results in (rep.health.layers if rep.health is not None else {}).items():
        rows = [[r.target, r.name, r.status.value, r.observed, r.expected] for r in results]
        blocks.append(Para(f"Layer {layer}: " + _layer_verdict(results)))
        if rows:
            blocks.append(Table(["target", "check", "status", "observed", "expected"], rows))
    return Section("Verification after the fix", blocks)


def _layer_verdict(results) -> str:
    failed = sum(1 for r in results if r.failed)
    unknown = sum(1 for r in results if r.status.value == "unknown")
    if failed or unknown:
        return f"FAIL ({failed} failed, {unknown} unknown of {len(results)})"
    return f"pass ({len(results)} checks)"


def _versions(rep: Any) -> Section:
    rows = [["pdctl", "", rep.versions.pdctl]]
    rows += [["engine", label, v] for label, v in rep.versions.engines.items()]
    rows += [["router", label, v] for label, v in rep.versions.routers.items()]
    return Section("Versions", [Table(["what", "instance", "version"], rows)])


def _masked(doc: Document, secrets: set[str]) -> Document:
    """Every text of the document through pdctl.secrets.mask_text (secret assignments and flags, URL passwords,
    and the declared secret values). Chart SVGs carry no text (text is drawn as paths)."""
    from pdctl.secrets import mask_text

    m = lambda s: mask_text(s, secrets)  # noqa: E731

    def block(b: Block) -> Block:
        if isinstance(b, Para):
            return Para(m(b.text), b.strong)
        if isinstance(b, Items):
            return Items([m(x) for x in b.items])
        if isinstance(b, Table):
            return Table(b.head, [[m(c) for c in row] for row in b.rows])
        if isinstance(b, Code):
            return Code(m(b.text), m(b.title))
        return b

    sections = [Section(s.title, [block(b) for b in s.blocks], s.level) for s in doc.sections]
    return Document(m(doc.title), [(k, m(v)) for k, v in doc.stamp], sections)
