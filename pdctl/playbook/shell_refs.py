"""`${...}` in a shell command text, passed as data: each becomes a reference to an environment variable that holds
its value (`${msg}` -> `"${PDCTL_VAR_msg}"`), so the shell expands the value and never parses it as code, whatever
quotes the `${...}` stands in. Quoting the value into the text cannot do that: a quoted value inside `"..."` or
`'...'` closes the author's quotes (`echo "x ${msg}"` with `$(touch F)` ran `touch F`).

The text is scanned as a POSIX shell reads it (quotes, `$(...)`, backticks, comments, here-documents) to know the
context of each `${...}`, and the reference is written for it: `"${V}"` unquoted, `${V}` inside double quotes or an
unquoted here-document, `'"${V}"'` inside single quotes. A context where a reference would be evaluated as code or
not expanded at all is refused: arithmetic (`$((...))`, `((...))`: bash evaluates a variable's text there, array
subscripts included), `$'...'`, a quoted here-document, right after a backslash. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from pdctl.playbook.vars import REF, VarError

PREFIX = (
    "PDCTL_VAR_"  # the environment variables that carry the values: `${inventory.name}` -> PDCTL_VAR_inventory_name
)


class Where(Enum):
    """The shell context a `${...}` stands in."""

    PLAIN = "unquoted"
    DOUBLE = "inside double quotes"
    SINGLE = "inside single quotes"
    HEREDOC = "in a here-document"
    # refused
    ARITH = "inside arithmetic ($((...)) or ((...)), where bash evaluates a variable's text as code)"
    ANSI_C = "inside $'...'"
    QUOTED_HEREDOC = "in a quoted here-document (<<'EOF' expands nothing)"
    ESCAPED = "right after a backslash"


REFUSED = (Where.ARITH, Where.ANSI_C, Where.QUOTED_HEREDOC, Where.ESCAPED)
_REFERENCE = {
    Where.PLAIN: '"${{{}}}"',
    Where.DOUBLE: "${{{}}}",
    Where.HEREDOC: "${{{}}}",
    Where.SINGLE: "'\"${{{}}}\"'",
}


@dataclass(frozen=True)
class Ref:
    """One `${name}` of the text: its span and the context it stands in."""

    start: int
    end: int
    name: str
    where: Where


@dataclass
class _Frame:
    kind: str  # top, subst ($(...)), backtick, double, single, ansi, arith, heredoc
    depth: int = 0  # open parentheses inside a subst or arith
    delim: str = ""  # a here-document's end line
    quoted: bool = False  # a here-document whose delimiter was quoted (no expansion)
    strip_tabs: bool = False  # <<-


_PLAIN_LIKE = ("top", "subst", "backtick")
_HEREDOC_WORD = re.compile(r"(-?)[ \t]*((?:[^\s;&|<>()]|\\.)+)")


def find_refs(text: str) -> list[Ref]:
    """Every `${name}` of `text` (not `$${`, a literal `${`), with the shell context it stands in. Pure."""
    refs: list[Ref] = []
    stack = [_Frame("top")]
    pending: list[_Frame] = []  # here-documents announced on the current line, their bodies start at its end
    i, n = 0, len(text)
    word_start = True  # a `#` here starts a comment
    while i < n:
        f = stack[-1]
        c = text[i]
        if f.kind == "heredoc" and (i == 0 or text[i - 1] == "\n"):
            line = text[i:].split("\n", 1)[0]
            if (line.lstrip("\t") if f.strip_tabs else line) == f.delim:
                stack.pop()
                i += len(line)
                if pending:
                    stack.append(pending.pop(0))
                continue
        m = REF.match(text, i)
        if m is not None:
            if m.group(1) is not None:
                refs.append(Ref(i, m.end(), m.group(1), _where(f)))
            i, word_start = m.end(), False
            continue
        if f.kind == "single":
            if c == "'":
                stack.pop()
            i += 1
            continue
        if f.kind == "heredoc" and f.quoted:
            i += 1
            continue
        if c == "\\" and f.kind != "arith":
            m = REF.match(text, i + 1)
            if m is not None:  # `\$${`: a literal; `\${x}`: the author's escape or ours? refused
                if m.group(1) is not None:
                    refs.append(Ref(i + 1, m.end(), m.group(1), Where.ESCAPED))
                i = m.end()
            else:
                i += 2
            word_start = False
            continue
        if f.kind == "ansi":
            if c == "'":
                stack.pop()
            i += 1
            continue
        if text.startswith("$((", i) or (f.kind in _PLAIN_LIKE and text.startswith("((", i)):
            stack.append(_Frame("arith"))
            i += 3 if c == "$" else 2
            continue
        if text.startswith("$(", i):
            stack.append(_Frame("subst"))
            i, word_start = i + 2, True
            continue
        if c == "`":
            if f.kind == "backtick":
                stack.pop()
            else:
                stack.append(_Frame("backtick"))
            i += 1
            continue
        if f.kind == "arith":
            if c == "(":
                f.depth += 1
            elif c == ")":
                if f.depth == 0:
                    stack.pop()
                    i += 2 if text.startswith("))", i) else 1
                    continue
                f.depth -= 1
            i += 1
            continue
        if f.kind == "double":
            if c == '"':
                stack.pop()
            i += 1
            continue
        if f.kind == "heredoc":
            i += 1
            continue
        # top, $(...), backticks: the shell's own words
        if c == "#" and word_start:
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == "'" or (c == "$" and text.startswith("$'", i)):
            stack.append(_Frame("single" if c == "'" else "ansi"))
            i += 1 if c == "'" else 2
            continue
        if c == '"':
            stack.append(_Frame("double"))
            i, word_start = i + 1, False
            continue
        if text.startswith("<<", i) and not text.startswith("<<<", i):
            hm = _HEREDOC_WORD.match(text, i + 2)
            if hm is not None:
                word = hm.group(2)
                quoted = any(q in word for q in "'\"\\")
                delim = re.sub(r"\\(.)", r"\1", word).replace("'", "").replace('"', "")
                pending.append(_Frame("heredoc", delim=delim, quoted=quoted, strip_tabs=bool(hm.group(1))))
                i = hm.end()
                continue
        if c == "\n" and pending:
            stack.append(pending.pop(0))
            i, word_start = i + 1, True
            continue
        if f.kind == "subst" and c == "(":
            f.depth += 1
        elif f.kind == "subst" and c == ")":
            if f.depth == 0:
                stack.pop()
                i += 1
                continue
            f.depth -= 1
        word_start = c in " \t\n;&|()"
        i += 1
    return refs


def _where(f: _Frame) -> Where:
    return {
        "double": Where.DOUBLE,
        "single": Where.SINGLE,
        "ansi": Where.ANSI_C,
        "arith": Where.ARITH,
        "heredoc": Where.QUOTED_HEREDOC if f.quoted else Where.HEREDOC,
    }.get(f.kind, Where.PLAIN)


def refused_refs(text: str) -> list[str]:
    """A problem for each `${...}` of `text` that stands where it cannot be passed as data. Pure."""
    return [
        f"${{{r.name}}} {r.where.value}: a value cannot be passed there as data (set it in `env` and use it as"
        ' "$NAME" outside arithmetic, or give `command` as an argv list)'
        for r in find_refs(text)
        if r.where in REFUSED
    ]


def _same_name(ref: str) -> str:
    """`${vars.x}` is `${x}`: one variable for both."""
    ref = ref.strip()
    return ref[5:] if ref.startswith("vars.") else ref


def env_name(ref: str) -> str:
    """The environment variable that carries `${ref}`: PDCTL_VAR_ and the name's letters, digits and underscores
    (`${vars.x}` as `${x}`)."""
    return PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", _same_name(ref))


def bind_refs(
    text: str, value: Callable[[str], str], taken: set[str] | frozenset[str] = frozenset()
) -> tuple[str, dict[str, str]]:
    """(`text` with each `${name}` replaced by a reference to an environment variable, {variable: value}).
    `value(name)` is the text a name stands for (it raises for an unknown name); `taken` are variable names
    already in use (the step's own `env`): a clash takes a suffix. `$${` becomes `${`. Raises VarError for a
    `${...}` in a refused context."""
    problems = refused_refs(text)
    if problems:
        raise VarError("; ".join(problems))
    env: dict[str, str] = {}
    by_ref: dict[str, str] = {}
    out, at = [], 0
    for r in find_refs(text):
        name = by_ref.get(_same_name(r.name))
        if name is None:
            base = name = env_name(r.name)
            k = 1
            while name in env or name in taken:
                k += 1
                name = f"{base}_{k}"
            by_ref[_same_name(r.name)] = name
            env[name] = value(r.name)
        out += [text[at : r.start].replace("$${", "${"), _REFERENCE[r.where].format(name)]
        at = r.end
    out.append(text[at:].replace("$${", "${"))
    return "".join(out), env
