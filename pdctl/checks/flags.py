"""Live flags and env of a role's main process against the declared ones (the seed's `tr '\\0' ...| grep`).

Pure: `judge_flags(label, argv, env, declared_args, declared_env)` -> one CheckResult per declared flag and env var
(layer "flags"). Declared flag values follow the inventory's `args` dict:
  true        the flag is present (a bare store_true flag, or `--flag=true`)
  false       the flag is absent (present = drift)
  scalar      `--flag value` or `--flag=value`; the last occurrence wins, as with argparse; numbers compare as numbers
  list        the values after the flag (several after one flag, or one per repeated flag), in order
Env values compare as exact strings. Values of secret-looking names are masked in observed, expected and detail;
`scrub_secrets` then scrubs the declared secret values (and the live process's own) from every row, since a value of
an ordinary name can hold one (`EXTRA=prefix-<HF_TOKEN>-suffix`).
Abbreviated flags (argparse prefix matching) are not resolved: `--cuda-graph-max-bs` is not
`--cuda-graph-max-bs-decode`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

from pdctl.checks.result import NEXT_DEPLOY, CheckResult, Status
from pdctl.secrets import MASK, is_secret_name, scrub_values

LAYER = "flags"


def flag_occurrences(argv: Sequence[str], flag: str) -> list[list[str]]:
    """For each occurrence of `flag` in argv, the values given to it: `--f=v` -> [v]; `--f a b` -> [a, b] (tokens up
    to the next `--option`); a bare `--f` -> []. Tokens after a lone `--` are positional and ignored."""
    out: list[list[str]] = []
    i, n = 0, len(argv)
    while i < n:
        tok = argv[i]
        if tok == "--":
            break
        if tok == flag:
            vals = []
            j = i + 1
            while j < n and not argv[j].startswith("--"):
                vals.append(argv[j])
                j += 1
            out.append(vals)
            i = j
            continue
        if tok.startswith(flag + "="):
            out.append([tok[len(flag) + 1 :]])
        i += 1
    return out


def _same(expected: Any, found: str) -> bool:
    if isinstance(expected, bool):
        return found.lower() == str(expected).lower()
    if isinstance(expected, (int, float)):
        try:
            return float(found) == float(expected)
        except ValueError:
            return False
    return found == str(expected)


def _show(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def _judge_one_flag(label: str, argv: Sequence[str], flag: str, want: Any) -> CheckResult:
    occ = flag_occurrences(argv, flag)
    secret = is_secret_name(flag)
    data: dict[str, Any] = {"kind": "flag", "occurrences": len(occ)}

    def mk(status: Status, observed: str, expected: str, detail: str = "") -> CheckResult:
        if secret:
            observed = MASK if observed not in ("absent", "present", "") else observed
            expected = MASK if expected not in ("absent", "present", "") else expected
        return CheckResult(
            LAYER,
            label,
            flag,
            status,
            observed=observed,
            expected=expected,
            detail=detail,
            data=data,
            next_step=NEXT_DEPLOY if status is Status.FAIL else "",
        )

    if want is False or want is None:
        if not occ:
            return mk(Status.PASS, "absent", "absent")
        shown = "present" if not occ[-1] else _show(occ[-1])
        return mk(Status.FAIL, shown, "absent", f"drift: {flag} is on the live command line but declared false")
    if not occ:
        return mk(
            Status.FAIL,
            "absent",
            "present" if want is True else _show(want),
            f"drift: {flag} missing from the live command line",
        )
    if want is True:
        last = occ[-1]
        if not last or (len(last) == 1 and last[0].lower() == "true"):
            return mk(Status.PASS, "present", "present")
        if len(last) == 1 and last[0].lower() == "false":
            return mk(Status.FAIL, "false", "present", f"drift: {flag}=false on the live command line")
        # `--flag value` where the value may be a positional argument: presence is what was asked
        return mk(Status.PASS, "present", "present", f"followed by {_show(last) if not secret else MASK}")
    if isinstance(want, list):
        found = [v for vals in occ for v in vals] if len(occ) > 1 else occ[0]
        ok = len(found) == len(want) and all(_same(w, f) for w, f in zip(want, found))
        return mk(
            Status.PASS if ok else Status.FAIL, _show(found), _show(want), "" if ok else f"drift: {flag} values differ"
        )
    last = occ[-1]
    if len(occ) > 1:
        data["note"] = f"{flag} given {len(occ)} times; the last one wins"
    if len(last) != 1:
        return mk(
            Status.FAIL,
            _show(last) if last else "present without a value",
            _show(want),
            f"drift: {flag} expects one value",
        )
    ok = _same(want, last[0])
    return mk(Status.PASS if ok else Status.FAIL, last[0], _show(want), "" if ok else f"drift: {flag} value differs")


def _judge_one_env(label: str, env: Mapping[str, str] | None, name: str, want: str) -> CheckResult:
    secret = is_secret_name(name)
    data = {"kind": "env", "masked": secret}
    shown_want = MASK if secret and want else want
    if env is None:
        return CheckResult(
            LAYER,
            label,
            f"env:{name}",
            Status.WARN,
            observed="unreadable",
            expected=shown_want,
            detail="cannot read /proc/PID/environ (needs the process owner or root): not verified",
            data=data,
        )
    if name not in env:
        return CheckResult(
            LAYER,
            label,
            f"env:{name}",
            Status.FAIL,
            observed="unset",
            expected=shown_want,
            detail=f"drift: {name} is not in the live environment",
            data=data,
            next_step=NEXT_DEPLOY,
        )
    found = env[name]
    ok = found == str(want)
    shown_found = MASK if secret and found else found
    detail = ""
    if not ok:
        detail = f"drift: {name} differs" + (" (values masked)" if secret else "")
    return CheckResult(
        LAYER,
        label,
        f"env:{name}",
        Status.PASS if ok else Status.FAIL,
        observed=shown_found,
        expected=shown_want,
        detail=detail,
        data=data,
        next_step="" if ok else NEXT_DEPLOY,
    )


def judge_flags(
    label: str,
    argv: Sequence[str],
    env: Mapping[str, str] | None,
    declared_args: Mapping[str, Any],
    declared_env: Mapping[str, str],
) -> list[CheckResult]:
    """One CheckResult per declared flag, then per declared env var. Pure; never raises on odd argv."""
    results = [_judge_one_flag(label, list(argv), flag, want) for flag, want in declared_args.items()]
    results += [_judge_one_env(label, env, name, want) for name, want in declared_env.items()]
    return results


def flag_names(argv: Sequence[str]) -> list[str]:
    """The `--flag` names in argv, in order, without values (`--f=v` -> `--f`); stops at a lone `--`."""
    names = []
    for tok in argv:
        if tok == "--":
            break
        if tok.startswith("--") and len(tok) > 2:
            names.append(tok.split("=", 1)[0])
    return list(dict.fromkeys(names))


def judge_undeclared(label: str, argv: Sequence[str], rendered: Sequence[str]) -> list[CheckResult]:
    """A flag on the live command line that the rendered launch command does not have is drift too: someone
    started the process by hand, or the inventory lost a flag the running process still has. One FAIL each."""
    known = set(flag_names(rendered))
    return [
        CheckResult(
            LAYER,
            label,
            flag,
            Status.FAIL,
            observed="present",
            expected="not in the inventory",
            detail=f"drift: {flag} is on the live command line but not declared; declare it or redeploy (pdctl deploy)",
            next_step=NEXT_DEPLOY,
        )
        for flag in flag_names(argv)
        if flag not in known
    ]


def judge_version(label: str, server_info: Any) -> CheckResult | None:
    """The version a running worker reports in /server_info, as a passing row of the flags layer, so that which
    SGLang (or bundled engine) each process runs is on the report; None when it reports none (left out: an
    unknown version is no drift). `pdctl lint` judges versions against each other (rule version-mismatch)."""
    if not isinstance(server_info, dict) or not server_info.get("version"):
        return None
    version = str(server_info["version"])
    engine = str(server_info.get("engine") or "sglang")
    return CheckResult(
        LAYER,
        label,
        "version",
        Status.PASS,
        observed=f"{engine} {version}",
        expected="reported",
        detail="what the running process reports in /server_info",
        data={"kind": "version", "version": version, "engine": engine},
    )


def scrub_secrets(results: Iterable[CheckResult], secrets: Iterable[str]) -> list[CheckResult]:
    """The results with every one of `secrets` (the inventory's declared secret values, the live process's own)
    scrubbed from their name, observed, expected, detail and data strings, as `render` masks them: an env value of a
    name that does not look secret can contain one (`EXTRA=prefix-<HF_TOKEN>-suffix`). Only the values are scrubbed:
    the judge's own words (`drift: --api-key missing`) stay. Pure."""
    known = frozenset(str(s) for s in secrets if s)
    if not known:
        return list(results)

    def scrub(obj: Any) -> Any:
        if isinstance(obj, str):
            return scrub_values(obj, known)
        if isinstance(obj, dict):
            return {k: scrub(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [scrub(v) for v in obj]
        return obj

    return [
        dataclasses.replace(
            r,
            name=scrub(r.name),
            observed=scrub(r.observed),
            expected=scrub(r.expected),
            detail=scrub(r.detail),
            data=scrub(r.data),
        )
        for r in results
    ]
