"""Masking of secret-looking values: env vars, argv flags and free text (log tails, command lines).

A name is secret-looking when it contains (case-insensitive, as a substring) TOKEN, KEY, SECRET, PASSWORD, PASSWD,
CREDENTIAL or AUTH: HF_TOKEN, AWS_SECRET_ACCESS_KEY, API_KEY, --api-key, GITHUB_AUTH. Two count-words are exempt so
that ordinary SGLang settings stay readable: TOKENS (plural: --max-total-tokens, SGLANG_MAX_TOKENS) and TOKENIZER
(--tokenizer-path). Pure functions; nothing here prints, logs or raises on odd input.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

MASK = "***"
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_BENIGN = re.compile(r"TOKENS|TOKENIZER")
#: values shorter than this are not scrubbed from free text (masking "1" or "on" everywhere would destroy it)
MIN_SCRUB_LEN = 4

_ENV_ASSIGN = re.compile(r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\"[^\"]*\"|'[^']*'|[^\s]*)")
_FLAG_VALUE = re.compile(r"(?P<flag>(?<![\w-])--?[A-Za-z][A-Za-z0-9_.-]*)(?P<sep>=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s-][^\s]*)")


def is_secret_name(name: str) -> bool:
    """True when `name` (env var or flag, any case, dashes or underscores) looks like it holds a secret."""
    up = _BENIGN.sub("", name.upper())
    return any(w in up for w in SECRET_WORDS)


def mask_value(value: str | None, name: str | None = None) -> str | None:
    """MASK for a secret value (or for any value when `name` is None); the value itself when `name` is not
    secret-looking. None and "" pass through, so 'unset' and 'empty' stay visible without revealing anything."""
    if value is None or value == "":
        return value
    if name is not None and not is_secret_name(name):
        return value
    return MASK


def mask_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """A copy of `env` with the values of secret-looking names replaced by MASK."""
    if not env:
        return {}
    return {k: (mask_value(str(v), k) if v is not None else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str] | None, argv: Iterable[str] = ()) -> set[str]:
    """The secret values held in an env mapping and in argv flags, to scrub from free text with `mask_text`."""
    out: set[str] = set()
    for k, v in (env or {}).items():
        if v and is_secret_name(k):
            out.add(str(v))
    args = list(argv)
    for i, a in enumerate(args):
        if a.startswith("-") and "=" in a:
            flag, val = a.split("=", 1)
            if is_secret_name(flag) and val:
                out.add(val)
        elif a.startswith("-") and is_secret_name(a) and i + 1 < len(args) and not args[i + 1].startswith("--"):
            if args[i + 1]:
                out.add(args[i + 1])
        elif not a.startswith("-") and "=" in a:
            name, val = a.split("=", 1)
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and is_secret_name(name) and val:
                out.add(val)
    return out


def mask_argv(argv: Iterable[str]) -> list[str]:
    """argv with the values of secret-looking flags masked: `--api-key X` -> `--api-key ***`,
    `--api-key=X` -> `--api-key=***`, `HF_TOKEN=x` (an `env` prefix) -> `HF_TOKEN=***`."""
    args = [str(a) for a in argv]
    out: list[str] = []
    mask_next = False
    for a in args:
        if mask_next:
            mask_next = False
            if not a.startswith("--"):
                out.append(MASK if a else a)
                continue
        if a.startswith("-") and "=" in a:
            flag, val = a.split("=", 1)
            out.append(f"{flag}={MASK}" if is_secret_name(flag) and val else a)
        elif a.startswith("-") and len(a) > 1 and is_secret_name(a):
            out.append(a)
            mask_next = True
        elif "=" in a and not a.startswith("-"):
            name, val = a.split("=", 1)
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and is_secret_name(name) and val:
                out.append(f"{name}={MASK}")
            else:
                out.append(a)
        else:
            out.append(a)
    return out


def mask_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret value replaced by MASK, and also any `SECRET_NAME=value` assignment and
    `--secret-flag value` / `--secret-flag=value` found in it (log tails, shell command lines, error messages).

    Values shorter than MIN_SCRUB_LEN characters are not scrubbed by value (they still are by name)."""
    if not text:
        return text
    for s in sorted({str(s) for s in secrets if s}, key=len, reverse=True):
        if len(s) >= MIN_SCRUB_LEN:
            text = text.replace(s, MASK)

    def env_sub(m: re.Match) -> str:
        if is_secret_name(m.group("name")) and m.group("value") not in ("", MASK):
            return f"{m.group('name')}={MASK}"
        return m.group(0)

    def flag_sub(m: re.Match) -> str:
        if is_secret_name(m.group("flag")) and m.group("value") != MASK:
            return f"{m.group('flag')}{m.group('sep')}{MASK}"
        return m.group(0)

    text = _ENV_ASSIGN.sub(env_sub, text)
    return _FLAG_VALUE.sub(flag_sub, text)
