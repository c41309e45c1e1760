"""`${...}` in a shell command text, passed as data: each becomes a reference to an environment variable that holds
its value (`${msg}` -> `"${PDCTL_VAR_msg}"`), so the shell expands the value and never parses it as code, whatever
quotes the `${...}` stands in. Quoting the value into the text cannot do that: a quoted value inside `"..."` or
`'...'` closes the author's quotes (`echo "x ${msg}"` with `$(touch F)` ran `touch F`).

The text is scanned as a POSIX shell reads it (quotes, `$(...)`, backticks, comments, here-documents) to know the
context of each `${...}` (a `#` is a comment only where it begins a word: `'x'#$((` is one word, no comment), and
the reference is written for it: `"${V}"` unquoted, `${V}` inside double quotes or an unquoted here-document,
`'"${V}"'` inside single quotes. A context where a reference would be evaluated as code or
not expanded at all is refused. Where /bin/sh is bash (RHEL, Fedora), arithmetic evaluates a variable's text as an
expression, and an array subscript in that text (`a[$(cmd)]`) runs its command substitution, so every context bash
evaluates arithmetically is refused: `$((...))`, `((...))`, `$[...]`, `let` and `declare -i`/`-n` commands,
`[[ ... ]]` with `-eq`-style operators, an array subscript (`a[...]=`, `unset 'a[...]'`, `([k]=v)`), and anything
inside another `${...}` (an offset, length or subscript there is arithmetic), including what a `$(...)` nested in
any of them prints. Also refused: any argument of `declare`, `typeset`, `local`, `export`, `readonly` (bash re-parses
a quoted `a=(...)` there and runs what it holds), `$'...'`, a quoted here-document, right after a backslash. Pure
functions.
"""

from __future__ import annotations

import dataclasses
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
    ARITH = (
        "inside arithmetic ($((...)), ((...)), $[...], let, declare -i, [[ ... -eq ... ]]),"
        " where bash evaluates a variable's text as code"
    )
    SUBSCRIPT = "inside an array subscript (name[...]), which bash evaluates as arithmetic"
    NESTED = "inside another ${...} (bash evaluates its offset, length or subscript as arithmetic)"
    DECLARE = (
        "in an argument of declare, typeset, local, export or readonly, which bash re-parses as an array"
        ' assignment (declare -a "a=(...)", or any name=value once a is an array), running what it holds'
    )
    ANSI_C = "inside $'...'"
    QUOTED_HEREDOC = "in a quoted here-document (<<'EOF' expands nothing)"
    ESCAPED = "right after a backslash"


REFUSED = (Where.ARITH, Where.SUBSCRIPT, Where.NESTED, Where.DECLARE, Where.ANSI_C, Where.QUOTED_HEREDOC, Where.ESCAPED)
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
    # top, subst ($(...)), backtick, double, single, ansi, arith ($((, (( ), arith_sq ($[), param (${), heredoc
    kind: str
    depth: int = 0  # open parentheses inside a subst or arith, open brackets inside $[...]
    delim: str = ""  # a here-document's end line
    quoted: bool = False  # a here-document whose delimiter was quoted (no expansion)
    strip_tabs: bool = False  # <<-
    # the shell's own words (top, subst, backtick): where the current one began, and what its command makes of them
    word_at: int = -1
    arith_cmd: bool = False  # `let`, `declare -i`: this simple command's words are arithmetic (or a name, -n)
    # declare, typeset, local, export, readonly: an option word may make it arith_cmd; its arguments are refused, as
    # whether bash re-parses one as `a=(...)` hangs on options and the variable's type, unknown here (`declare $o`)
    declares: bool = False
    test_at: int = -1  # inside `[[`: the index in refs of its first ${...}
    test_arith: bool = False  # that `[[ ... ]]` compares numbers (-eq ...): bash evaluates both sides


_PLAIN_LIKE = ("top", "subst", "backtick")
_ARITH = ("arith", "arith_sq")
_HEREDOC_WORD = re.compile(r"(-?)[ \t]*((?:[^\s;&|<>()]|\\.)+)")
_BREAK = " \t\n;&|()<>"  # ends a word of the shell's own text
_SEPARATOR = ";&|\n"  # ends a simple command
_DECLARES = ("declare", "typeset", "local", "export", "readonly")
_NUMERIC_TEST = ("-eq", "-ne", "-lt", "-le", "-gt", "-ge")


