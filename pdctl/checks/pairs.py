"""The pair canary (layer "pairs"): for one prefill x decode pair, the request the router would send, and the judge
of the two answers; then the judge of the whole matrix. Pure: ops/pairs.py sends and gathers.

Why: the router picks one pair at random and retries a failed request, and /health_generate uses a fake bootstrap,
so one broken prefill -> decode pair among many stays invisible. A canary sent straight to the pair's two workers,
with the same body and a fresh bootstrap_room as the router sends (sglang-router 0.3.2, PD mode), is the only
request that can only succeed through that pair's KV transfer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, TypedDict

from pdctl.checks.e2e import judge_completion_content
from pdctl.checks.result import NEXT_PAIR_RESTART, NEXT_TRIAGE, CheckResult, Status

LAYER = "pairs"
GENERATE_PATH = "/generate"  # SGLang's native endpoint: its answer's meta_info is where timings are reported
ABORT_PATH = "/abort_request"  # SGLang's: {"rid": ..., "abort_all": false}
ROOM_BITS = 63  # the router's bootstrap_room is a random 63-bit int
#: meta_info keys under which an engine may report the pair's KV transfer time, in ms or s (the first found wins)
TRANSFER_KEYS_MS = ("kv_transfer_latency_ms", "kv_transfer_ms", "transfer_latency_ms")
TRANSFER_KEYS_S = ("kv_transfer_latency", "kv_transfer_time", "transfer_latency")

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"


def pair_name(prefill: int, decode: int) -> str:
    """'prefill[0] -> decode[1]'. Pure."""
    return f"prefill[{prefill}] -> decode[{decode}]"


def fresh_room(rng: random.Random | None = None) -> int:
    """A fresh bootstrap_room, as the router draws one: a random 63-bit int."""
    return (rng or random.SystemRandom()).getrandbits(ROOM_BITS)


def canary_rid(room: int) -> str:
    """The request id both workers get, so a canary that outlives its budget can be aborted by name."""
    return f"pdctl-pair-{room}"


class SamplingParams(TypedDict):
    max_new_tokens: int
    temperature: float


class _GenerateFields(TypedDict):
    text: str
    sampling_params: SamplingParams
    stream: bool
    rid: str
    bootstrap_host: str
    bootstrap_port: int
    bootstrap_room: int


class CanaryBody(_GenerateFields, total=False):
    """SGLang's /generate request with the PD bootstrap fields, as the router sends it to both workers of a pair;
    `model` only when the inventory names one."""

    model: str


def canary_body(
    *, prompt: str, max_tokens: int, bootstrap_host: str, bootstrap_port: int, room: int, model: str | None = None
) -> CanaryBody:
    """The /generate body sent, unchanged, to the prefill and the decode of one pair. Pure."""
    body: CanaryBody = {
        "text": prompt,
        "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0},
        "stream": False,
        "rid": canary_rid(room),
        "bootstrap_host": bootstrap_host,
        "bootstrap_port": bootstrap_port,
        "bootstrap_room": room,
    }
    if model:
        body["model"] = model
    return body


@dataclass
class LegAnswer:
    """What one worker answered to the canary: a status and body, or why there was none."""

    status_code: int | None = None
    body: Any = None  # the parsed JSON, or the raw text when it was not JSON
    error: str | None = None  # the cause when there was no answer ("no response within 30s (read timeout)")
    unreachable: bool = False  # the host did not answer at all (connect timeout): says nothing about the pair
    ms: float | None = None


@dataclass
class PairResult:
    prefill: int
    decode: int
    name: str  # "prefill[0] -> decode[1]"
    status: str  # pass | fail | unknown
    expected: str
    found: str
    room: int | None  # the canary's bootstrap_room; None when none was sent (a host did not answer)
    kv_transfer_ms: float | None = None  # only when the engine reported one (meta_info); None otherwise
    prefill_ms: float | None = None
    decode_ms: float | None = None
    content: str = ""
    aborted: list[str] = field(default_factory=list)  # what was done about a canary that outlived its budget
    lineage_hazard: str | None = None  # checks.lineage's kind when one side was restarted alone; the canary judges
    generated_tokens: int = 0  # what the decode generated for it (its meta_info), 0 when not said
    text: str = ""  # the decode's whole answer (content is its first 80 characters)
    output_ids: list[int] | None = None  # its token ids, when the engine gave them (verify outputs compares them)

    @property
    def ok(self) -> bool:
        return self.status == PASS


def leg_timed_out(leg: LegAnswer) -> bool:
    """No answer within the canary's slot (not a refused connection, nor a host that never answered): the request
    may still sit in a worker's queue, so it is to be aborted. Pure."""
    return (
        leg.error is not None
        and not leg.unreachable
        and ("no response within" in leg.error or "timed out" in leg.error)
    )


