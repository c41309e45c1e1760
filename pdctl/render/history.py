"""What `pdctl history` prints: the audit log, one row per record."""

from __future__ import annotations

from rich.cells import cell_len

from pdctl import render
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Col, block, plain_table
from pdctl.render.terminal_safe import printable

BLOCK_COLS = (
    Col("time", head=True),
    Col("operator", head=True),
    Col("action", head=True),
    Col("seconds", head=True),
    Col("override"),  # first under the head line: the guard the operator switched off
    Col("result"),
    Col("inventory"),
)

#: What an action's record says was overridden: a guard the operator switched off, by its option. A mutating
#: action writes these in its record's `args` (pdctl.ops.restart, .rolling, .deploy; a playbook's restart step
#: writes a restart record of its own), `watch --install` the argv of the service it installs.
OVERRIDE_ARGS = {"override_hazard": "--override-hazard", "skip_lint": "--skip-lint"}
OVERRIDE_ARGV = ("--listen-any",)
OVERRIDE_MARK = "!"  # after the action's name; ASCII, so a dumb terminal shows it too
OVERRIDE_STYLE = "bold yellow"

HISTORY_RESULT_MAX = 80
_HISTORY_STYLE = {
    "ok": "green",
    "failed": "red",
    "refused": "yellow",
    "unreachable": "red",
    "usage": "red",
    "interrupted": "yellow",
    "unfinished": "bold yellow",
    "taken over": "yellow",
    "unrecorded": "yellow",
}


def shorten(text: str, limit: int = HISTORY_RESULT_MAX) -> str:
    """The first sentence (or line) of `text`, control characters escaped, at most `limit` characters, `…` when
    cut. Escaped before it is measured: an ESC shows as four characters. Pure."""
    import re

    text = text.strip()
    first = re.split(r"\n|(?<=[.!?])\s", text, maxsplit=1)[0].strip()
    cut = first != text
    first = printable(first)
    if len(first) > limit:  # at a space when there is one: a role label or a path is never cut inside
        head = first[: limit - 1]
        first, cut = (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(), True
    return first + ("…" if cut else "")


def fold_hard(text: str, cells: int) -> str:
    """`text` cut into lines of exactly `cells` terminal cells (the last shorter), never at its spaces: a path
    with spaces in it (`/srv/my  dir`) reads back exactly, where wrapping at spaces would hide a double space in
    the padding. Pure."""
    if cells < 1 or cell_len(text) <= cells:
        return text
    lines, line = [], ""
    for ch in text:
        if cell_len(line + ch) > cells:
            lines.append(line)
            line = ""
        line += ch
    return "\n".join(lines + [line])


def overrides(record: dict) -> list[str]:
    """The options by which the record's action overrode a guard (`--override-hazard`, `--skip-lint`,
    `--listen-any`), in that order; [] when none, or when `args` is not what a writer gives (a damaged or
    hand-edited record overrides nothing it cannot be read to say). Pure."""
    args = record.get("args")
    if not isinstance(args, dict):
        return []
    found = [opt for key, opt in OVERRIDE_ARGS.items() if args.get(key) is True]
    argv = args.get("argv")
    if isinstance(argv, list):
        found += [opt for opt in OVERRIDE_ARGV if opt in argv]
    return found


def history_lines(lines: list, *, filters: list[str] | None = None, log: str = "") -> None:
    """The audit log (pdctl.audit.records lines), one table row per line (the full result is in --json). A record
    whose action overrode a guard has the mark after its action and the options named next to it."""
    from pdctl.audit.records import CorruptLine, fold_runs, result_word

    c = render.console()
    lines = fold_runs(lines)  # a run once, by its end; a start alone is a run that never finished
    if not lines:
        if filters:
            c.print(Text("no records match " + " ".join(filters), style="dim"))
        else:
            c.print(Text("no records yet" + (f" (log: {log})" if log else ""), style="dim"))
        return
    # time, operator, action, override, result, seconds, inventory
    rows: list[tuple[str, str, str | Text, Text, Text, str, str]] = []
    for r in lines:
        if isinstance(r, CorruptLine):
            rows.append(
                (
                    "",
                    "",
                    Text("CORRUPT LINE", style="bold red"),
                    Text(""),
                    Text(shorten(f"{r.reason}: " + r.text.replace("\n", " ")), style="red"),  # why, then what
                    "",
                    "",
                )
            )
            continue
        word, detail = result_word(r)
        word = printable(word)  # every field is what the log holds: escaped, so it cannot drive the terminal
        cell = Text(word, style=_HISTORY_STYLE.get(word, "")) + Text(
            f": {shorten(detail, HISTORY_RESULT_MAX - len(word) - 2)}" if detail else ""
        )
        dur = r.get("duration_s")
        over = overrides(r)
        action: str | Text = printable(r.get("action", ""))
        if over:  # marked on the action itself (only --json said so before)
            action = Text(str(action)) + Text(f" {OVERRIDE_MARK}", style=OVERRIDE_STYLE)
        rows.append(
            (
                printable(r.get("time", "")),
                printable(r.get("operator", "")),
                action,
                Text(", ".join(over), style=OVERRIDE_STYLE),
                cell,
                f"{dur:.1f}" if isinstance(dur, (int, float)) else "",
                printable(r.get("inventory", "")),
            )
        )
    cols = ["time", "operator", "action", "override", "result", "seconds", "inventory"]
    keep = [k for k, col in enumerate(cols) if col != "override" or any(row[3].plain for row in rows)]
    widths = [
        max([len(cols[k])] + [cell_len(x.plain if isinstance(x, Text) else x) for x in (row[k] for row in rows)])
        for k in keep
    ]  # in terminal cells: a CJK character takes two
    # One line per record when it fits. When the table is wider than the terminal, the result column gives way (its
    # first sentence, shortened at a space; the whole of it is in --json); the others keep their width: an
    # inventory path and an override are identifiers. When that is not enough, one block per record, each value
    # whole.
    spare = c.width - (3 * len(keep) + 1) - sum(widths)
    res = keep.index(4)
    if spare < 0:
        give = min(-spare, max(0, widths[res] - 24))
        widths[res] -= give
        spare += give
    if spare < 0:
        c.print(Text("audit log", style="italic"))
        for row in rows:
            secs = (row[5] + "s") if row[5] else ""
            inv = fold_hard(row[6], c.width - len("   inventory: "))
            # the override on its own line under the head, first: `   override:  --override-hazard`
            for part in block(BLOCK_COLS, (row[0], row[1], row[2], secs, row[3], row[4], inv), width=c.width):
                c.print(part)
        return
    t = plain_table("audit log")
    for k, w in zip(keep, widths):
        t.add_column(cols[k], no_wrap=True, overflow="ellipsis", width=w, justify="right" if k == 5 else "left")
    for row in rows:
        t.add_row(*(row[k] for k in keep))
    c.print(t)
