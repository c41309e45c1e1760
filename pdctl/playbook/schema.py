"""The playbook file: msgspec Structs (the inventory's library) and the YAML loader.

A playbook is `name`, `description`, `vars` (defaults) and `steps`, each step
`{name, action, args, gate, on_failure, when, handler, description}`. Every error names the file, the step (1-based
index and name) and the field, and raises PlaybookError (exit 2). Step kinds, their argument types and gate keys
live in `pdctl.playbook.kinds` (one module each); this module checks a playbook against them without running anything.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import AbstractSet, Annotated, Any, Literal, Optional, Union

import msgspec
from msgspec import Meta

from pdctl.errors import PlaybookError
from pdctl.playbook.outcome import Data, RawArgs
from pdctl.yamlfile import load_yaml

_FORMAT_HINT = "see docs/playbooks/README.md for the playbook format"
STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class _Strict(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class RunHandler(_Strict):
    """`on_failure: {run: NAME}`: run the handler step NAME; if its gate passes the failure is recovered."""

    run: str


OnFailure = Union[Literal["stop", "continue"], RunHandler]


class StepSpec(_Strict):
    """One step as written. `args` and `gate` stay YAML data here: a step's args may hold `${...}` until the run's
    vars are known, and their kind's type reads them then (`steps.check_args`); a gate is checked by `gates`."""

    name: str
    action: str
    description: str = ""
    args: RawArgs = msgspec.field(default_factory=dict)
    gate: RawArgs = msgspec.field(default_factory=dict)
    on_failure: OnFailure = "stop"
    when: Optional[str] = None  # a var name (`apply`) or `not NAME`; the step is skipped when false
    handler: bool = False  # runs only when another step's on_failure names it

    @property
    def on_failure_text(self) -> str:
        return f"run {self.on_failure.run}" if isinstance(self.on_failure, RunHandler) else self.on_failure


class Playbook(_Strict):
    name: str
    steps: Annotated[list[StepSpec], Meta(min_length=1)]
    description: str = ""
    vars: dict[str, Data] = msgspec.field(default_factory=dict)
    source: str = "<memory>"  # the file it was read from (set by parse_playbook; not a YAML key)

    def step(self, name: str) -> StepSpec:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    def index_of(self, name: str) -> int:
        """1-based position of step `name` in the file."""
        return next(i for i, s in enumerate(self.steps, 1) if s.name == name)


def where(index: int, name: str | None, field: str | None) -> str:
    """`step 2 'co-restart', field 'gate.verdict'`: how every message points into a playbook."""
    s = f"step {index}" + (f" '{name}'" if name else "")
    return s + (f", field '{field}'" if field else "")


def _raw_step_name(data: Any, i: int) -> str | None:
    try:
        n = data["steps"][i].get("name")
        return n if isinstance(n, str) else None
    except (KeyError, IndexError, TypeError, AttributeError):
        return None


def _structure_problems(data: dict[str, Any], err: msgspec.ValidationError, secrets: AbstractSet[str]) -> list[str]:
    """msgspec's problems with the playbook's shape, each pointing at its step and field."""
    from pdctl.struct_errors import struct_problems

    lines = []
    for p in struct_problems(err, data, Playbook, secrets=secrets):
        names, msg = p.names, p.message
        if len(names) >= 2 and names[0] == "steps" and names[1].isdigit():
            i, field = int(names[1]), ".".join(names[2:])
            if field == "on_failure":  # a union of words and a mapping: say both forms
                msg = "expected stop, continue or {run: STEP_NAME}" + p.got
            line = f"  {where(i + 1, _raw_step_name(data, i), field or None)}: {msg}"
        else:
            line = f"  field '{p.path or '(top level)'}': {msg}"
        if line not in lines:
            lines.append(line)
    return lines