EXPECTED = "HTTP 200 from both, decode content non-empty and varied"


def _transfer_ms(*bodies: Any) -> float | None:
    for body in bodies:
        meta = body.get("meta_info") if isinstance(body, dict) else None
        if not isinstance(meta, dict):
            continue
        for k in TRANSFER_KEYS_MS:
            if isinstance(meta.get(k), (int, float)):
                return round(float(meta[k]), 1)
        for k in TRANSFER_KEYS_S:
            if isinstance(meta.get(k), (int, float)):
                return round(float(meta[k]) * 1000, 1)
    return None


def _leg_problem(side: str, leg: LegAnswer) -> str | None:
    if leg.error is not None:
        return f"{side}: {leg.error}"
    if leg.status_code != 200:
        return f"{side}: HTTP {leg.status_code} {_error_text(leg.body)[:120]}".rstrip()
    return None


def _error_text(body: Any) -> str:
    """An error answer's message: SGLang's {"message": ...} or OpenAI's {"error": {"message": ...}}, else the
    text."""
    if isinstance(body, dict):
        err = body.get("error")
        for msg in (body.get("message"), err.get("message") if isinstance(err, dict) else err):
            if isinstance(msg, str) and msg.strip():
                return msg.strip()
        import json

        return json.dumps(body)
    return str(body if body is not None else "").strip()


def judge_pair(
    prefill: int,
    decode: int,
    room: int,
    p: LegAnswer,
    d: LegAnswer,
    aborted: list[str] | None = None,
    *,
    repeats_on_failure: bool = True,
) -> PairResult:
    """The verdict on one pair from its two answers. Pure.

    unknown: a host did not answer (nothing is known about the pair). fail: a non-200, no answer within the budget,
    or decode content that is empty or (for an engine that `repeats_on_failure`) one token repeated (the
    failed-transfer symptom). pass otherwise."""
    res = PairResult(
        prefill,
        decode,
        pair_name(prefill, decode),
        PASS,
        EXPECTED,
        "",
        room,
        prefill_ms=p.ms,
        decode_ms=d.ms,
        aborted=list(aborted or []),
    )
    gone = [side for side, leg in (("prefill", p), ("decode", d)) if leg.unreachable]
    if gone:
        res.status, res.found = (
            UNKNOWN,
            "; ".join(f"{s}: {leg.error}" for s, leg in (("prefill", p), ("decode", d)) if leg.unreachable),
        )
        return res
    problems = [x for x in (_leg_problem("prefill", p), _leg_problem("decode", d)) if x]
    if problems:
        res.status, res.found = FAIL, "; ".join(problems)
        return res
    body = d.body if isinstance(d.body, dict) else {}
    text = body.get("text")
    tokens = (body.get("meta_info") or {}).get("completion_tokens") if isinstance(body.get("meta_info"), dict) else None
    ok, reason = judge_completion_content(
        text if isinstance(text, str) else None,
        tokens if isinstance(tokens, int) else None,
        repeats_on_failure=repeats_on_failure,
    )
    res.text = text if isinstance(text, str) else ""
    res.content = res.text[:80]
    ids = body.get("output_ids")
    res.output_ids = ids if isinstance(ids, list) and all(isinstance(x, int) for x in ids) else None
    res.kv_transfer_ms = _transfer_ms(p.body, d.body)
    res.generated_tokens = tokens if isinstance(tokens, int) else 0
    res.status = PASS if ok else FAIL
    res.found = f"HTTP 200 from both, {tokens if tokens is not None else '?'} tokens: {reason}"
    return res


def judge_unasked(prefill: int, decode: int, why: str) -> PairResult:
    """A pair no canary was sent through because a host of its two workers did not answer (`why` says which and
    what it said): unknown, nothing is known about it. Pure."""
    return PairResult(prefill, decode, pair_name(prefill, decode), UNKNOWN, EXPECTED, why, room=None)


