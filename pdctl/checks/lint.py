"""Judges of `pdctl lint`: what a role's host said about its command line and env (the reply of
pdctl/probes/lint_probe.py) -> typed findings. Pure; the probe's reply is parsed here too.

The host's parser is the authority: its verdict (argparse's own message) decides whether the line would start.
Every `--flag` is also matched against the option strings that parser knows, as argparse matches prefixes, so one
run reports every unknown or ambiguous flag (argparse stops at the first) and the abbreviations it accepts silently;
two flags that write one setting are pdctl.checks.lint_spellings'.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Mapping, Sequence

from pdctl.checks.flags import flag_names
from pdctl.checks.lint_rules import Finding
from pdctl.checks.lint_spellings import judge_spellings
from pdctl.secrets import MASK, is_secret_name

MARK = "PDCTL-LINT-REPLY "
_ERROR = re.compile(r"error: (.*)", re.S)
_AMBIGUOUS = re.compile(r"ambiguous option: (\S+?)(?:=\S*)? could match (.*)")
_ARGUMENT = re.compile(r"argument ([^:]+): (.*)")
_BOOL = {"true", "1", "yes", "y", "false", "0", "no", "n"}


def parse_probe_reply(stdout: str) -> dict[str, Any] | None:
    """The probe's JSON reply from its stdout (other lines a package printed are skipped); None when absent."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                return json.loads(line[len(MARK) :])
            except ValueError:
                return None
    return None


def closest(name: str, known: Sequence[str], n: int = 2) -> list[str]:
    return difflib.get_close_matches(name, list(known), n=n, cutoff=0.75)


def _product(kind: str) -> str:
    return {"sglang": "sglang", "bundled": "the bundled engine"}.get(kind, kind)  # a router kind is its name


def judge_command(label: str, kind: str, argv: Sequence[str], item: Mapping[str, Any] | None) -> list[Finding]:
    """Findings about one role's flags (`argv`: the flags after `python -m MODULE`) from the probe's `item`."""
    if item is None or not item.get("available"):
        why = (item or {}).get("unavailable") or "no answer from the probe"
        return [
            Finding(
                "lint-unavailable",
                label,
                _product(kind),
                f"{_product(kind)} could not be asked: {why}",
                fix=f"install {_product(kind)} for the host's interpreter, or declare hosts.<name>.python",
            )
        ]
    version = str(item.get("version") or "")
    who = f"{_product(kind)} {version}".strip()
    options = item.get("options") or []
    known = set(options)
    out: list[Finding] = []
    for flag in flag_names(argv):
        if flag in known:
            continue
        matches = [o for o in options if o.startswith(flag)]
        if len(matches) == 1:
            out.append(
                Finding(
                    "flag-abbreviated",
                    label,
                    flag,
                    f"{who} reads {flag} as {matches[0]}",
                    fix=f"write {matches[0]}",
                    version=version,
                    data={"resolves_to": matches[0]},
                )
            )
        elif matches:
            out.append(
                Finding(
                    "flag-ambiguous",
                    label,
                    flag,
                    f"{who}: {flag} could match {', '.join(matches)}",
                    fix="write one of " + ", ".join(matches),
                    version=version,
                    data={"candidates": matches},
                )
            )
        else:
            near = closest(flag, options)
            out.append(
                Finding(
                    "flag-unknown",
                    label,
                    flag,
                    f"{who} has no flag {flag}",
                    fix=f"did you mean {' or '.join(near)}?" if near else "remove it",
                    version=version,
                    data={"suggestions": near},
                )
            )
    out += judge_spellings(label, who, version, item)
    verdict = item.get("verdict") or {}
    if not verdict.get("ok", False):
        f = _refusal(label, who, version, str(verdict.get("error") or ""), out)
        if f is not None:
            out.append(f)
    return out


