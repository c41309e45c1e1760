"""An audit record's result in a word (ok, failed, refused, unreachable, usage, interrupted, unfinished, taken
over), whatever text the action wrote: what `pdctl history` shows and its `--result` filter matches. Pure."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from pdctl.errors import EXIT_KINDS, exit_kind

STARTED = "started"  # the result of the record a mutating action appends before it starts (pdctl.audit)


RESULT_WORDS = (
    "ok",
    "failed",
    "refused",
    "unreachable",
    "usage",
    "interrupted",
    "unfinished",
    "taken over",
    "unrecorded",
)


class ResultWord(NamedTuple):
    word: str  # one of RESULT_WORDS
    detail: str  # the rest of the result, without the word repeated ("" when nothing is left)


_CLASS_WORD = {
    "RefusedError": "refused",
    "LockHeld": "refused",
    "HazardRefused": "refused",
    "HostKeyRefused": "refused",
    "UnreachableError": "unreachable",
    "UsageError": "usage",
    "InventoryError": "usage",
    "PlaybookError": "usage",
    "KeyboardInterrupt": "interrupted",
}
_CLASS_PREFIX = re.compile(r"^([A-Z][A-Za-z0-9_]*): ?(.*)$", re.S)


def result_word(record: dict[str, Any]) -> ResultWord:
    """(word, detail) for an audit record's result, whatever the action wrote ("ok", "passed", "HazardRefused:
    refused: ...", "failed at step 2 ...", "final-health failed"); the record's `exit_code` decides the word when
    the text alone does not, and over an error's class (a StepFailed of exit 3 is unreachable). Pure."""
    res = str(record.get("result", "")).strip()
    code = record.get("exit_code")
    low = res.lower()
    if low in ("ok", "passed", "pass"):
        return ResultWord("ok", "")
    if not res and not isinstance(code, int):  # a record that says nothing of how it ended: never "failed"
        return ResultWord("unrecorded", "the record holds no result")
    if low == STARTED:  # its end is not in the log (fold_runs drops the started records of finished runs)
        return ResultWord("unfinished", "started, no end recorded: killed, or still running")
    if low.startswith("taken over"):  # a "lock takeover" record
        return ResultWord("taken over", res[len("taken over") :].lstrip(" :"))
    if low.startswith("interrupted"):
        return ResultWord("interrupted", res[len("interrupted") :].lstrip(" :"))
    m = _CLASS_PREFIX.match(res)
    if m:  # "ErrorClass: message", as `audited` writes an exception
        cls, rest = m.group(1), m.group(2)
        # the exit code recorded with the error decides (StepFailed: unreachable when a host did not answer)
        word = EXIT_KINDS.get(code) if isinstance(code, int) else None
        word = (
            word
            or _CLASS_WORD.get(cls)
            or (
                "refused"
                if cls.endswith("Refused")
                else "unreachable"
                if ("Unreachable" in cls or "Timeout" in cls or "Connection" in cls)
                else "failed"
            )
        )
        if rest.lower().startswith(word + ":"):
            rest = rest[len(word) + 1 :]
        return ResultWord(word, rest.strip())
    word = exit_kind(code) if isinstance(code, int) and code else "failed"
    if low.startswith("failed"):
        return ResultWord(word, res[len("failed") :].lstrip(" :"))
    if low == "error":
        return ResultWord(word, "")
    return ResultWord(word, res)
