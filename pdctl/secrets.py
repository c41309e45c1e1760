"""Masking of secret-looking values: env vars, argv flags, URLs and free text (log tails, command lines).

A name is secret-looking when it contains (case-insensitive, as a substring) TOKEN, KEY, SECRET, PASSWORD, PASSWD,
PASSPHRASE, CREDENTIAL or AUTH, or ends in PWD after a separator (MYSQL_PWD, --db-pwd; not the shell's PWD): HF_TOKEN,
AWS_SECRET_ACCESS_KEY, API_KEY, --api-key, GITHUB_AUTH, --db-passphrase. Two count-words are exempt so
that ordinary SGLang settings stay readable: TOKENS (plural: --max-total-tokens, SGLANG_MAX_TOKENS) and TOKENIZER
(--tokenizer-path).

A URL's userinfo is a secret whatever name carries it (HTTPS_PROXY, REDIS_URL, a database URL, a flag's value, a
log line): `scheme://user:password@host` shows as `scheme://user:***@host` (the user stays, to say which account),
and a userinfo without a password, `scheme://token@host`, as `scheme://***@host` (it is often a token; pip's
convention). The userinfo runs to the URL's last `@` (a password may hold a raw `@`, `/`, `#` or `?`): in free text,
the last `@` before a space or quote; in a whole value that is a URL (an env value, an argv element or its
`--flag=`/`NAME=` value, a --var value: `mask_url_value`), the value's last `@`, whatever the password holds (a raw
quote or space too). A URL's password is also a declared secret (`secret_values`), so it is scrubbed where it
appears alone. In free text, an HTTP credential (`Authorization: Bearer X`, `Basic X`) shows as `Bearer ***`.
Pure functions; nothing here prints, logs or raises on odd input.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

MASK = "***"
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "AUTH")
_PWD_SUFFIX = re.compile(r"[_.-]PWD$")  # MYSQL_PWD, --db-pwd: the shell's own PWD and OLDPWD are paths
# an HTTP credential in a log line or an error: the scheme stays, to say what kind it was
# (Basic and Token only after `Authorization:`: as plain words they start ordinary prose, "Basic configuration")
_HTTP_CREDENTIAL = re.compile(
    r"(?P<scheme>(?:\bAuthorization:\s*(?:(?:Bearer|Basic|Token)\s+)?|\bBearer\s+))(?P<cred>[A-Za-z0-9._~+/=-]{8,})",
    re.I,
)
_BENIGN = re.compile(r"TOKENS|TOKENIZER")
#: declared secret values shorter than this are scrubbed from free text only as whole tokens (masking every "on"
#: inside words would destroy the text)
MIN_SCRUB_LEN = 4
_SHORT_PLAIN = re.compile(r"\d+|true|false|yes|no|on|off", re.I)

# a value unquoted ends at a quote: `"HF_TOKEN=x",` in a JSON text keeps its `",`; `--api-key=` is a flag's
_ENV_ASSIGN = re.compile(r"(?P<name>(?<![\w-])[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']*)")
# a flag and its value; the value may start with "-" (a secret flag's value is whatever follows it), so the value is
# matched in a lookahead and only a secret-named flag's value is replaced (`_mask_flag_values`)
_FLAG_VALUE = re.compile(
    r"(?P<flag>(?<![\w-])--?[A-Za-z][A-Za-z0-9_.-]*)(?=(?P<sep>=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']+))"
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `scheme://USERINFO@`: the userinfo runs to the LAST `@` of the URL's token (up to a space or a quote, and not into
# a next `scheme://`), as SQLAlchemy's and redis-py's parsers read it: a password holds raw `@`, `/`, `#` and `?`
# often enough (`redis://default:ab/cd@h`, `postgres://app:pa#ss@db/x`), and stopping at the path would show it.
# The price: a URL without userinfo whose path or query holds an `@` (`https://h/p?mail=a@b`, rare in what pdctl
# shows) is over-masked up to that `@`. Scheme-less `user:pw@host:5432` (libpq's host lists) is not recognised.
_URL_USERINFO = re.compile(
    r"(?P<scheme>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>(?:[^\s'\":]|:(?!//))+)@"
)
# a whole value known to be one URL needs no token rule: where it ends is known, so its userinfo runs to its last `@`
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_secret_name(name: str) -> bool:
    """True when `name` (env var or flag, any case, dashes or underscores) looks like it holds a secret."""
    up = _BENIGN.sub("", name.upper())
    return any(w in up for w in SECRET_WORDS) or bool(_PWD_SUFFIX.search(up))


def mask_value(value: str | None, name: str | None = None) -> str | None:
    """MASK for a secret value (or for any value when `name` is None); the value with its URLs' userinfo masked when
    `name` is not secret-looking. None and "" pass through, so 'unset' and 'empty' stay visible without revealing
    anything."""
    if value is None or value == "":
        return value
    if name is not None and not is_secret_name(name):
        return mask_url_value(value)
    return MASK


def mask_urls(text: str) -> str:
    """`text` with the userinfo of every URL in it masked: `http://u:pw@h` -> `http://u:***@h`, `https://tok@h` ->
    `https://***@h`. An empty password (`u:@h`) is kept."""

    def sub(m: re.Match) -> str:
        return f"{m.group('scheme')}{_masked_info(m.group('info'))}@"

    return _URL_USERINFO.sub(sub, text) if "://" in text else text


def _masked_info(info: str) -> str:
    """A userinfo as shown: `user:***` (an empty password kept empty), a lone userinfo `***`."""
    user, colon, password = info.partition(":")
    if not colon:
        return MASK
    return f"{user}:{MASK if password else ''}"


def _value_userinfo(value: str) -> tuple[int, int] | None:
    """(start, end) of the userinfo of a whole value that is a URL, `scheme://` at its start or after a `--flag=` /
    `NAME=` prefix (an argv element): up to the value's last `@`. None when it is no such URL."""
    name, eq, _ = value.partition("=")
    at = len(name) + 1 if eq and (_is_flag(name) or _NAME.fullmatch(name)) else 0
    m = _URL_START.match(value, at) or _URL_START.match(value)
    end = value.rfind("@")
    return (m.end(), end) if m is not None and end > m.end() else None