def check_playbook(pb: Playbook) -> list[str]:
    """Cross-step and per-kind checks: names, actions, args keys and types, gate keys, handlers. Problem lines."""
    from pdctl.playbook.gates import check_gate
    from pdctl.playbook.kinds import REGISTRY
    from pdctl.playbook.steps import check_args

    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, s in enumerate(pb.steps, 1):
        if not STEP_NAME.match(s.name):
            problems.append(f"  {where(i, s.name, 'name')}: use letters, digits, '-', '_' or '.' (got {s.name!r})")
        if s.name in seen:
            problems.append(f"  {where(i, s.name, 'name')}: duplicate step name (also step {seen[s.name]})")
        seen.setdefault(s.name, i)
        kind = REGISTRY.get(s.action)
        if kind is None:
            problems.append(
                f"  {where(i, s.name, 'action')}: unknown action {s.action!r} (choose from {', '.join(REGISTRY)})"
            )
            continue
        problems += [f"  {where(i, s.name, f)}: {m}" for f, m in check_args(kind, s.args, with_values=False)]
        problems += [f"  {where(i, s.name, f)}: {m}" for f, m in check_gate(kind, s.gate)]
        if s.when is not None and not re.fullmatch(r"(not\s+)?[A-Za-z_][A-Za-z0-9_.]*", s.when.strip()):
            problems.append(f"  {where(i, s.name, 'when')}: expected a var name or 'not NAME' (got {s.when!r})")
    for i, s in enumerate(pb.steps, 1):
        if isinstance(s.on_failure, RunHandler):
            target = s.on_failure.run
            if target == s.name:
                problems.append(f"  {where(i, s.name, 'on_failure.run')}: a step cannot be its own handler")
            elif target not in seen:
                problems.append(
                    f"  {where(i, s.name, 'on_failure.run')}: no step named {target!r} (steps: {', '.join(seen)})"
                )
            elif not pb.step(target).handler:
                problems.append(
                    f"  {where(i, s.name, 'on_failure.run')}: step {target!r} is not a handler "
                    "(mark it `handler: true` so it runs only on failure)"
                )
            elif isinstance(pb.step(target).on_failure, RunHandler):
                problems.append(
                    f"  {where(i, s.name, 'on_failure.run')}: handler {target!r} has its own "
                    "on_failure run; handlers do not chain"
                )
    if all(s.handler for s in pb.steps):
        problems.append("  field 'steps': every step is a handler; nothing would run")
    return problems


def parse_playbook(data: Any, source: str, secrets: AbstractSet[str] = frozenset()) -> Playbook:
    """Validate a mapping as a playbook. Raises PlaybookError naming `source`, each bad step and field; a value in
    a message is masked when its field looks secret or it holds one of `secrets` (the inventory's declared ones)."""
    from pdctl.secrets import mask_text

    if not isinstance(data, dict):
        raise PlaybookError(
            f"{source}: invalid playbook\n  expected a mapping at the top level, got {type(data).__name__}"
        )
    if "source" in data:  # Playbook.source is where it was read from, never a key of the file
        raise PlaybookError(f"{source}: invalid playbook\n  field 'source': unknown field", hint=_FORMAT_HINT)
    try:
        pb = msgspec.convert(data, Playbook, strict=False)  # lax as YAML is: "8" for 8, 1 for 1.0
    except msgspec.ValidationError as err:
        raise PlaybookError(
            "\n".join([f"{source}: invalid playbook"] + _structure_problems(data, err, secrets)),
            hint=_FORMAT_HINT,
        ) from None
    pb.source = source
    problems = [mask_text(line, secrets) for line in check_playbook(pb)]
    if problems:
        raise PlaybookError(
            "\n".join([f"{source}: invalid playbook"] + problems),
            hint=_FORMAT_HINT,
        )
    return pb


def load_playbook(path: str | Path, secrets: AbstractSet[str] = frozenset()) -> Playbook:
    """Read, parse and check the playbook file at `path` (`secrets`: as parse_playbook). Raises PlaybookError."""
    return parse_playbook(load_yaml(path, PlaybookError, "playbook"), str(Path(path)), frozenset(secrets))


# -- finding a playbook by name -------------------------------------------------------------------------------


def shipped_dirs() -> list[Path]:
    """Where shipped playbooks are looked up, in order: each dir of $PDCTL_PLAYBOOK_PATH (colon-separated), the
    `playbooks/` directory next to the installed `pdctl` package (a checkout or an editable install), and
    `<prefix>/share/pdctl/playbooks` (where a wheel install puts them: pyproject's data-files)."""
    import os
    import sys

    out = [Path(d) for d in os.environ.get("PDCTL_PLAYBOOK_PATH", "").split(os.pathsep) if d]
    here = Path(__file__).resolve().parent
    out += [here.parents[1] / "playbooks", Path(sys.prefix) / "share" / "pdctl" / "playbooks"]
    return out


def shipped_playbooks() -> dict[str, Path]:
    """name -> file of every playbook found in `shipped_dirs()` (the first one found wins)."""
    found: dict[str, Path] = {}
    for d in shipped_dirs():
        if d.is_dir():
            for f in sorted(d.glob("*.yaml")):
                found.setdefault(f.stem, f)
    return found


def resolve_playbook(ref: str) -> Path:
    """A path to an existing file, else the shipped playbook of that name. Raises PlaybookError (exit 2). A path
    that exists but is no regular file (a FIFO, a device, a directory) is returned: the reader says what it is."""
    p = Path(ref)
    if p.is_file():
        return p
    name = p.name.removesuffix(".yaml").removesuffix(".yml")
    if p.parent == Path(".") or str(p.parent) == "":
        shipped = shipped_playbooks()
        if name in shipped:
            return shipped[name]
        if p.exists():
            return p
        names = ", ".join(sorted(shipped)) or "none found"
        raise PlaybookError(
            f"{ref}: no such file and no shipped playbook of that name (shipped: {names})",
            hint="looked in: " + ", ".join(str(d) for d in shipped_dirs()),
        )
    if p.exists():
        return p
    raise PlaybookError(f"{ref}: no such playbook file")
