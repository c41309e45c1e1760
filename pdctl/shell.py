"""Quoting helpers: every value that reaches a POSIX shell goes through shlex.quote here.

Pure functions, no I/O. Use `quote_argv` for a command line, `env_assignments` for `NAME=value` prefixes and
`env_command` for `env -i`-free "run this argv with these variables" strings.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def quote(value: object) -> str:
    """Quote one value for a POSIX shell (str() first)."""
    return shlex.quote(str(value))


def quote_argv(argv: Iterable[object]) -> str:
    """A shell command line that runs exactly `argv` (each element quoted)."""
    return " ".join(quote(a) for a in argv)


def check_env_name(name: str) -> str:
    """Return `name` if it is a valid environment variable name; raise ValueError otherwise."""
    if not _ENV_NAME.match(name):
        raise ValueError(f"invalid environment variable name {name!r}")
    return name


def env_assignments(env: Mapping[str, object] | None) -> str:
    """`A='x y' B=1` for `env` (names validated, values quoted), in the mapping's order. Empty string if none."""
    if not env:
        return ""
    return " ".join(f"{check_env_name(k)}={quote(v)}" for k, v in env.items())


def env_command(argv: Iterable[object], env: Mapping[str, object] | None = None) -> str:
    """`env A='x' -- argv...`-style command: runs `argv` with `env` added to the inherited environment."""
    cmd = quote_argv(argv)
    assigns = env_assignments(env)
    return f"env {assigns} {cmd}" if assigns else cmd


def export_prefix(env: Mapping[str, object] | None) -> str:
    """`export A='x' B='y'; ` for prefixing a shell snippet, or empty string if no env."""
    assigns = env_assignments(env)
    return f"export {assigns}; " if assigns else ""


def python_oneliner(python: str, code: str, *args: object) -> str:
    """A shell command that runs `python -c code args...`, everything quoted."""
    return quote_argv([python, "-c", code, *args])
