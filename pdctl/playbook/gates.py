"""Gates: what result of a step lets a playbook go on. `check_gate` refuses a malformed gate when the playbook
is loaded; `evaluate_gate` judges a step's outcome. Pure."""

from __future__ import annotations

from typing import Any, Callable

from pdctl.checks.layers import LAYER_NAMES
from pdctl.playbook.outcome import StepKind, StepOutcome


def _str_list(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return v
    raise ValueError("expected a name or a non-empty list of names")


def _int_list(v: Any) -> list[int]:
    if isinstance(v, bool):
        raise ValueError("expected an integer or a list of integers")
    if isinstance(v, int):
        return [v]
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return v
    raise ValueError("expected an integer or a list of integers")


def _layers_list(v: Any) -> list[str]:
    names = _str_list(v)
    bad = [n for n in names if n not in LAYER_NAMES]
    if bad:
        raise ValueError(f"unknown layer {bad[0]!r} (choose from {', '.join(LAYER_NAMES)})")
    return names


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("expected true or false")
    return v


def _text(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError("expected a non-empty string")
    return v


GATE_SPECS: dict[str, Callable[[Any], Any]] = {
    "ok": _bool,
    "layers_pass": _layers_list,
    "verdict": _str_list,
    "exit_code": _int_list,
    "stdout_contains": _text,
}


def check_gate(kind: StepKind, gate: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for every gate key the kind does not understand or whose value is malformed."""
    out = []
    for k, v in gate.items():
        if k not in kind.gate_keys:
            out.append((f"gate.{k}", f"not a gate of action {kind.name!r} (its gates: {', '.join(kind.gate_keys)})"))
            continue
        try:
            value = GATE_SPECS[k](v)
        except ValueError as e:
            out.append((f"gate.{k}", str(e)))
            continue
        unknown = [n for n in value if n not in kind.verdicts] if k == "verdict" else []
        if unknown:  # a verdict the action never gives: the gate could never pass
            out.append(
                (
                    f"gate.{k}",
                    f"unknown verdict {unknown[0]!r} of action {kind.name!r} "
                    f"(its verdicts: {', '.join(kind.verdicts) or 'none'})",
                )
            )
    return out


def evaluate_gate(gate: dict[str, Any], out: StepOutcome) -> tuple[bool, str]:
    """(passed, why). No gate = the action's own ok. An action that raised never passes."""
    if out.error is not None:
        return False, f"error: {out.error.splitlines()[0]}"
    if not gate:
        return out.ok, ("action ok" if out.ok else "action not ok") + (f" ({out.summary})" if out.summary else "")
    why = []
    for k, v in gate.items():
        if k == "ok":
            good = out.ok is v
            why.append(f"ok={str(out.ok).lower()}" + ("" if good else f" (want {str(v).lower()})"))
        elif k == "layers_pass":
            names = GATE_SPECS[k](v)
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
            names = GATE_SPECS[k](v)
            good = out.verdict in names
            why.append(f"verdict {out.verdict}" + ("" if good else f" (want {' or '.join(names)})"))
        elif k == "exit_code":
            codes = GATE_SPECS[k](v)
            good = out.exit_status in codes
            why.append(f"exit code {out.exit_status}" + ("" if good else f" (want {' or '.join(map(str, codes))})"))
        elif k == "stdout_contains":
            good = v in out.stdout
            why.append(f"stdout {'contains' if good else 'lacks'} {v!r}")
        else:  # refused at load time; kept for safety
            good = False
            why.append(f"unknown gate {k}")
        if not good:
            return False, "; ".join(why)
    return True, "; ".join(why)