def find_refs(text: str) -> list[Ref]:
    """Every `${name}` of `text` (not `$${`, a literal `${`), with the shell context it stands in. Pure."""
    refs: list[Ref] = []
    stack = [_Frame("top")]
    pending: list[_Frame] = []  # here-documents announced on the current line, their bodies start at its end
    i, n = 0, len(text)
    while i < n:
        f = stack[-1]
        c = text[i]
        word_start = False  # a `#` here starts a comment: it begins a word (the shell's own words only)
        if f.kind == "heredoc" and (i == 0 or text[i - 1] == "\n"):
            line = text[i:].split("\n", 1)[0]
            if (line.lstrip("\t") if f.strip_tabs else line) == f.delim:
                stack.pop()
                i += len(line)
                if pending:
                    stack.append(pending.pop(0))
                continue
        if f.kind in _PLAIN_LIKE:  # the shell's own words: which command they make
            word_start = f.word_at < 0  # whatever token (quotes, $(...), $((...))) began the current word
            if c in _BREAK and f.word_at >= 0:
                _end_word(f, text[f.word_at : i], refs)
            elif c not in _BREAK and f.word_at < 0 and not text.startswith("\\\n", i):  # `\<newline>`: no word
                f.word_at = i
            if c in _SEPARATOR and f.test_at < 0:
                f.arith_cmd = f.declares = False
        m = REF.match(text, i)
        if m is not None:
            if m.group(1) is not None:
                refs.append(Ref(i, m.end(), m.group(1), _where(stack, text, i)))
            elif _expands(f):  # `$${`: the shell's own `${...}`
                stack.append(_Frame("param"))
            i = m.end()
            continue
        if f.kind == "single":
            if c == "'":
                stack.pop()
            i += 1
            continue
        if f.kind == "heredoc" and f.quoted:
            i += 1
            continue
        if c == "\\" and f.kind not in _ARITH:
            m = REF.match(text, i + 1)
            if m is not None:  # `\$${`: a literal; `\${x}`: the author's escape or ours? refused
                if m.group(1) is not None:
                    refs.append(Ref(i + 1, m.end(), m.group(1), Where.ESCAPED))
                i = m.end()
            else:
                i += 2
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
        if text.startswith("$[", i):  # bash's old `$[...]` arithmetic (dash prints it as text)
            stack.append(_Frame("arith_sq"))
            i += 2
            continue
        if text.startswith("${", i):  # the shell's own `${x:...${y}...}` (not a ref: it holds a brace)
            stack.append(_Frame("param"))
            i += 2
            continue
        if text.startswith("$(", i):
            stack.append(_Frame("subst"))
            i += 2
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
        if f.kind == "arith_sq":
            if c == "[":
                f.depth += 1
            elif c == "]":
                if f.depth == 0:
                    stack.pop()
                else:
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
        if f.kind == "param":  # quotes inside `${...}` hide its braces (bash), a `}` ends it
            if c == "}":
                stack.pop()
            elif c == "'" or c == '"':
                stack.append(_Frame("single" if c == "'" else "double"))
            i += 1
            continue
        # top, $(...), backticks: the shell's own words
        if c == "#" and word_start:
            f.word_at = -1  # a comment is no word
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == "'" or (c == "$" and text.startswith("$'", i)):
            stack.append(_Frame("single" if c == "'" else "ansi"))
            i += 1 if c == "'" else 2
            continue
        if c == '"':
            stack.append(_Frame("double"))
            i += 1
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
            i += 1
            continue
        if f.kind == "subst" and c == "(":
            f.depth += 1
        elif f.kind == "subst" and c == ")":
            if f.depth == 0:
                stack.pop()
                i += 1
                continue
            f.depth -= 1
        i += 1
    for f in stack:  # the text ends a word (a closing `]]`)
        if f.kind in _PLAIN_LIKE and f.word_at >= 0:
            _end_word(f, text[f.word_at :], refs)
    return refs


def _expands(f: _Frame) -> bool:
    """Whether `$` starts an expansion in this frame (not in single quotes, $'...' or a quoted here-document)."""
    return f.kind not in ("single", "ansi") and not (f.kind == "heredoc" and f.quoted)


