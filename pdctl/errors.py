"""Domain errors and pdctl's exit codes. The library raises these; only the CLI turns them into exit codes
(`cli/common.py`). `ExitCode` is the one list of codes and `EXIT_KINDS` the one map from a code to the word an
error document's `kind` and the audit log's result use.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What pdctl exits with. An IntEnum so a code still compares, serializes and exits as its number."""

    OK = 0
    CHECK_FAILED = 1  # a check ran and found the deployment unhealthy (also: an unmapped failure, a bug)
    USAGE = 2  # bad command-line usage, inventory or playbook
    UNREACHABLE = 3  # a host or service could not be reached: unknown, never read as stopped
    REFUSED = 4  # lock held, hazard guard, unknown host key
    INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, whatever the signal)
    READER_GONE = 141  # stdout's reader went away mid-output (128 + SIGPIPE): the verdict is unknown


#: the word for an error's exit code: an error document's `kind` and the audit log's result say the same
EXIT_KINDS: dict[int, str] = {
    ExitCode.CHECK_FAILED: "failed",
    ExitCode.USAGE: "usage",
    ExitCode.UNREACHABLE: "unreachable",
    ExitCode.REFUSED: "refused",
    ExitCode.INTERRUPTED: "interrupted",
}


def exit_kind(code: int) -> str:
    """The word for a non-zero exit code; "failed" for one with no word of its own."""
    return EXIT_KINDS.get(code, "failed")


class PdctlError(Exception):
    """Base of every error pdctl reports to an operator. `exit_code` is what the CLI exits with."""

    exit_code: int = ExitCode.CHECK_FAILED

    warnings: tuple[str, ...] = ()  # what the action had warned of before it failed (carry_warnings)

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class carry_warnings:
    """`with carry_warnings(result.warnings):` a PdctlError leaving the block takes the warnings gathered so far
    (a lint gate's "not checked", a taken-over lock), so the error's screen and JSON still say them."""

    def __init__(self, warnings: list[str]):
        self.warnings = warnings

    def __enter__(self) -> "carry_warnings":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if isinstance(exc, PdctlError) and self.warnings and not exc.warnings:
            exc.warnings = tuple(self.warnings)


class CheckFailed(PdctlError):
    """A verification ran and found the deployment unhealthy."""

    exit_code = ExitCode.CHECK_FAILED


class UsageError(PdctlError):
    """Bad command-line usage or bad input file (inventory, playbook)."""

    exit_code = ExitCode.USAGE


class InventoryError(UsageError):
    """The inventory is malformed. The message names the file, the path to the field and what was expected."""


class PlaybookError(UsageError):
    """A playbook is malformed. The message names the file, the step and the field."""


class UnreachableError(PdctlError):
    """A host or a service could not be reached (connect failed, timed out, refused)."""

    exit_code = ExitCode.UNREACHABLE

    def __init__(self, message: str, *, target: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.target = target


class RefusedError(PdctlError):
    """pdctl refused to act: a lock is held, a hazard guard tripped, a host key is unknown or changed."""

    exit_code = ExitCode.REFUSED


class LockHeld(RefusedError):
    """Another operator holds the deployment lock."""


class HazardRefused(RefusedError):
    """The action would create a known hazard (e.g. decode-only restart against a running prefill)."""


class HostKeyRefused(RefusedError):
    """An SSH host key is unknown or does not match known_hosts."""


class StepFailed(PdctlError):
    """A step of a mutating sequence (deploy, restart) failed; the message says where it stopped and each role's
    state."""

    exit_code = ExitCode.CHECK_FAILED


class LintRefused(UsageError):
    """deploy/restart refused before stopping anything: a role's command line would not parse on its host (exit 2)."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread like Ctrl-C so the same clean-up runs (the lock is released,
    the audit record says "interrupted by SIGTERM"). `signal_name` names the signal ("" for Ctrl-C). An op stopped
    part-way adds what the operator must be told: each role's state then, and notes (workers left out of a router)."""

    def __init__(
        self, signal_name: str = "", *, role_states: dict[str, str] | None = None, notes: list[str] | None = None
    ):
        super().__init__(f"interrupted by {signal_name}" if signal_name else "")  # a progress step's failure text
        self.signal_name = signal_name
        self.role_states = role_states
        self.notes = notes or []


def as_interrupted(e: KeyboardInterrupt) -> Interrupted:
    """`e` as an Interrupted, to add what an op left (a plain Ctrl-C becomes one that names no signal)."""
    return e if isinstance(e, Interrupted) else Interrupted()


def interrupt_again(signal_name: str = "") -> KeyboardInterrupt:
    """A KeyboardInterrupt to raise again after an op caught one and returned what it had: it names the signal
    that stopped the op (SIGTERM, SIGHUP; "" for Ctrl-C), so the CLI's message and the audit record still do."""
    return Interrupted(signal_name) if signal_name else KeyboardInterrupt("")