def mask_url_value(value: str) -> str:
    """A whole value (an env value, an argv element, a --var value) with its URL's userinfo masked to the value's last
    `@`, whatever characters the password holds: `redis://u:ab"cd@h` -> `redis://u:***@h` (free text would stop at the
    quote); any other value as `mask_urls` masks it."""
    span = _value_userinfo(value)
    if span is None:
        return mask_urls(value)
    start, end = span
    return value[:start] + _masked_info(value[start:end]) + value[end:]


def url_value_secrets(value: str) -> set[str]:
    """The password of a whole value that is a URL (`mask_url_value`'s reading), or those of the URLs in it
    (`url_secrets`): each as written, percent-decoded, and as it reads inside a shell-quoted word (`'` as `'"'"'`),
    of MIN_SCRUB_LEN characters or more."""
    from urllib.parse import unquote

    span = _value_userinfo(value)
    if span is None:
        return url_secrets(value)
    _, colon, password = value[span[0] : span[1]].partition(":")
    if not colon or password == MASK:
        return set()
    return {f for p in {password, unquote(password)} for f in written_forms(p) if len(f) >= MIN_SCRUB_LEN}


def written_forms(value: str) -> set[str]:
    """`value` and the forms it takes inside the texts pdctl writes, where a quote or backslash in it is escaped: a
    JSON string (a backslash before `"`), a shell single-quoted word (`'` as `'"'"'`), a systemd unit line (`"`
    escaped, `%%`, `$$`). A secret scrubbed by value is scrubbed in each."""
    import json

    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    forms.add(value.replace("'", "'\"'\"'"))
    unit = value.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    forms |= {unit, unit.replace("$", "$$")}
    return forms


