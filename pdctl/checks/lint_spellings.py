"""Judge of `pdctl lint`: one setting written by several flags on a role's command line. Pure.

Which flags write one setting is the host's parser's own answer (the probe's `writes`: each declared flag with the
setting, `dest`, it writes and the value that parser converts it to), never a list kept here: SGLang 0.5.23 spells
tp as `--tp-size` and `--tensor-parallel-size`, a boolean as `--x` and `--no-x`, and a later version may add more.
argparse keeps the last occurrence and says nothing, so `--tp-size 1 --tensor-parallel-size 2` starts with tp 2
whatever the inventory author meant by the first.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from pdctl.checks.lint_rules import Finding


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def judge_spellings(label: str, who: str, version: str, item: Mapping[str, Any]) -> list[Finding]:
    """One finding per setting that several flags of the command line write: `flag-conflict` (error) when their
    values differ, `flag-repeated` (warning) when they agree. `who` names the parser that answered."""
    by_setting: dict[str, list[Mapping[str, Any]]] = {}
    for w in item.get("writes") or []:
        by_setting.setdefault(str(w.get("dest")), []).append(w)
    out: list[Finding] = []
    for setting, writes in by_setting.items():
        if len(writes) < 2:
            continue
        flags = list(dict.fromkeys(str(w["flag"]) for w in writes))
        spellings = list(dict.fromkeys(s for w in writes for s in w.get("spellings") or [w["option"]]))
        said = ", ".join(f"{w['flag']} {_shown(w['value'])}" for w in writes)
        data = {"setting": setting, "flags": flags, "spellings": spellings}
        every = "both" if len(writes) == 2 else "all"
        last = writes[-1]
        if any(not _same(w["value"], last["value"]) for w in writes):
            out.append(
                Finding(
                    "flag-conflict",
                    label,
                    " / ".join(flags),
                    f"{who}: {said} {every} set {setting} ({' = '.join(spellings)}); its parser keeps the last, "
                    f"{last['flag']} {_shown(last['value'])}, and drops the others silently",
                    fix=f"give {setting} once, with the value meant",
                    version=version,
                    data=data,
                )
            )
        else:
            out.append(
                Finding(
                    "flag-repeated",
                    label,
                    " / ".join(flags),
                    f"{who}: {said} {every} set {setting} ({' = '.join(spellings)}), to the same value",
                    fix=f"keep one of {', '.join(flags)}",
                    version=version,
                    data=data,
                )
            )
    return out
