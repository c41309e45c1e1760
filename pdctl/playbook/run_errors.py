"""How an error that ended a playbook run is recorded: its text (the class and the first line of its message) and
the exit code the CLI gives it."""

from __future__ import annotations


def error_text(e: BaseException) -> str:
    """ "ValueError: Port out of range 0-65535": the class (what `pdctl history` reads the result word from when no
    exit code decides it) and the message's first line."""
    msg = getattr(e, "message", None) or str(e) or "no message"
    return f"{type(e).__name__}: {msg.splitlines()[0]}"


def error_exit_code(e: BaseException) -> int:
    """The exit code the CLI gives the error that ended a run: a PdctlError's own, an exit's status, else 1 (the
    CLI's code for an unexpected error)."""
    from pdctl.errors import PdctlError

    if isinstance(e, PdctlError):
        return e.exit_code
    code = getattr(e, "exit_code", None) if not isinstance(e, SystemExit) else e.code
    return code if isinstance(code, int) and code else 1
