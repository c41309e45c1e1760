"""What a rolling restart did to each worker, and what a stopped one left: which workers were restarted (and are
back in the routers or not), which were taken out and never restarted (put back, or not), which were never
touched. Pure: pdctl.ops.rolling moves each worker's Progress as it acts; the words here are the ones the interrupt
message, the stopped run's screen and the audit record say.

A worker's progress moves *before* the action it names can have begun, so an interrupt that lands inside a step
never leaves a worker the routers have lost unaccounted for: OUT is set before the DELETE is sent (it may not have
reached the router: putting it back is harmless then), RESTARTING before the stop (the worker may be stopped,
or not ready yet).
"""

from __future__ import annotations

from enum import Enum
from typing import Callable, Iterable, Mapping, Sequence

from pdctl.role_ref import RoleRef


class Progress(str, Enum):
    """One worker in one unit, in the order the unit takes it."""

    UNTOUCHED = "untouched"
    OUT = "out"  # taken out of the routers (or being taken out), never restarted
    RESTARTING = "restarting"  # its restart began and did not end ready: stopped, or not ready yet
    RESTARTED = "restarted"  # restarted and ready, its canary not passed: it must not take traffic yet
    CANARIED = "canaried"  # restarted, ready, its canary passed: safe to put back
    BACK = "back"  # restarted, canaried and back in the routers
    PUT_BACK = "put back"  # taken out, never restarted, put back when the unit stopped (the old process serves on)


#: out of the routers when the run ends in this state
OUT_OF_ROUTERS = (Progress.OUT, Progress.RESTARTING, Progress.RESTARTED, Progress.CANARIED)
#: what may go back in when a unit stops: the old process (never restarted) or one whose canary passed
SAFE_TO_PUT_BACK = (Progress.OUT, Progress.CANARIED)

#: how a stopped run's summary names each end state, in the order it lists them
_WORDS = {
    Progress.BACK: "restarted and back in the routers",
    Progress.CANARIED: "restarted and canaried, not put back",
    Progress.RESTARTED: "restarted, not put back (its canary did not pass)",
    Progress.RESTARTING: "restart begun, not finished (stopped, or not ready: see its state)",
    Progress.OUT: "taken out, never restarted, not put back",
    Progress.PUT_BACK: "taken out, never restarted, put back",
    Progress.UNTOUCHED: "untouched",
}


def last_progress(units: Iterable[Mapping[RoleRef, Progress]]) -> dict[RoleRef, Progress]:
    """Each worker's state at the end of the run: the last unit that did something to it says it (a prefill rolled
    back in unit 1 and untouched in unit 2 is back; one restarting in unit 2 is restarting). Workers of no unit
    are left out."""
    out: dict[RoleRef, Progress] = {}
    for unit in units:
        for w, p in unit.items():
            if p is not Progress.UNTOUCHED or w not in out:
                out[w] = p
    return out


def still_out(units: Iterable[Mapping[RoleRef, Progress]]) -> list[RoleRef]:
    """The workers the run leaves out of the routers, in inventory order (prefills, then decodes)."""
    return sorted((w for w, p in last_progress(units).items() if p in OUT_OF_ROUTERS), key=_order)


def left_lines(units: Sequence[Mapping[RoleRef, Progress]], label: Callable[[str, int], str]) -> list[str]:
    """What a stopped run left, one line per end state that some worker is in ("restarted and back in the routers:
    prefill[0]@h:1", ..., "untouched: decode[1]@h:4"), then which workers are still out of the routers and what
    puts them back. `label(role, index)` names a worker."""
    ends = last_progress(units)
    lines = []
    for p, words in _WORDS.items():
        ws = sorted((w for w, q in ends.items() if q is p), key=_order)
        if ws:
            lines.append(f"{words}: {', '.join(label(*w) for w in ws)}")
    return lines


def _order(w: RoleRef) -> tuple[int, int]:
    return (0 if w.role == "prefill" else 1, w.number)
