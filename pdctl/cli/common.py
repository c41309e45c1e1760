"""What every command shares: the inventory option, the JSON flag, and the one place errors become exit codes."""

from __future__ import annotations

import functools
import os
import sys
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Iterator, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from pdctl.errors import ExitCode, Interrupted, exit_kind

if TYPE_CHECKING:
    from pdctl.render.report import Stamp


def _inventory_path(value: str | None) -> Path | None:
    """Read as text first: a Path would turn "" into ".", refused as "a directory" instead of as empty."""
    if value is None:
        return None
    if not value:
        raise typer.BadParameter("the path is empty: give the inventory file, or leave out -i for the embedded default")
    return Path(value)


InventoryOpt = Annotated[
    Optional[str],
    typer.Option(
        "-i",
        "--inventory",
        help="Inventory YAML. Without it: the embedded default (bundled engine on this machine).",
        envvar="PDCTL_INVENTORY",
        metavar="<path>",
        callback=_inventory_path,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout and nothing else.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")]
ReportOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--report",
        metavar="FILE",
        help="Also save what the screen shows to FILE.svg or FILE.html (for an "
        "incident write-up), whatever the outcome.",
    ),
]


INTERRUPTED_EXIT = ExitCode.INTERRUPTED  # whatever the signal (Ctrl-C, SIGTERM, SIGHUP): the message names it
_STOP_SIGNALS = ("SIGTERM", "SIGHUP")
__all__ = ["Interrupted"]  # SIGTERM/SIGHUP as a KeyboardInterrupt (pdctl.errors), raised by stop_signals_interrupt


def _raise_interrupted(signum, _frame) -> None:
    import signal

    raise Interrupted(signal.Signals(signum).name)


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise Interrupted in the main thread (as SIGINT raises
    KeyboardInterrupt), unless ignored (`nohup pdctl ...`); the previous handlers come back after. A no-op outside
    the main thread."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # one the process was started ignoring (nohup's SIGHUP) stays ignored: the caller asked for that
    sigs = [getattr(signal, n) for n in _STOP_SIGNALS if hasattr(signal, n)]
    previous = {s: signal.signal(s, _raise_interrupted) for s in sigs if signal.getsignal(s) != signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


# -- conventions every command shares (help rendering, usage errors) ---------------------------------------------

#: `pdctl verify final-health`: the command whose arguments were parsed last in this run, so an error's hint and a
#: report's title name it (typer offers no public way to the current context; its click is private to it)
_COMMAND_PATH: ContextVar[str | None] = ContextVar("pdctl_command_path", default=None)
#: the arguments of this run's command line, as typed (after `pdctl`): what a --report's stamp says made it
_COMMAND_LINE: ContextVar[list[str] | None] = ContextVar("pdctl_command_line", default=None)


def command_path() -> str | None:
    """The path of the command running now (`pdctl storm`), or None outside a command line."""
    return _COMMAND_PATH.get()


def _reflow(text: str | None) -> str | None:
    """Docstring paragraphs as one line each, so help wraps to the terminal instead of breaking where the source
    did (typer keeps single newlines). A paragraph starting with \\b keeps its lines, as in click."""
    if not text:
        return text
    import inspect

    paras = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paras)


