"""Domain errors. The library raises these; only the CLI turns them into exit codes (`cli/common.py`).

Exit codes: 0 all good, 1 a check failed, 2 bad usage or inventory, 3 a host or service could not be
reached, 4 refused (lock held, hazard guard, unknown host key).
"""

from __future__ import annotations


class PdctlError(Exception):
    """Base of every error pdctl reports to an operator. `exit_code` is what the CLI exits with."""

    exit_code = 1

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

    exit_code = 1


class UsageError(PdctlError):
    """Bad command-line usage or bad input file (inventory, playbook)."""

    exit_code = 2


class InventoryError(UsageError):
    """The inventory is malformed. The message names the file, the path to the field and what was expected."""


class PlaybookError(UsageError):
    """A playbook is malformed. The message names the file, the step and the field."""


class UnreachableError(PdctlError):
    """A host or a service could not be reached (connect failed, timed out, refused)."""

    exit_code = 3

    def __init__(self, message: str, *, target: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.target = target


class RefusedError(PdctlError):
    """pdctl refused to act: a lock is held, a hazard guard tripped, a host key is unknown or changed."""

    exit_code = 4


class LockHeld(RefusedError):
    """Another operator holds the deployment lock."""


class HazardRefused(RefusedError):
    """The action would create a known hazard (e.g. decode-only restart against a running prefill)."""


class HostKeyRefused(RefusedError):
    """An SSH host key is unknown or does not match known_hosts."""


class StepFailed(PdctlError):
    """A step of a mutating sequence (deploy, restart) failed; the message says where it stopped and each role's
    state."""

    exit_code = 1


class LintRefused(UsageError):
    """deploy/restart refused before stopping anything: a role's command line would not parse on its host (exit 2)."""


def interrupt_again(signal_name: str = "") -> KeyboardInterrupt:
    """A KeyboardInterrupt to raise again after an op caught one and returned what it had: it names the signal
    that stopped the op (SIGTERM, SIGHUP; "" for Ctrl-C), so the CLI's message and the audit record still do."""
    e = KeyboardInterrupt(f"interrupted by {signal_name}" if signal_name else "")
    if signal_name:
        e.signal_name = signal_name
    return e
