"""Failed checks as one line per cause, instances counted: the same check failing the same way on several
instances is one cause ("breaker on router[0]@h:30001 for 2: prefill[0], decode[0]: open (expected closed)"),
whether the instance is the check's target or a worker its name speaks of. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pdctl.checks.result import CheckResult

# a worker named inside a check's name, with the URL the router knows it by: "breaker prefill[0] (http://h:1)"
_WORKER_IN_NAME = re.compile(r"\s*\b((?:prefill|decode|router)\[\d+\])(?:\s*\([^)]*\))?")


@dataclass
class Cause:
    results: list[CheckResult]
    stem: str  # the check's name without the worker it names ("breaker")
    workers: list[str]  # the workers named in the names, one per result ("" where none)

    @property
    def first(self) -> CheckResult:
        return self.results[0]


def _split(name: str) -> tuple[str, str]:
    m = _WORKER_IN_NAME.search(name)
    if m is None:
        return name, ""
    return (_WORKER_IN_NAME.sub("", name).strip() or name), m.group(1)


def causes(results: list[CheckResult]) -> list[Cause]:
    """Results grouped by layer, check (the worker it names left out), status and expectation, in first-seen
    order. Pure."""
    groups: dict[tuple, Cause] = {}
    for r in results:
        stem, worker = _split(r.name)
        key = (r.layer, stem, r.status, r.expected)
        c = groups.setdefault(key, Cause([], stem, []))
        c.results.append(r)
        c.workers.append(worker)
    return list(groups.values())


_INSTANCE = re.compile(r"^(prefill|decode|router)\[(\d+)\]@")
MAX_NAMED = 3  # when the screen is short, more instances than this are said by role and index ("decode[0-3]")


def instance_ranges(targets: list[str]) -> str:
    """'prefill[0-3], decode[0,2]' for instance labels ('prefill[0]@h:30000', ...), by role in first-seen order;
    "" when a target is not an instance label. Pure."""
    by_role: dict[str, list[int]] = {}
    for t in targets:
        m = _INSTANCE.match(t)
        if m is None:
            return ""
        by_role.setdefault(m.group(1), []).append(int(m.group(2)))
    out = []
    for role, ks in by_role.items():
        runs: list[list[int]] = []
        for k in sorted(set(ks)):
            if runs and k == runs[-1][-1] + 1:
                runs[-1].append(k)
            else:
                runs.append([k])
        out.append(f"{role}[{','.join(str(r[0]) if len(r) == 1 else f'{r[0]}-{r[-1]}' for r in runs)}]")
    return ", ".join(out)


def _who(c: Cause, by_index: bool) -> str:
    targets = list(dict.fromkeys(r.target for r in c.results))
    named = [w for w in c.workers if w]
    if named and len(targets) == 1:
        return f"{targets[0]} for {', '.join(named)}"
    if by_index and not named and len(targets) > MAX_NAMED and instance_ranges(targets):
        return instance_ranges(targets)
    return ", ".join(f"{r.target} for {w}" if w else r.target for r, w in zip(c.results, c.workers))


def _without_target(r: CheckResult) -> str:
    """What was found, less the instance's own name ("cannot read /metrics of decode[0]@h:30002: connection
    refused" -> "cannot read /metrics: connection refused"), so instances that found the same read as one. Pure."""
    return r.observed.replace(f" of {r.target}", "").replace(r.target, "it")


def cause_line(c: Cause, of: int = 0, *, by_index: bool = False) -> str:
    """'FAIL  /health  decode[0]@h:30002: connection refused (expected HTTP 200)'; several instances: 'FAIL
    breaker on 2: router[0]@h:30001 for prefill[0], decode[0]: open (expected closed)'; found per instance when
    they differ; `of`: how many instances the check ran on ("on 4 of 8"); `by_index`: more than 3 instances said as
    "decode[0-3]". Pure."""
    r0 = c.first
    on = f"on {len(c.results)}" + (f" of {of}" if of > len(c.results) else "")
    status = r0.status.value.upper()
    from pdctl.render.fit_screen import glued

    # a short expectation stays on one line, readable at a glance
    expected = f"(expected {r0.expected})" if r0.expected else ""
    expected = " " + (glued(expected) if len(expected) <= 40 else expected) if expected else ""
    if len(c.results) == 1:
        return f"{status:<4}  {r0.name}  {r0.target}: {r0.observed or '-'}{expected}"
    found = {_without_target(r) for r in c.results}
    if len(found) == 1:
        return f"{status:<4}  {c.stem} {on}: {_who(c, by_index)}: {_without_target(r0) or '-'}{expected}"
    each = "; ".join(f"{r.target}{' for ' + w if w else ''}: {r.observed or '-'}" for r, w in zip(c.results, c.workers))
    return f"{status:<4}  {c.stem} {on}: {each}{expected}"


def cause_why(c: Cause) -> str:
    """The cause's one line of why (the first instance's when they differ), an HTTP error body read down to its
    message; "" when none. Pure."""
    from pdctl.checks.triage_evidence import error_message

    detail = next((r.detail for r in c.results if r.detail), "")
    head, message = error_message(detail)
    return f"{head}: {message}" if message else detail
