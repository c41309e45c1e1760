"""What `pdctl lint` prints: the verdict, then each finding (role, subject, what the host's parser said, what to
write instead, the rule's doc), silenced ones with the inventory's reason, then each role's answering version."""

from __future__ import annotations

from pdctl import render

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


def _groups(findings) -> list[list]:
    """Findings that say the same thing of several roles (the same rule, subject, message, fix and silencing: one
    smg flag on two routers), together, in the order given. Pure."""
    out: dict[tuple, list] = {}
    for f in findings:
        out.setdefault((f.rule, f.subject, f.message, f.fix, f.silenced), []).append(f)
    return list(out.values())


def next_fix(groups: list[list]) -> str:
    """The first fix to make: the first error's that says one, else the first warning's, with the roles it is
    for; "" when none. Pure."""
    from pdctl.render.check_causes import instance_ranges

    for severity in ("error", "warning"):
        for group in groups:
            f = group[0]
            if f.severity == severity and not f.silenced and f.fix:
                roles = [g.role for g in group]
                who = instance_ranges(roles) if len(roles) > 1 else ""
                return f"{who or ', '.join(f_short(r) for r in roles)} {f.subject}: {f.fix}, then pdctl lint"
    return ""


def lint_screen(report, width: int):
    """The lint on one screen (render.fit_screen): the verdict and the first fix; each finding once, with every
    role it holds for, what the host's parser said and what to write instead; the rule's doc, the silenced
    findings' reasons and which version answered while rows last; the verdict and the fix again. Pure."""
    from pdctl.render.check_causes import MAX_NAMED, instance_ranges
    from pdctl.render.fit_screen import Row, Screen, wrapped

    style_v = "bold green" if report.ok else "bold red"
    rank = {"error": 0, "warning": 1, "note": 2}
    ordered = sorted(report.findings, key=lambda f: (f.silenced is not None, rank.get(f.severity, 3)))
    groups = _groups(ordered)
    step = next_fix(groups)
    screen = Screen(width)
    screen.head = wrapped(verdict_line(report), width, style=style_v)
    if step:  # the first fix to make, before the list
        screen.head += wrapped(step, width, first="next: ", indent=6, style="yellow")
    for group in groups:
        f = group[0]
        style = "dim" if f.silenced else SEVERITY_STYLE.get(f.severity, "")
        roles = [g.role for g in group]
        named = (len(roles) > MAX_NAMED and instance_ranges(roles)) or ", ".join(roles)
        who = roles[0] if len(roles) == 1 else f"on {len(roles)}: {named}"
        head = wrapped(f"{f.severity.upper()} {f.rule}  {who}  {f.subject}", width, indent=2, style=style)
        fix = wrapped(f"fix: {f.fix}", width, first="  ", indent=4) if f.fix else []
        if f.silenced:  # a silenced finding is context, not a fault: the first to go
            screen.add(
                head + wrapped(f"silenced by the inventory: {f.silenced}", width, first="  ", indent=4),
                rank=3,
                note="silenced findings",
            )
            continue
        said = wrapped(f.message, width, first="  ", indent=4)
        doc = wrapped(f"see {f.doc}", width, first="  ", indent=4, style="dim")
        if f.severity == "note":  # a note stays or goes whole
            screen.add(head + said + fix + doc, rank=2, note="notes")
            continue
        screen.add(head, keep=True)
        screen.add(said, rank=1, note="what the parser said")
        screen.add(fix, keep=True)
        screen.add(doc, rank=2, note="the rules' docs")
    answered: dict[str, list[str]] = {}
    for r in report.roles:
        who = f"{r['kind']} {r['version']}" if r.get("version") else f"{r['kind']}: not asked"
        answered.setdefault(f"{who}, python {r['python']}", []).append(r["label"])
    rows = [Row("answered by", "bold")]
    for who, labels in answered.items():
        names = (len(labels) > MAX_NAMED and instance_ranges(labels)) or ", ".join(labels)
        rows += wrapped(f"{names}: {who}", width, first="  ", indent=4)
    screen.add(rows, rank=2, note="which version answered")
    if step:  # the verdict and the fix again, on screen after any scroll
        screen.tail = wrapped(f"{verdict_line(report)} -- next: {step}", width, style=style_v)
    return screen


def lint_report(report, *, verbose: bool = False) -> None:
    """One screen (24 rows) unless `verbose`."""
    from pdctl.render.fit_screen import print_rows

    screen = lint_screen(report, render.console().width)
    print_rows(screen.fit(10**6) if verbose else screen.fit())


def f_short(label: str) -> str:
    """'decode[0]' of 'decode[0]@host:30002'. Pure."""
    return label.split("@", 1)[0]
