"""Gates: what result of a step lets a playbook go on. A gate is a `Gate` (typed, its keys those below); `check_gate`
refuses a malformed one, or one its action does not understand, when the playbook is loaded; `evaluate_gate` judges
a step's outcome. Pure."""

from __future__ import annotations

from typing import Any, Optional, Union

import msgspec

from pdctl.checks.layers import LAYER_NAMES
from pdctl.playbook.outcome import Data, RawArgs, StepKind, StepOutcome
from pdctl.struct_errors import field_errors

#: a gate key's expected value in words, for a value of the wrong kind (msgspec says it in type names)
_EXPECTED = {
    "ok": "expected true or false",
    "layers_pass": "expected a name or a non-empty list of names",
    "verdict": "expected a name or a non-empty list of names",
    "exit_code": "expected an integer or a list of integers",
    "stdout_contains": "expected a non-empty string",
}


class Gate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A step's gate as written (a name or a list of names, one code or a list); a key left out is not judged. No
    key at all: the action's own ok. Keys are judged in this order, the first that fails ending the judgement."""

    ok: Optional[bool] = None
    layers_pass: Union[str, list[str], None] = None  # every layer named ran and has no FAIL
    verdict: Union[str, list[str], None] = None  # the action's verdict is one of these
    exit_code: Union[int, list[int], None] = None  # the command's exit code is one of these
    stdout_contains: Optional[str] = None

    def __post_init__(self) -> None:
        problems = [(k, _EXPECTED[k]) for k in ("layers_pass", "verdict", "exit_code") if getattr(self, k) == []]
        if self.stdout_contains == "":
            problems.append(("stdout_contains", _EXPECTED["stdout_contains"]))
        unknown = [n for n in self.layers if n not in LAYER_NAMES]
        if unknown:
            problems.append(("layers_pass", f"unknown layer {unknown[0]!r} (choose from {', '.join(LAYER_NAMES)})"))
        if problems:
            raise field_errors(problems)

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys given, in judging order."""
        return tuple(f for f in self.__struct_fields__ if getattr(self, f) is not None)

    @property
    def layers(self) -> list[str]:
        return _as_list(self.layers_pass)

    @property
    def verdicts(self) -> list[str]:
        return _as_list(self.verdict)

    @property
    def exit_codes(self) -> list[int]:
        return _as_list(self.exit_code)


def _as_list(v: Union[str, int, list, None]) -> list:
    return [] if v is None else v if isinstance(v, list) else [v]


def parse_gate(raw: RawArgs) -> Gate:
    """The Gate a step's `gate:` mapping holds (strict: `"0"` is no exit code). Raises msgspec.ValidationError;
    `check_gate` says the problems in words first."""
    return msgspec.convert(raw, Gate)


def check_gate(kind: StepKind[Any], gate: RawArgs) -> list[tuple[str, str]]:
    """(field, problem) for every gate key the kind does not understand or whose value is malformed."""
    from pdctl.struct_errors import field_problems, struct_problems

    out = [
        (f"gate.{k}", f"not a gate of action {kind.name!r} (its gates: {', '.join(kind.gate_keys)})")
        for k in gate
        if k not in kind.gate_keys
    ]
    understood: dict[str, Data] = {k: v for k, v in gate.items() if k in kind.gate_keys}
    problems = field_problems(understood, Gate)
    if not problems:
        try:
            parsed = parse_gate(understood)
        except msgspec.ValidationError as err:
            problems = struct_problems(err, understood, Gate)
        else:
            unknown = [n for n in parsed.verdicts if n not in kind.verdicts]
            if unknown:  # a verdict the action never gives: the gate could never pass
                out.append(
                    (
                        "gate.verdict",
                        f"unknown verdict {unknown[0]!r} of action {kind.name!r} "
                        f"(its verdicts: {', '.join(kind.verdicts) or 'none'})",
                    )
                )
    for p in problems:  # a value of the wrong kind: the key's expected value in words
        plain = len(p.names) == 1 and p.problem.startswith("Expected")
        words = _EXPECTED.get(p.names[0], p.problem) if plain else p.problem
        out.append((".".join(("gate", *p.names)), words + p.got))
    return out


def evaluate_gate(gate: Gate, out: StepOutcome) -> tuple[bool, str]:
    """(passed, why). No gate = the action's own ok. An action that raised never passes."""
    if out.error is not None:
        return False, f"error: {out.error.splitlines()[0]}"
    if not gate.keys:
        return out.ok, ("action ok" if out.ok else "action not ok") + (f" ({out.summary})" if out.summary else "")
    why = []
    for k in gate.keys:
        if k == "ok":
            good = out.ok is gate.ok
            why.append(f"ok={str(out.ok).lower()}" + ("" if good else f" (want {str(gate.ok).lower()})"))
        elif k == "layers_pass":
            names = gate.layers
            missing = [n for n in names if n not in out.layers]
            failing = [n for n in names if n in out.layers and not out.layers[n]]
            good = not missing and not failing
            why.append(
                f"layers {', '.join(names)} pass"
                if good
                else "layers "
                + "; ".join(
                    x
                    for x in (
                        f"failed: {', '.join(failing)}" if failing else "",
                        f"not run: {', '.join(missing)}" if missing else "",
                    )
                    if x
                )
            )
        elif k == "verdict":
            good = out.verdict in gate.verdicts
            why.append(f"verdict {out.verdict}" + ("" if good else f" (want {' or '.join(gate.verdicts)})"))
        elif k == "exit_code":
            codes = gate.exit_codes
            good = out.exit_status in codes
            why.append(f"exit code {out.exit_status}" + ("" if good else f" (want {' or '.join(map(str, codes))})"))
        else:  # stdout_contains
            text = gate.stdout_contains or ""
            good = text in out.stdout
            why.append(f"stdout {'contains' if good else 'lacks'} {text!r}")
        if not good:
            return False, "; ".join(why)
    return True, "; ".join(why)