def _refusal(label: str, who: str, version: str, text: str, seen: list[Finding]) -> Finding | None:
    """The parser's own refusal as a finding, unless the prefix analysis already said it (then its message joins
    that finding)."""
    m = _ERROR.search(text)
    msg = (m.group(1) if m else text).strip() or "refused the command line"
    first = msg.splitlines()[0]
    amb = _AMBIGUOUS.match(first)
    for f in seen:
        if (amb and f.rule == "flag-ambiguous" and f.subject == amb.group(1)) or (
            first.startswith("unrecognized arguments:") and f.rule == "flag-unknown" and f.subject in first
        ):
            f.data["parser_says"] = first
            return None
    if amb:
        cands = [c.strip() for c in amb.group(2).split(",")]
        return Finding(
            "flag-ambiguous",
            label,
            amb.group(1),
            f"{who}: {first}",
            fix="write one of " + ", ".join(cands),
            version=version,
            data={"candidates": cands, "parser_says": first},
        )
    if first.startswith("unrecognized arguments:"):
        return Finding(
            "flag-unknown",
            label,
            first.split(":", 1)[1].strip(),
            f"{who}: {first}",
            fix="remove it",
            version=version,
            data={"parser_says": first},
        )
    arg = _ARGUMENT.match(first)
    if arg:
        flag = arg.group(1).split("/")[0].strip()
        return Finding(
            "flag-value",
            label,
            flag,
            f"{who}: {first}",
            fix=f"give {flag} a value it accepts",
            version=version,
            data={"parser_says": first},
        )
    return Finding(
        "flag-rejected",
        label,
        "command line",
        f"{who}: {first}",
        version=version,
        fix="change the flags it names",
        data={"parser_says": msg[:500]},
    )


def value_problem(type_name: str, value: str) -> str | None:
    """Why `value` does not parse as the registry type (EnvBool, EnvInt, EnvFloat, EnvJSON, ...), or None."""
    if type_name.startswith("EnvBool"):
        return None if value.lower() in _BOOL else f'"{value}" is not a boolean (true/false, 1/0, yes/no)'
    if type_name.startswith("EnvInt"):
        try:
            int(value)
        except ValueError:
            return f'"{value}" is not an integer'
    if type_name.startswith("EnvFloat"):
        try:
            float(value)
        except ValueError:
            return f'"{value}" is not a number'
    return None


_ENGINE_PREFIXES = ("SGLANG_", "SGL_")


def _engine_name(name: str) -> bool:
    """An env name meant for SGLang: its prefix in any letter case (`sglang_...` is one, which SGLang ignores)."""
    return name.upper().startswith(_ENGINE_PREFIXES)


def _case_fix(name: str, known: Sequence[str]) -> str | None:
    """The name SGLang reads that `name` spells in other letter case (the legacy SGL_ prefix as its SGLANG_ name),
    or None when it differs otherwise or not at all."""
    upper = {k.upper(): k for k in known}
    right = upper.get(name.upper())
    if right is None and name != name.upper() and name.upper().startswith("SGL_"):
        right = upper.get("SGLANG_" + name.upper()[len("SGL_") :])
    return right if right is not None and right != name else None


