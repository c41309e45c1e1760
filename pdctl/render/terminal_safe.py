"""Values from an inventory or the audit log made safe to show on a terminal. A control character (ESC, a newline,
a tab, ...) is shown as its escape (`\\x1b`, `\\n`), as `repr` shows the SSH banner a host sends, so a value can
neither redraw the screen nor split a line. Pure; --json keeps the exact values and never goes through here."""

from __future__ import annotations

import shlex


def _escape(ch: str) -> str:
    return repr(ch)[1:-1]  # '\x1b', '\n', '\u2028': Python's own escapes


def printable(value: object) -> str:
    """`value` as text with every non-printable character escaped; printable text (CJK included) unchanged."""
    s = str(value)
    if s.isprintable():
        return s
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in s)


def _bash_escape(ch: str) -> str:
    n = ord(ch)
    if ch in "\n\t\r":
        return repr(ch)[1:-1]
    if n < 0x80:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def shell_word(value: object) -> str:
    """`value` quoted for a shell, on one line: shlex.quote, or bash's $'...' when it holds a control character
    (the line still runs exactly `value` when pasted into bash)."""
    s = str(value)
    if s.isprintable():
        return shlex.quote(s)
    body = "".join(
        ch if ch.isprintable() and ch not in "\\'" else ("\\" + ch if ch in "\\'" else _bash_escape(ch)) for ch in s
    )
    return f"$'{body}'"


def shell_line(argv) -> str:
    """A command line of `argv` for the screen: each word as shell_word."""
    return " ".join(shell_word(a) for a in argv)


def env_line(env) -> str:
    """`NAME=value ...` for the screen, each value as shell_word (quoted like a command line)."""
    return " ".join(f"{printable(k)}={shell_word(v)}" for k, v in env.items())
