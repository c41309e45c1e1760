"""Plan a playbook run: substitute the vars into every step, check each step's args and gate with their values, and
evaluate `when`. Changes nothing and connects nowhere; the plan is what `--dry-run` shows and what the runner runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional

import msgspec

from pdctl.errors import PlaybookError
from pdctl.playbook.gates import Gate, check_gate, parse_gate
from pdctl.playbook.kinds import REGISTRY
from pdctl.playbook.masking import mask_shown, run_secrets, secret_var_names
from pdctl.playbook.outcome import Data, RawArgs, StepKind
from pdctl.playbook.schema import Playbook, StepSpec, where
from pdctl.playbook.steps import check_args, fill_args
from pdctl.playbook.vars import VarError, build_scope, set_by, substitute, truthy, unknown_cli_vars
from pdctl.serialize import JSON_OFF, json_key

if TYPE_CHECKING:
    from pdctl.inventory import Inventory


@dataclass
class PlannedStep:
    """As JSON data (the plan's view of the step): the spec's fields flattened, the command line, masked args."""

    index: int  # 1-based position in the file
    spec: StepSpec = field(metadata=JSON_OFF)
    kind: StepKind = field(metadata=JSON_OFF)
    args: Any = field(metadata=JSON_OFF)  # the typed args of its kind (`kind.args`)
    shown_args: RawArgs = field(metadata=json_key("args"))  # substituted, secrets masked: what the plan shows
    runs: bool  # `when` is true (or absent)
    skip_reason: Optional[str] = None
    secrets: frozenset[str] = field(default=frozenset(), repr=False, metadata=JSON_OFF)  # the run's, scrubbed
    gate: Gate = field(default_factory=Gate, metadata=JSON_OFF)  # the spec's gate, `${...}` substituted
    json_extra = (
        ("name", "spec.name"),
        ("action", "spec.action"),
        ("command", "describe"),
        ("gate", "shown_gate"),
        ("on_failure", "spec.on_failure_text"),
        ("when", "spec.when"),
        ("handler", "spec.handler"),
        ("mutating", "kind.mutating"),
    )
    json_mask = "secrets"

    @property
    def describe(self) -> str:
        from pdctl.secrets import mask_text

        return mask_text(self.kind.describe(self.args), self.secrets)

    @property
    def shown_gate(self) -> Data:
        from pdctl.secrets import mask_nested

        return mask_nested(msgspec.to_builtins(self.gate), self.secrets) or "action ok"


@dataclass
class Plan:
    """As JSON data, the `--dry-run --json` document: the playbook's name, description and source flattened in
    (secrets scrubbed)."""

    playbook: Playbook = field(metadata=JSON_OFF)
    inventory: str
    vars: dict[str, Data]
    apply: bool
    steps: list[PlannedStep]  # in file order, handlers included
    inventory_name: str = field(default="", metadata=JSON_OFF)  # the inventory's `name` (history -i matches it)
    secrets: frozenset[str] = field(default=frozenset(), repr=False, metadata=JSON_OFF)  # inventory + secret vars
    json_extra = (("playbook", "playbook.name"), ("description", "playbook.description"), ("source", "playbook.source"))
    json_mask = "secrets"

    @property
    def sequence(self) -> list[PlannedStep]:
        return [s for s in self.steps if not s.spec.handler]

    def handler(self, name: str) -> PlannedStep:
        return next(s for s in self.steps if s.spec.name == name)


def plan(
    pb: Playbook,
    inv: Inventory,
    *,
    cli_vars: Mapping[str, Data] | None = None,
    apply: bool = False,
    secret_vars: set[str] | frozenset[str] = frozenset(),
) -> Plan:
    """Substitute vars into every step, validate the args, evaluate `when`. Changes nothing, connects nowhere.
    `secret_vars` names vars to treat as secret whatever their names (--secret-var). Raises PlaybookError naming
    the step and field for an unknown var or a bad argument value."""
    from pdctl.secrets import MASK, mask_text

    texts = [json.dumps(msgspec.to_builtins(s), default=str) for s in pb.steps]
    unknown = unknown_cli_vars(cli_vars or {}, pb.vars, texts)
    if unknown:
        known = ", ".join(sorted(pb.vars)) or "none"
        raise PlaybookError(
            f"{pb.source}: --var {', '.join(unknown)}: not a variable of this playbook (its vars: {known})"
        )
    try:
        scope = build_scope(inv, pb.vars, cli_vars or {}, apply)
    except VarError as e:
        raise PlaybookError(f"{pb.source}: field 'vars': {e}") from None
    names = secret_var_names(scope.vars, secret_vars)
    secrets = run_secrets(inv, scope.vars, names)
    planned, problems = [], []
    for i, s in enumerate(pb.steps, 1):
        kind = REGISTRY[s.action]
        try:  # a shell command's `${...}` become environment variables (shell_refs): values reach it as data
            args: RawArgs = fill_args(kind, s.args, scope)
        except VarError as e:
            problems.append(f"  {where(i, s.name, 'args')}: {e}")
            continue
        try:  # a gate is compared with what the step saw: its `${...}` filled in as the args' are
            raw_gate: RawArgs = {k: substitute(v, scope) for k, v in s.gate.items()}
        except VarError as e:
            problems.append(f"  {where(i, s.name, 'gate')}: {e}")
            continue
        bad = check_gate(kind, raw_gate)  # a `${...}` may fill in a value of the wrong kind
        if bad:
            problems += [f"  {where(i, s.name, f)}: {mask_text(m, secrets)}{set_by(s.gate, f)}" for f, m in bad]
            continue
        runs, skip = True, None
        if s.when:
            try:
                runs = truthy(s.when, scope)
            except VarError as e:
                problems.append(f"  {where(i, s.name, 'when')}: {e}")
                continue
            if not runs:
                skip = f"when: {s.when} is false" + (" (pass --apply to run it)" if "apply" in s.when else "")
        bad = check_args(kind, args, with_values=True, secrets=secrets)
        if bad:
            problems += [f"  {where(i, s.name, f)}: {m}{set_by(s.args, f)}" for f, m in bad]
            continue
        planned.append(
            PlannedStep(
                i,
                s,
                kind,
                kind.convert(args),
                {k: mask_shown(v, secrets, k) for k, v in args.items()},
                runs,
                skip,
                secrets=secrets,
                gate=parse_gate(raw_gate),
            )
        )
    if problems:
        raise PlaybookError("\n".join([f"{pb.source}: invalid playbook"] + problems))
    shown_vars = {k: (MASK if k in names and v not in (None, "") else v) for k, v in scope.vars.items()}
    return Plan(pb, inv.source, shown_vars, apply, planned, inventory_name=inv.name, secrets=secrets)
