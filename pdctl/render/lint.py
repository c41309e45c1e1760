"""What `pdctl lint` prints: the verdict, then each finding (role, subject, what the host's parser said, what to
write instead, the rule's doc), silenced ones with the inventory's reason, then each role's answering version."""

from __future__ import annotations

from pdctl import render
from pdctl.render.escape_controls import Text

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "note": "cyan"}


def verdict_line(report) -> str:
    """'lint: FAIL (2 error(s), 1 warning(s); 1 would not start)' or 'lint: PASS (1 note(s))'. Pure."""
    live = [f for f in report.findings if f.silenced is None]
    counts = [
        f"{sum(f.severity == s for f in live)} {s}(s)"
        for s in ("error", "warning", "note")
        if any(f.severity == s for f in live)
    ]
    silenced = sum(f.silenced is not None for f in report.findings)
    if silenced:
        counts.append(f"{silenced} silenced")
    blocking = len(report.blocking)
    tail = f"; {blocking} would not start" if blocking else ""
    inner = ", ".join(counts) + tail
    return f"lint: {'PASS' if report.ok else 'FAIL'}" + (f" ({inner})" if inner else "")


def _wrapped(text: str, width: int, indent: str = "  ", style: str = "") -> list[Text]:
    """`text` wrapped to `width` at word boundaries, continuation lines indented two more (a long flag or env
    name stays whole on its own line)."""
    import textwrap

    lines = textwrap.wrap(
        text,
        width=max(width, 40),
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]
    return [Text(line, style=style) for line in lines]


def lint_report(report) -> None:
    c = render.console()
    w = c.width
    style_v = "bold green" if report.ok else "bold red"
    c.print(Text(verdict_line(report), style=style_v))
    rank = {"error": 0, "warning": 1, "note": 2}
    ordered = sorted(report.findings, key=lambda f: (f.silenced is not None, rank.get(f.severity, 3)))
    first = next((f for f in ordered if f.severity == "error" and not f.silenced and f.fix), None)
    step = f"{f_short(first.role)} {first.subject}: {first.fix}, then pdctl lint" if first else ""
    if step:  # the first fix to make, before the list
        for line in _wrapped("next: " + step, w, "", "yellow"):
            c.print(line)
    for f in ordered:
        style = "dim" if f.silenced else SEVERITY_STYLE.get(f.severity, "")
        for line in _wrapped(f"{f.severity.upper()} {f.rule}  {f.role}  {f.subject}", w, "", style):
            c.print(line)
        parts = [f.message] + ([f"fix: {f.fix}"] if f.fix else [])
        parts += [f"silenced by the inventory: {f.silenced}"] if f.silenced else []
        for part in parts + [f"see {f.doc}"]:
            for line in _wrapped(part, w):
                c.print(line)
    c.print(Text("answered by", style="bold"))
    for r in report.roles:
        who = f"{r['kind']} {r['version']}" if r.get("version") else f"{r['kind']}: not asked"
        for line in _wrapped(f"{r['label']}  {who}  python {r['python']}", w):
            c.print(line)
    if step:  # the verdict and the fix again, on screen after any scroll
        for line in _wrapped(f"{verdict_line(report)} -- next: {step}", w, "", style_v):
            c.print(line)


def f_short(label: str) -> str:
    """'decode[0]' of 'decode[0]@host:30002'. Pure."""
    return label.split("@", 1)[0]