@dataclass
class MatrixVerdict:
    ok: bool  # every pair passed
    unknown: bool  # some pair could not be judged (a host did not answer)
    passed: int
    total: int
    failed: list[str]  # names of the failed pairs, in matrix order
    missing: list[str]  # pairs with no result at all (a bug upstream of the judge; never silently ok)
    summary: str  # "4 of 4 pairs pass" / "1 of 4 pairs failed: prefill[1] -> decode[1]"


def judge_matrix(results: list[PairResult], n_prefill: int, n_decode: int) -> MatrixVerdict:
    """Every pair of the n_prefill x n_decode matrix passed? Pure. A pair with no result counts as failed; a pair
    unknown (its host did not answer) is neither, and never hides one that failed."""
    by = {(r.prefill, r.decode): r for r in results}
    order = [(i, j) for i in range(n_prefill) for j in range(n_decode)]
    missing = [pair_name(i, j) for i, j in order if (i, j) not in by]
    failed = [by[k].name for k in order if k in by and by[k].status == FAIL] + missing
    unknown = [by[k].name for k in order if k in by and by[k].status == UNKNOWN]
    total, passed = len(order), sum(1 for k in order if k in by and by[k].ok)
    if failed:  # a failure seen outranks what could not be looked at: both are said
        summary = f"{len(failed)} of {total} pair(s) failed: {', '.join(failed)}"
        summary += f"; {len(unknown)} unknown" if unknown else ""
    elif unknown:
        summary = f"{len(unknown)} of {total} pair(s) unknown: {', '.join(unknown)}"
    else:
        summary = f"{passed} of {total} pairs pass"
    return MatrixVerdict(not failed and not unknown, bool(unknown), passed, total, failed, missing, summary)


REFUSED = "connection refused"  # a leg's error when nothing listens on its worker's port

#: the next command when every failed pair's two workers refused the canary: nothing listens, so no restart of
#: pairs can be the first answer (final-health and triage say `pdctl deploy` once status has shown it)
NEXT_STATUS = "pdctl status (both workers of each failed pair refused the canary: are they running?)"


def both_refused(results: list[PairResult]) -> bool:
    """Every failed pair's prefill and decode refused the connection (nothing listens on either: the workers are
    down, not the pairs broken); False when none failed. Pure."""
    failed = [r for r in results if r.status == FAIL]
    return bool(failed) and all(f"prefill: {REFUSED}" in r.found and f"decode: {REFUSED}" in r.found for r in failed)


def heal_step(failed: list[tuple[int, int]], n_prefill: int, n_decode: int) -> str:
    """The restart that heals the failed (prefill, decode) pairs once triage has said why, or "" when none failed.
    xPyD: the rolling co-restart, the failed pairs' workers first (the service stays up, and a broken pair does
    not wait for its index turn); one prefill or one decode: the pair co-restart, as the watch's heal. Pure."""
    if not failed:
        return ""
    if n_prefill < 2 or n_decode < 2:
        return NEXT_PAIR_RESTART
    every = len(set(failed)) >= n_prefill * n_decode  # all pairs broken: no pair to put first
    return " ".join(
        ["pdctl restart --rolling", *([] if every else [f"--first-pair {i}:{j}" for i, j in sorted(set(failed))])]
    )


def pair_check(r: PairResult, prefill_label: str, decode_label: str) -> CheckResult:
    """One pair as a final-health row. Pure."""
    status = Status.PASS if r.ok else Status.FAIL
    shown = r.found if r.kv_transfer_ms is None else f"{r.found}; KV transfer {r.kv_transfer_ms:g} ms"
    return CheckResult(
        LAYER,
        r.name,
        "canary",
        status,
        observed=shown,
        expected=r.expected,
        detail=f"{prefill_label} -> {decode_label}, room {r.room}" + (f"; {'; '.join(r.aborted)}" if r.aborted else ""),
        data={
            "prefill": r.prefill,
            "decode": r.decode,
            "room": r.room,
            "kv_transfer_ms": r.kv_transfer_ms,
            "prefill_ms": r.prefill_ms,
            "decode_ms": r.decode_ms,
        },
        next_step="" if r.ok else NEXT_TRIAGE,
    )