class _Conventions:
    """Shared by pdctl's command and group classes: a flag renders as a flag (typer shows a `<bool>` value
    placeholder on every boolean option, --help included), help paragraphs wrap to the terminal, and help is
    drawn by pdctl.cli.help_format (typer's rich help costs ~75 ms of imports before the first line)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.help = _reflow(self.help)

    def get_help(self, ctx) -> str:
        from pdctl.cli.help_format import render_help
        from pdctl.render.line_art import ascii_line_art, is_dumb_term

        text = render_help(self, ctx)  # its final newline plus echo's: a blank line closes the screen, as before
        if sys.stdout.isatty() and is_dumb_term(os.environ.get("TERM")):  # as the console: ASCII boxes, same width
            text = ascii_line_art(text)
        return text

    def format_help(self, ctx, formatter) -> None:
        formatter.write(self.get_help(ctx))

    def parse_args(self, ctx, args):
        _COMMAND_PATH.set(ctx.command_path)  # a usage error from here on names this command in its hint
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            typer.echo(ctx.get_help())  # `pdctl` or `pdctl verify` alone: the help, on stdout, exit 2, as click does
            ctx.exit(ExitCode.USAGE)
        if ctx.resilient_parsing and not hasattr(self, "list_commands"):  # a TAB: see _parse_as_typed
            return _parse_as_typed(self, ctx, args)
        return super().parse_args(ctx, args)

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for p in params:
            if getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = ""  # typer prints the metavar, when set, in place of the type placeholder
            if getattr(p, "is_flag", False) and not p.expose_value and p.default is None:
                # typer's --install-completion/--show-completion default to None, and typer coerces a non-bool
                # through a pydantic TypeAdapter: ~60 ms of imports on every `pdctl <command> --help`. Unset is
                # False for a flag whose value no function sees.
                p.default = False
        return params


def _parse_as_typed(command, ctx, args: list[str]) -> list[str]:
    """A command's line parsed for shell completion (click's resilient parsing, a TAB): each value as typed (or
    from its env var, or its default), none converted and no callback run. Completion asks only which parameter
    is being typed and what came before it (pdctl.cli.complete_values reads -i as typed); typer converts every
    value through a pydantic TypeAdapter, ~90 ms of imports on each TAB for values nothing reads. Click's own
    steps by its public API: the command's parser, each parameter's consume_value (command line, env var, default)
    and its source (click's _resolve_incomplete reads it to tell a finished argument)."""
    parser = command.make_parser(ctx)
    opts, rest, _ = parser.parse_args(args=args)
    for param in command.get_params(ctx):
        value, source = param.consume_value(ctx, opts)
        ctx.set_parameter_source(param.name, source)
        if param.expose_value:
            ctx.params[param.name] = value
    ctx.args = rest
    return rest


class PdctlCommand(_Conventions, TyperCommand):
    """Every pdctl command (`app.command(..., cls=PdctlCommand)`)."""


class PdctlGroup(_Conventions, TyperGroup):
    """The root app and `verify`. The root runs commands with click's standalone mode off, so a usage error (bad
    option, missing argument, bad value) is said in pdctl's one style, `error:` then `hint:`, exit 2; with --json on
    the command line it is also the one JSON document on stdout."""

    def list_commands(self, ctx):
        return list(self.commands)  # the names only: typer's list_commands builds every lazy command

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        import sys

        argv = list(sys.argv[1:] if args is None else args)
        started = _COMMAND_PATH.set(None)
        typed = _COMMAND_LINE.set(argv)
        try:
            code = super().main(argv, prog_name or "pdctl", complete_var, standalone_mode=False, **extra)
        except typer.TyperException as e:  # click's errors (typer's public base of them): usage, exit 2
            hint = f"run `{command_path() or 'pdctl'} --help`" if e.exit_code == ExitCode.USAGE else None
            code = report_error(e.exit_code, e.format_message(), hint, json_out="--json" in argv)
        except typer.Abort:  # EOF at a prompt
            code = ExitCode.CHECK_FAILED
        finally:
            _COMMAND_PATH.reset(started)
            _COMMAND_LINE.reset(typed)
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def _usage_hint(e) -> str | None:
    """A bad option value found by pdctl gets the hint click's own usage errors get (an inventory or playbook
    error names its file and field instead)."""
    from pdctl.errors import InventoryError, PlaybookError, UsageError

    if not isinstance(e, UsageError) or isinstance(e, (InventoryError, PlaybookError)):
        return None
    path = command_path()
    return f"run `{path} --help`" if path is not None else None


def report_error(
    exit_code: int,
    message: str,
    hint: str | None,
    *,
    json_out: bool,
    warnings: tuple[str, ...] = (),
    kind: str | None = None,
) -> int:
    """Say an error: the warnings the action gave before it failed, then `error:` and `hint:` lines on stderr and,
    under --json, the one JSON document on stdout ({"ok": false, "error": {exit_code, kind, message, hint}}, and
    "warnings" when there are any; secrets masked as on screen). `kind` is the exit code's word (`exit_kind`)
    unless given. Returns exit_code."""
    from pdctl import render
    from pdctl.secrets import mask_text

    for w in warnings:
        render.warning(w)
    render.error(message, hint)
    if json_out:
        doc = {
            "ok": False,
            "error": {
                "exit_code": exit_code,
                "kind": kind or exit_kind(exit_code),
                "message": mask_text(message),
                "hint": mask_text(hint) if hint else None,
            },
        }
        if warnings:
            doc["warnings"] = [mask_text(w) for w in warnings]
        render.emit_json(doc)
    return exit_code


def handle_errors(fn: Callable) -> Callable:
    """Run a command; map PdctlError to its exit code with a clear message and no traceback (under --json, also an
    error document on stdout). Ctrl-C, SIGTERM and SIGHUP stop it the same way: clean-up runs as the exception
    unwinds, then "interrupted by SIGTERM", exit 130. A command with a `report` parameter (--report) has its path
    checked before it runs and what it printed, errors included, saved there in every outcome."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from pdctl.errors import PdctlError

        json_out = bool(kwargs.get("json_out"))  # every command names its --json parameter json_out
        try:
            report = check_report_path(kwargs.get("report"))
        except PdctlError as e:
            raise typer.Exit(
                report_error(e.exit_code, e.message, e.hint or _usage_hint(e), json_out=json_out)
            ) from None
        with saved_report(report, kwargs.get("inventory")):
            return _run_mapped(fn, args, kwargs, json_out)

    return wrapper


def _interrupt_hint(e: KeyboardInterrupt) -> str | None:
    """What an interrupt left to look at: only a mutating action that recorded it (audit.audited) held a lock and
    wrote where it stopped; a read-only command, or one stopped before its action began, changed nothing."""
    from pdctl.audit.writer import interrupt_recorded_by

    action = interrupt_recorded_by(e)
    if action is None:
        return None
    return (
        f"`pdctl {action}` stopped at a safe point: it released the deployment lock if it held it and recorded "
        "where it stopped (see `pdctl history` and `pdctl status`)"
    )


def _run_mapped(fn: Callable, args, kwargs, json_out: bool):
    from pdctl.errors import PdctlError

    try:
        with stop_signals_interrupt():
            return fn(*args, **kwargs)
    except PdctlError as e:
        code = report_error(
            e.exit_code,
            e.message,
            e.hint or _usage_hint(e),
            json_out=json_out,
            warnings=e.warnings,
        )
        raise typer.Exit(code) from None
    except KeyboardInterrupt as e:
        message = f"interrupted by {getattr(e, 'signal_name', None) or 'SIGINT (Ctrl-C)'}"
        states = e.role_states if isinstance(e, Interrupted) else None  # read for the audit record too
        if states:
            message += "\nstate of each role now:" + "".join(f"\n  {k}: {v}" for k, v in states.items())
        for note in e.notes if isinstance(e, Interrupted) else []:  # what the action left that the operator must know
            message += f"\n{note}"
        report_error(INTERRUPTED_EXIT, message, _interrupt_hint(e), json_out=json_out)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except Exception as e:  # a bug or an unmapped failure: say what happened, exit 1, no traceback
        import os
        import traceback

        from pdctl.broken_pipe import drop_rest_of_output

        if isinstance(e, BrokenPipeError) and drop_rest_of_output():  # cut short by `| head`: quietly, as SIGPIPE
            raise typer.Exit(ExitCode.READER_GONE) from None

        if os.environ.get("PDCTL_DEBUG"):
            traceback.print_exc()
        report_error(
            ExitCode.CHECK_FAILED,
            f"unexpected {type(e).__name__}: {e}",
            "this is a pdctl bug or an unmapped failure; rerun with PDCTL_DEBUG=1 for the traceback",
            json_out=json_out,
            kind="internal",  # exit 1 as a failed check, but the document says it was no verdict
        )
        raise typer.Exit(ExitCode.CHECK_FAILED) from None


# -- --report FILE.svg|FILE.html ----------------------------------------------------------------------------------


def check_report_path(path: Optional[Path]) -> Optional[Path]:
    """The --report path, checked before the command runs (a read command may take a minute): UsageError (exit 2)
    naming --report for a suffix other than .svg/.html, and naming the path when the report could not be saved
    there (pdctl.safe_write.check_whole: a symbolic link, a file with other hard links, another user's file in a
    sticky world-writable directory, no regular file, a directory that cannot be written). Leaves no file
    behind."""
    if path is None:
        return None
    from pdctl.errors import UsageError
    from pdctl.render.report import REPORT_SUFFIXES
    from pdctl.safe_write import check_whole

    if path.suffix.lower() not in REPORT_SUFFIXES:
        raise UsageError(f"--report {path}: the file name must end in .svg or .html")
    try:
        check_whole(path, UsageError, "--report")
    except UsageError as e:
        raise UsageError(e.message, hint=_REPORT_HINT) from None
    return path


_REPORT_HINT = "choose a writable path for --report (a file of your own, not a link to one)"


@contextmanager
def saved_report(path: Optional[Path], inventory: Optional[str | Path] = None) -> Iterator[None]:
    """Record what is printed inside, then save it to `path` (nothing when None) under a stamp naming when, the
    deployment of `inventory` (a path; None: the embedded default), who, which pdctl and the command line, also when
    the command exits non-zero or is interrupted. A failed or refused write is said as an error; it turns a success
    into exit 2."""
    if path is None:
        yield
        return
    import time

    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.render import report

    title = command_path() or "pdctl"
    started = time.time()
    render.start_report()
    ok = False
    try:
        yield
        ok = True
    finally:
        try:
            report.save(path, title, report_stamp(inventory, started))
        except UsageError as e:
            render.error(e.message, _REPORT_HINT)
            if ok:
                raise typer.Exit(ExitCode.USAGE) from None


def report_stamp(inventory: Optional[str | Path], started: float) -> Stamp:
    """A --report's stamp, now: the deployment from `inventory` loaded again (its name and declared secrets; one
    that does not load is named by its path: the command said why, and a stamp never stops a report), the operator
    as the audit log names them, pdctl's version, and this run's command line with secret values masked."""
    import shlex
    import time

    import pdctl
    from pdctl.inventory import load_inventory
    from pdctl.render.report import Stamp
    from pdctl.secrets import MASK, inventory_secrets, mask_argv
    from pdctl.state import operator

    try:
        inv = load_inventory(inventory)
        name, source, secrets = inv.name, inv.source, inventory_secrets(inv)
    except Exception:  # an InventoryError, or a file that went away meanwhile
        name, source, secrets = "", str(inventory), set()
    typed = _COMMAND_LINE.get()
    argv = sys.argv[1:] if typed is None else typed
    line = " ".join(["pdctl", *(a if a == MASK else shlex.quote(a) for a in mask_argv(argv, secrets))])
    return Stamp(time.time(), started, name, source, operator(), pdctl.__version__, line)


def progress_quiet(json_out: bool, stream=None) -> bool:
    """Whether a command's progress stays silent: only under --json with stderr not a terminal (a script reading
    the document); with --json in a terminal, progress goes to stderr and stdout still holds only the document."""
    import sys

    from pdctl.render.progress import is_live

    return bool(json_out) and not is_live(stream if stream is not None else sys.stderr)


#: final-health's progress step (ops.verify): verify final-health and triage print its outcome themselves
FINAL_HEALTH_STEP: frozenset[str] = frozenset({"final-health"})


@contextmanager
def open_deployment(inventory, *, quiet: bool = False, reported: frozenset[str] = frozenset()):
    """Open a Deployment whose progress goes to stderr, from an inventory path (None: the embedded default) or an
    already loaded Inventory; its live progress line is erased when the block ends, before the result is shown.
    `reported`: steps whose outcome the command prints itself (render.ProgressPrinter)."""
    from pdctl import render
    from pdctl.inventory import Inventory, load_inventory
    from pdctl.ops.context import Deployment
    from pdctl.progress import Progress

    inv = inventory if isinstance(inventory, Inventory) else load_inventory(inventory)
    printer = render.ProgressPrinter(quiet=quiet, reported=reported)
    try:
        with Deployment(inv, Progress(sink=printer)) as dep:
            yield dep
    finally:
        printer.close()
