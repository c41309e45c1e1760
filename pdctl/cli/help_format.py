"""pdctl's `--help` screen, drawn with the standard library only.

typer draws help with rich (rich.markdown, markdown_it, pygments: ~75 ms before the first line shows). This draws
the same screen: the usage line, the help paragraphs, then "Arguments", "Options" and "Commands" boxes with the
same box characters and columns (long option, short option, value placeholder, help with its [env var: X],
[default: X] and [required] notes). Text wraps to the terminal (COLUMNS honoured) and never inside an option name,
a placeholder or any other word.

A command's examples are a paragraph of its docstring that starts with `\\b` and the line `Examples:`, one example a
line, `COMMAND  # what it does`, put after the first paragraph (the summary the group's help lists) so they are on the
first lines of the screen. Each example is drawn on one line, the comments aligned, when they fit; else the comment
goes under its command, indented: a command line is never wrapped, so it can be copied as it stands."""

from __future__ import annotations

import inspect
import re
import shutil
import textwrap
from enum import Enum

MIN_WIDTH = 40  # narrower than this, lines run past the edge rather than squeeze names
MIN_HELP_WIDTH = 24  # a help column narrower than this goes under its option instead
STACKED_INDENT = 4
DEPRECATED = "(deprecated)"


def screen_width(ctx) -> int:
    """The width to draw at: the context's terminal_width (CliRunner, scripts/gen_cli_reference.py), else the
    terminal's (COLUMNS first; 80 when stdout is not a terminal), capped by max_content_width when set."""
    width = getattr(ctx, "terminal_width", None) or shutil.get_terminal_size().columns
    cap = getattr(ctx, "max_content_width", None)
    return max(MIN_WIDTH, min(width, cap) if cap else width)


def wrap(text: str, width: int) -> list[str]:
    """Word-wrap without breaking a word, at a hyphen or anywhere else (`--max-new-tokens` stays whole)."""
    return textwrap.wrap(text, max(1, width), break_long_words=False, break_on_hyphens=False) or [""]


def paragraphs(text: str | None) -> list[list[str]]:
    """Help text as paragraphs of lines to wrap: each paragraph one line, except one that starts with \\b, which
    keeps its lines (as in click). Anything after a form feed is dropped (click's convention for notes)."""
    text = inspect.cleandoc(text or "").partition("\f")[0].strip("\n")
    out = []
    for para in text.split("\n\n") if text else []:
        if para.startswith("\b"):
            out.append(para[1:].lstrip("\n").splitlines())
        else:
            out.append([" ".join(para.split())])
    return out


EXAMPLES_HEAD = "Examples:"
EXAMPLE_INDENT = 3  # under the heading's one space, as a box's content is under its edge
_EXAMPLE = re.compile(r"^\s*(?P<command>\S.*?)\s+#\s(?P<what>.*)$")


def example_lines(lines: list[str], width: int) -> list[str]:
    """An examples paragraph's lines after its heading (`pdctl storm --seed 7  # the same schedule again`) drawn at
    `width`: one line each with the `#` comments aligned when every one fits, else each comment on the lines under its
    command. A line without a `#` comment is a command alone. Pure."""
    pairs = []
    for line in (ln for ln in lines if ln.strip()):
        m = _EXAMPLE.match(line)
        pairs.append((m.group("command"), m.group("what").strip()) if m else (line.strip(), ""))
    pad = " " * EXAMPLE_INDENT
    column = max(len(cmd) for cmd, _ in pairs) if pairs else 0
    if all(len(pad) + column + 4 + len(what) <= width for _, what in pairs):
        return [(f"{pad}{cmd.ljust(column)}  # {what}" if what else pad + cmd).rstrip() for cmd, what in pairs]
    out = []  # else each comment under its command, all alike: a mix of both reads as misaligned
    under = pad + "  # "
    for cmd, what in pairs:
        out.append(pad + cmd)
        out += [under + w for w in wrap(what, width - len(under))] if what else []
    return out


def _wrapped(lines: list[str], width: int) -> list[str]:
    return [w for line in lines for w in wrap(line, width)]


def box(title: str, body: list[str], width: int) -> list[str]:
    """Rounded box with the title in its top edge; a body line too long for it runs past the right edge."""
    inner = width - 4
    top = f"╭─ {title} " + "─" * max(0, width - len(title) - 5) + "╮"
    return [top, *(f"│ {line.ljust(inner)} │" for line in body), "╰" + "─" * (width - 2) + "╯"]