def judge_env(
    label: str,
    kind: str,
    env: Mapping[str, str],
    registry: Mapping[str, Any] | None,
    site_env: Mapping[str, str],
    version: str = "",
) -> list[Finding]:
    """Findings about a worker's SGLANG_* env names and values against the host's registry (`registry`: the
    probe's {fields, deprecated, direct_reads}). Names the inventory declares site-specific are a note each; a
    name in another letter case than the one SGLang reads (`sglang_disaggregation_waiting_timeout`) is ignored by
    SGLang and said with the right spelling."""
    out: list[Finding] = []
    who = f"{_product(kind)} {version}".strip()
    checked = [n for n in env if _engine_name(n) or n in site_env]
    if not checked:
        return out
    if not registry or "unavailable" in registry:
        why = (registry or {}).get("unavailable", "no registry in the probe's answer")
        return [
            Finding(
                "lint-unavailable",
                label,
                "env registry",
                f"{who}'s env registry could not be read: {why}",
                version=version,
            )
        ]
    fields = registry.get("fields") or {}
    deprecated = registry.get("deprecated") or {}
    direct = set(registry.get("direct_reads") or [])
    aliases = {v["alias"]: k for k, v in fields.items() if v.get("alias")}
    known = [*fields, *aliases, *deprecated, *direct, *site_env]
    for name in checked:
        value = env[name]
        shown = MASK if is_secret_name(name) and value else value
        if name in site_env and name not in fields and name not in direct:
            out.append(
                Finding(
                    "env-site-specific",
                    label,
                    name,
                    f"not read by {who}: declared site-specific ({site_env[name]})",
                    version=version,
                    data={"reason": site_env[name]},
                )
            )
            continue
        right = None if name in known else _case_fix(name, known)
        if right is not None:
            out.append(
                Finding(
                    "env-case",
                    label,
                    name,
                    f"{who} reads {right}, not {name}: environment names are case-sensitive, so it is ignored "
                    "and the setting keeps its default",
                    fix=f"write {right}",
                    version=version,
                    data={"spelling": right},
                )
            )
            continue
        target = name
        if name in aliases:
            out.append(
                Finding(
                    "env-deprecated",
                    label,
                    name,
                    f"{who} reads {name} only as a fallback of {aliases[name]}",
                    fix=f"write {aliases[name]}",
                    version=version,
                )
            )
            target = aliases[name]
        elif name in deprecated:
            d = deprecated[name]
            note = d.get("note") or ""
            out.append(
                Finding(
                    "env-deprecated",
                    label,
                    name,
                    f"{who}: {name} is deprecated. {note}".strip(),
                    fix=f"write {d['replacement']}" if d.get("replacement") else "remove it",
                    version=version,
                )
            )
            continue
        elif name.startswith("SGL_"):
            target = "SGLANG_" + name[len("SGL_") :]
            out.append(
                Finding(
                    "env-deprecated",
                    label,
                    name,
                    f"{who} rewrites the legacy SGL_ prefix to {target}",
                    fix=f"write {target}",
                    version=version,
                )
            )
        if target in fields:
            problem = value_problem(fields[target].get("type", ""), value)
            if problem:
                out.append(
                    Finding(
                        "env-value",
                        label,
                        name,
                        f"{who}: {name}={shown}: {(problem or '').replace(value, shown)} "
                        f"({fields[target]['type']}); SGLang would use the default "
                        f"{fields[target].get('default')!r}",
                        fix=f"give {name} a valid value",
                        version=version,
                        data={"type": fields[target]["type"]},
                    )
                )
        elif target not in direct:
            near = closest(target.upper(), [*fields, *direct])
            out.append(
                Finding(
                    "env-unknown",
                    label,
                    name,
                    f"{who} neither registers nor reads {name}: it is ignored",
                    fix=(
                        f"did you mean {' or '.join(near)}?"
                        if near
                        else "remove it, or declare it in lint.site_env with the reason"
                    ),
                    version=version,
                    data={"suggestions": near},
                )
            )
    return out


def effective_env(name: str, env: Mapping[str, str], registry: Mapping[str, Any] | None) -> Any:
    """The value a worker runs with: the declared one parsed as the registry's type, else the registry's default
    (None when neither is known or the declared value does not parse)."""
    field = ((registry or {}).get("fields") or {}).get(name) or {}
    if name not in env:
        return field.get("default")
    raw, type_name = env[name], field.get("type", "EnvStr")
    if value_problem(type_name, raw):
        return None
    if type_name.startswith("EnvBool"):
        return raw.lower() in ("true", "1", "yes", "y")
    if type_name.startswith("EnvInt"):
        return int(raw)
    if type_name.startswith("EnvFloat"):
        return float(raw)
    return raw