def _end_word(f: _Frame, word: str, refs: list[Ref]) -> None:
    """A word of the shell's own text ended: note what its command makes of the next words (`let`, `declare -i`,
    `[[ ... -eq ... ]]`). At a `]]` that compared numbers, its `${...}` are refused as arithmetic. Changes `f`,
    `refs`."""
    f.word_at = -1
    bare = re.sub(r"[\"'\\]", "", word)  # `"let"` is still let
    if bare == "let":
        f.arith_cmd = True
    elif bare in _DECLARES:
        f.declares = True
    elif f.declares and re.fullmatch(r"-[A-Za-z]*[in][A-Za-z]*", bare):
        f.arith_cmd = True  # -i: values are arithmetic; -n: a value is a name, a subscript in it evaluated on use
    elif bare == "[[" and f.test_at < 0:
        f.test_at, f.test_arith = len(refs), False
    elif bare in _NUMERIC_TEST and f.test_at >= 0:
        f.test_arith = True
    elif bare == "]]" and f.test_at >= 0:
        if f.test_arith:
            for k in range(f.test_at, len(refs)):
                if refs[k].where not in REFUSED:
                    refs[k] = dataclasses.replace(refs[k], where=Where.ARITH)
        f.test_at = -1


def _where(stack: list[_Frame], text: str, at: int) -> Where:
    """The context of a `${...}` at `at`, from every frame it stands in: arithmetic anywhere around it (a `$(...)`
    inside `$((...))` prints into arithmetic) first."""
    if any(g.kind in _ARITH or g.arith_cmd for g in stack):
        return Where.ARITH
    if any(g.kind == "param" for g in stack):
        return Where.NESTED
    if any(g.declares for g in stack):  # in any quotes: a reference is a quoted word, what bash re-parses there
        return Where.DECLARE
    f = stack[-1]
    where = {
        "double": Where.DOUBLE,
        "single": Where.SINGLE,
        "ansi": Where.ANSI_C,
        "heredoc": Where.QUOTED_HEREDOC if f.quoted else Where.HEREDOC,
    }.get(f.kind, Where.PLAIN)
    if where in REFUSED:
        return where
    for g in reversed(stack):  # the words it is part of, from the innermost out (a here-document's body is no word)
        if g.kind == "heredoc":
            break
        if g.kind in _PLAIN_LIKE and g.word_at >= 0 and _open_subscript(text[g.word_at : at]):
            return Where.SUBSCRIPT
    return where


def _open_subscript(word: str) -> bool:
    """Whether a shell word's text (up to a `${...}`) ends inside an array subscript: it begins with a variable name
    and `[`, quotes aside (`a[...]=1`; `unset 'a[...]'` and `printf -v "a[...]"` take it as a name too), or with an
    unquoted `[` (`arr=([...]=v)`), and that `[` is not closed yet, counting quoted brackets or not (bash skips a
    quoted `]` in an assignment's subscript). A `$(` or a backtick inside it: open (what it prints is unknown)."""
    bare = re.sub(r"[\"'\\]", "", word)
    if not (word.startswith("[") or re.match(r"[A-Za-z_][A-Za-z0-9_]*\[", bare)):
        return False
    at = word.index("[")
    inner = word[at + 1 :]
    if "`" in inner or "$(" in inner:
        return True
    return _unclosed(inner, quoted=True) or _unclosed(inner, quoted=False)


def _unclosed(inner: str, *, quoted: bool) -> bool:
    """Whether `inner` (after a subscript's `[`) leaves it open; `quoted`: brackets inside quotes do not count."""
    depth, quote, i = 1, "", 0
    while i < len(inner):
        c = inner[i]
        if quoted and quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1
        elif quoted and c in "'\"" and quote in ("", c):
            quote = "" if quote else c
        elif not quote and c == "[":
            depth += 1
        elif not quote and c == "]":
            depth -= 1
            if depth == 0:
                return False
        i += 1
    return True


def refused_refs(text: str) -> list[str]:
    """A problem for each `${...}` of `text` that stands where it cannot be passed as data. Pure."""
    return [
        f"${{{r.name}}} {r.where.value}: a value cannot be passed there as data (set it in `env` and use it as"
        ' "$NAME" outside arithmetic and array subscripts, or give `command` as an argv list)'
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