def table(rows: list[tuple[list[str], list[str]]], inner: int) -> list[str]:
    """Rows of (fixed cells, help notes) laid out as typer's rich table: each fixed column as wide as its widest
    cell with one space of padding each side (none before the first), then the help column in what is left. The
    notes share one line when they fit it, else each starts a line. If the help column would be too narrow, the
    help goes under its row, indented."""
    if not rows:
        return []
    ncols = len(rows[0][0])
    widths = [max(len(cells[i]) for cells, _ in rows) for i in range(ncols)]
    offset = sum(widths) + 2 * ncols
    stacked = inner - offset < MIN_HELP_WIDTH
    help_width = inner - STACKED_INDENT if stacked else inner - offset
    out = []
    for cells, notes in rows:
        left = "".join(f" {c.ljust(w)} " if i else f"{c.ljust(w)} " for i, (c, w) in enumerate(zip(cells, widths)))
        lines = _notes_lines(notes, help_width)
        if stacked:
            out.append(left.rstrip())
            out.extend((" " * STACKED_INDENT + ln).rstrip() for ln in lines if ln)
        else:
            out.append((left + " " + lines[0]).rstrip())
            out.extend((" " * offset + ln).rstrip() for ln in lines[1:])
    return out


def _notes_lines(notes: list[str], width: int) -> list[str]:
    notes = [n for n in notes if n]
    if not notes:
        return [""]
    one_line = " ".join(notes)
    if "\n" not in one_line and len(one_line) <= width:
        return [one_line]
    return [w for note in notes for w in _wrapped(note.split("\n"), width)]


# -- what the boxes hold, read from typer's command and parameter objects -----------------------------------------


def _param_help(param) -> str:
    """An option's help: paragraphs on consecutive lines, a \\b paragraph keeping its lines."""
    return "\n".join("\n".join(p) for p in paragraphs(getattr(param, "help", None)))


def _param_notes(param, ctx) -> list[str]:
    notes = [_param_help(param)]
    envvar = getattr(param, "envvar", None)
    if envvar is None and getattr(param, "allow_from_autoenv", False) and ctx.auto_envvar_prefix and param.name:
        envvar = f"{ctx.auto_envvar_prefix}_{param.name.upper()}"
    if envvar and getattr(param, "show_envvar", False):
        notes.append(f"[env var: {envvar if isinstance(envvar, str) else ', '.join(map(str, envvar))}]")
    default = _default_text(param, ctx)
    if default:
        notes.append(f"[default: {default}]")
    if param.required:
        notes.append("[required]")
    return notes


def _default_text(param, ctx) -> str:
    """The default as typer shows it (an enum's value, `(dynamic)`, nothing for an unset flag), only where typer
    shows one (show_default, on by default in typer's options and arguments), from click's public
    `get_default(ctx, call=False)`; typer's own helpers for it are private."""
    show = getattr(param, "show_default", None)
    if isinstance(show, str):
        return f"({show})"
    if not (show or ctx.show_default):
        return ""
    resilient, ctx.resilient_parsing = ctx.resilient_parsing, True  # the default as declared: no type cast
    try:
        value = param.get_default(ctx, call=False)
    finally:
        ctx.resilient_parsing = resilient
    return "" if value is None else _default_string(param, value)


def _default_string(param, value) -> str:
    if isinstance(value, (list, tuple)):
        parts = [_default_string(param, v) for v in value]
        return ", ".join(parts) if any(parts) else ""
    if isinstance(value, Enum):
        return str(value.value)
    if inspect.isfunction(value):
        return "(dynamic)"
    if getattr(param, "is_bool_flag", False):  # --x/--no-x shows the name that is on; a lone flag shows nothing
        if param.secondary_opts:
            return (param.opts[0] if param.default and param.opts else param.secondary_opts[0]).lstrip("-/+")
        if not value:
            return ""
    return "" if value is None else str(value)


def _param_cells(param, ctx) -> list[str]:
    """[long options, short options (an argument's name), secondary long, secondary short, placeholder]."""
    is_argument = param.param_type_name == "argument"
    name: str = param.name or ""  # an argument's own name, whatever typer version draws the usage line
    if is_argument and param.metavar is None and param.nargs != 1:
        name += "..."
    long_: list[str] = []
    short: list[str] = []
    for opt in param.opts:
        (long_ if "--" in opt else short).append(name if is_argument and "--" not in opt else opt)
    sec_long = [o for o in param.secondary_opts if "--" in o]
    sec_short = [o for o in param.secondary_opts if "--" not in o]
    placeholder = _placeholder(param, ctx)
    return [",".join(long_), ",".join(short), ",".join(sec_long), ",".join(sec_short), placeholder]