def url_secrets(text: str) -> set[str]:
    """The passwords of the URLs in `text` (`scheme://user:PASSWORD@`), as written and percent-decoded, each of
    MIN_SCRUB_LEN characters or more (a shorter one is masked in its URL, not scrubbed from all text: it would
    mask every such word). A userinfo without a password is not collected: `ssh://root@h` would then mask `root`."""
    from urllib.parse import unquote

    out: set[str] = set()
    for m in _URL_USERINFO.finditer(text) if "://" in text else ():
        _, colon, password = m.group("info").partition(":")
        if colon and password != MASK:
            out.update(p for p in (password, unquote(password)) if len(p) >= MIN_SCRUB_LEN)
    return out


def mask_env(env: Mapping[str, str] | None, secrets: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `env` with the values of secret-looking names replaced by MASK, and every one of `secrets` (the
    declared secret values) scrubbed from the names and the other values too: `ZZ_<secret>=1` -> `ZZ_***=1`."""
    if not env:
        return {}
    known = [str(s) for s in secrets if s]
    out: dict[str, str] = {}
    for k, v in env.items():
        val = str(mask_value(str(v), k)) if v is not None else v
        name = mask_text(str(k), known) if known else k
        if val and val != MASK:  # any value: a URL's password (HTTPS_PROXY), a declared secret inside it
            val = mask_text(val, known)
        shown, n = name, 1
        while shown in out:  # two names that differ only by a secret stay two entries
            n += 1
            shown = f"{name}#{n}"
        out[shown] = val
    return out


def _is_flag(a: str) -> bool:
    return a.startswith("-") and len(a) > 1


def _secret_assignment(a: str) -> bool:
    """`--secret-flag=V` or `SECRET_NAME=V` (an `env` prefix), V not empty."""
    name, _, val = a.partition("=")
    return bool(val) and is_secret_name(name) and (_is_flag(name) or bool(_NAME.fullmatch(name)))


def _flag_value_spans(args: list[str]) -> list[tuple[int, int]]:
    """(first, end) index ranges of the values of secret-looking flags given as `--flag V [V ...]`: the token after
    the flag is its value whatever it starts with (`--api-key --x` holds the secret "--x"), and the tokens after
    that up to the next one starting with "-" are the rest of a list value (`--api-key a b`)."""
    spans = []
    i = 0
    while i < len(args):
        a = args[i]
        if _is_flag(a) and "=" not in a and is_secret_name(a) and i + 1 < len(args):
            j = i + 2
            while j < len(args) and not args[j].startswith("-"):
                j += 1
            spans.append((i + 1, j))
            i = j
        else:
            i += 1
    return spans


def secret_values(env: Mapping[str, str] | None, argv: Iterable[str] = ()) -> set[str]:
    """The secret values held in an env mapping and in argv flags (a URL's password in any value too), to scrub
    from free text with `mask_text`."""
    out: set[str] = set()
    for k, v in (env or {}).items():
        if v and is_secret_name(k):
            out |= written_forms(str(v))
        elif v:
            out |= url_value_secrets(str(v))
    args = [str(a) for a in argv]
    for a in args:
        out |= url_value_secrets(a)
    for first, end in _flag_value_spans(args):
        out.update(a for a in args[first:end] if a)
    out.update(a.partition("=")[2] for a in args if _secret_assignment(a))
    return out


def secret_arg_values(args: Mapping[str, Any] | None) -> set[str]:
    """The values of secret-looking flags in a declared args mapping (`{"--api-key": "x"}`; a list: every element),
    whatever they look like, and the URL passwords in any flag's value, to scrub with `mask_text`. A boolean flag
    holds none."""
    out: set[str] = set()
    for flag, value in (args or {}).items():
        if isinstance(value, bool) or value is None:
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, bool) or not str(v):
                continue
            out |= {str(v)} if is_secret_name(str(flag)) else url_value_secrets(str(v))
    return out


def mask_argv(argv: Iterable[str], secrets: Iterable[str] = ()) -> list[str]:
    """argv with the values of secret-looking flags masked: `--api-key X` -> `--api-key ***` (every element of a
    list value too, and a value starting with "-"), `--api-key=X` -> `--api-key=***`, `HF_TOKEN=x` (an `env` prefix)
    -> `HF_TOKEN=***`; every token holding one of `secrets`; and every URL's userinfo (`mask_urls`)."""
    args = [str(a) for a in argv]
    known = [str(s) for s in secrets if s]
    masked = {k for first, end in _flag_value_spans(args) for k in range(first, end)}
    out: list[str] = []
    for k, a in enumerate(args):
        if a and (k in masked or a in known):
            out.append(MASK)
        elif _secret_assignment(a):
            out.append(f"{a.partition('=')[0]}={MASK}")
        else:
            shown = mask_url_value(a)
            out.append(mask_text(shown, known) if known else shown)
    return out


def mask_nested(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of JSON-like data (dicts, lists, strings) with every string passed through `mask_text(s, secrets)`."""
    known = [str(s) for s in secrets if s]
    if isinstance(obj, dict):
        return {k: mask_nested(v, known) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [mask_nested(v, known) for v in obj]
    if isinstance(obj, str):
        return mask_text(obj, known)
    return obj


def mask_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret value replaced by MASK, and also any `SECRET_NAME=value` assignment and
    `--secret-flag value` / `--secret-flag=value` found in it (log tails, shell command lines, error messages), and
    every URL's userinfo (`mask_urls`).

    `secrets` are declared values, masked whatever their length: one of MIN_SCRUB_LEN characters or more wherever it
    appears, a shorter one where it stands as a whole token (not inside a word: secret `abc` masks `key abc` and
    `x=abc`, not `abcdef`), so that a short secret does not eat every such letter of the text. A short bare number or
    switch word (`1`, `200`, `on`: `SOME_AUTH_FLAG=1`) is not scrubbed by value: it would mask every step number,
    count and status on the screen while hiding nothing guessable; it is masked by its name as always."""
    if not text:
        return text
    text = scrub_values(text, secrets)

    def env_sub(m: re.Match) -> str:
        if is_secret_name(m.group("name")) and m.group("value") not in ("", MASK):
            return f"{m.group('name')}={MASK}"
        return m.group(0)

    text = _HTTP_CREDENTIAL.sub(lambda m: m.group("scheme") + MASK, text)
    return mask_urls(_mask_flag_values(_ENV_ASSIGN.sub(env_sub, text)))


def scrub_values(text: str, secrets: Iterable[str]) -> str:
    """`text` with every one of `secrets` (declared values) replaced by MASK, as `mask_text` scrubs them, and nothing
    else: for a text pdctl wrote itself (a check's detail naming `--api-key`), whose words are not values."""
    for s in sorted({str(s) for s in secrets if s}, key=len, reverse=True):
        if len(s) >= MIN_SCRUB_LEN:
            text = text.replace(s, MASK)
        elif not _SHORT_PLAIN.fullmatch(s):
            text = re.sub(rf"(?<![\w-]){re.escape(s)}(?![\w-])", MASK, text)
    return text


def _mask_flag_values(text: str) -> str:
    """`--secret-flag value` / `--secret-flag=value` in free text: the value replaced by MASK."""
    out, at = [], 0
    for m in _FLAG_VALUE.finditer(text):
        if m.start() < at or not is_secret_name(m.group("flag")) or m.group("value") == MASK:
            continue
        start = m.end() + len(m.group("sep"))
        out += [text[at:start], MASK]
        at = start + len(m.group("value"))
    return "".join(out) + text[at:]


def inventory_secrets(inv) -> set[str]:
    """The secret values the inventory declares (roles' env and launch flags, final_health.expect: every element of
    a list value, and values starting with "--"), to scrub from free text such as an error message carrying a log
    tail, a shell command or a gate."""
    out: set[str] = set()
    for _role, _i, inst in inv.instances():
        out |= secret_values(inst.env) | secret_arg_values(inst.args)
    for exp in inv.final_health.expect.values():
        out |= secret_values(exp.env) | secret_arg_values(exp.flags)
    return out