def _placeholder(param, ctx) -> str:
    """`<int>`, `<path>`, `<list[str]>`, `<int range> [x>=1]`: the value's kind as the parameter's public
    `get_help_record` shows it (typer 0.29 has no click type on a parameter), the range from its bounds; a
    flag's metavar is "" (see cli.common)."""
    if param.metavar is not None:
        return param.metavar
    ptype = getattr(param, "type", None)
    record = param.get_help_record(ctx)
    shown = _SHOWN_KIND.search(record[0]) if record else None
    kind = shown.group(1) if shown else getattr(ptype, "name", "") or "value"
    if kind.startswith("list[") and kind.endswith("]"):
        kind = kind[5:-1]
    text = f"<list[{kind}]>" if getattr(param, "multiple", False) else f"<{kind}>"
    bounds = ptype if hasattr(ptype, "min") else param  # typer 0.29 keeps a range's bounds on the parameter
    low, high = getattr(bounds, "min", None), getattr(bounds, "max", None)
    if low is None and high is None:
        return text
    ge = ">" if getattr(bounds, "min_open", False) else ">="
    le = "<" if getattr(bounds, "max_open", False) else "<="
    if high is None:
        return f"{text} [x{ge}{low}]"
    if low is None:
        return f"{text} [x{le}{high}]"
    return f"{text} [{low}{'<' if ge == '>' else '<='}x{le}{high}]"


_SHOWN_KIND = re.compile(r" <([^<>]+)>$")  # "-n, --lines <int range>" -> "int range"


def _param_box(title: str, params: list, ctx, width: int) -> list[str]:
    rows = [(_param_cells(p, ctx), _param_notes(p, ctx)) for p in params]
    if any(p.required for p in params):
        rows = [(["*" if p.required else "", *cells], notes) for p, (cells, notes) in zip(params, rows)]
    return box(title, table(rows, width - 4), width) if rows else []


def _short_help(command) -> str:
    """A command's line in its group's box: its short_help, else the first paragraph of its help."""
    paras = paragraphs(command.short_help or command.help)
    text = " ".join(paras[0]) if paras else ""
    return f"{text} {DEPRECATED}".strip() if command.deprecated else text


def _commands_box(group, ctx, width: int) -> list[str]:
    peek = getattr(group.commands, "peek", None)  # lazy commands: their help without building them
    commands = [(n, peek(n) if peek else group.get_command(ctx, n)) for n in group.list_commands(ctx)]
    rows = [([name], [_short_help(cmd)]) for name, cmd in commands if cmd is not None and not cmd.hidden]
    return box("Commands", table(rows, width - 4), width) if rows else []


def _panels(params: list, default: str) -> dict[str, list]:
    """Parameters by box title, in order: typer's rich_help_panel when set, else `default`."""
    out: dict[str, list] = {default: []}
    for p in params:
        out.setdefault(getattr(p, "rich_help_panel", None) or default, []).append(p)
    return out


def render_help(command, ctx, width: int | None = None) -> str:
    """The whole --help screen of a pdctl command or group, ending in a newline."""
    width = width or screen_width(ctx)
    pieces = " ".join(command.collect_usage_pieces(ctx))
    lead = f"Usage: {ctx.command_path} "
    usage = textwrap.wrap(pieces, max(1, width - 2 - len(lead)), break_long_words=False, break_on_hyphens=False)
    lines = ["", *(" " + (lead if i == 0 else " " * len(lead)) + u for i, u in enumerate(usage or [""])), ""]
    text = paragraphs(command.help)
    if command.deprecated:
        text.insert(0, [DEPRECATED])
    for para in text:
        if para and para[0].strip() == EXAMPLES_HEAD:  # commands drawn whole, their comments aligned
            lines += [" " + EXAMPLES_HEAD, *example_lines(para[1:], width), ""]
            continue
        lines += [" " + ln for ln in _wrapped(para, width - 2)] + [""]
    visible = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    for kind, title in (("argument", "Arguments"), ("option", "Options")):
        for panel, params in _panels([p for p in visible if p.param_type_name == kind], title).items():
            lines += _param_box(panel, params, ctx, width)
    if hasattr(command, "list_commands"):  # a group (typer vendors click: no isinstance check)
        lines += _commands_box(command, ctx, width)
    for para in paragraphs(getattr(command, "epilog", None)):
        lines += [""] + [" " + ln for ln in _wrapped(para, width - 2)]
    return "\n".join(ln.rstrip() for ln in lines) + "\n"
