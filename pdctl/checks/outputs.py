"""The outputs check (`pdctl verify outputs`): is what PD serves right? Pure: the prompts, and the judges of the
answers that pdctl.ops.outputs gathers.

Why: the seed's third failure was output corruption under high concurrency (multi-stream overlap; fixed by
SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0), every answer a 200. Its closing check counted sessions clean at
concurrency 30. Greedy decoding makes an answer a function of its prompt, so the same fixed prompts are sent at
concurrency 1 (the reference) and at concurrency N, and straight through every prefill x decode pair, and the
answers are compared token for token (by `output_ids` where the engine gives them, else by characters).

The rule for an engine that is not batch-invariant (SGLang on GPUs without --enable-deterministic-inference: a
batch of 30 may round differently from a batch of 1, and greedy picks can then part late): an answer that parts
from its reference within its first `early_tokens` tokens is corrupt; one that parts later is a late divergence,
said and not counted (unless strict). What it may miss: corruption that starts late in an answer, and corruption
that happens to give the reference's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from pdctl.checks.result import NEXT_TRIAGE, CheckResult, Status

SESSIONS = 30  # the seed's repro: 30 agentic sessions
TURNS = 2
MAX_TOKENS = 24
EARLY_TOKENS = 8  # a parting before this token is corruption; after it, a late divergence
CHARS_PER_TOKEN = 4  # when only text can be compared: the early window in characters
OVERLAP_SWITCH = "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"
PD_FIX = (
    "pdctl verify final-health --layer flags (a transfer_backend that moves KV, not fake; the router in PD mode), "
    "then pdctl deploy"
)
OVERLAP_FIX = f"{OVERLAP_SWITCH}=0 on the decodes, then pdctl deploy"  # the seed's fix

PASS, CORRUPT, LATE, FAILED, UNKNOWN = "pass", "corrupt", "late", "failed", "unknown"

# Session openers and follow-ups: plain text any tokenizer takes, varied so sessions differ from their first token
_TOPICS = (
    "the water cycle",
    "binary search",
    "how a bicycle gear works",
    "the history of the printing press",
    "why the sky is blue",
    "a recipe for bread",
    "how vaccines train the immune system",
    "the rules of chess",
    "what a compiler does",
    "how tides happen",
)
_ASKS = ("Explain {t} in two sentences.", "Write a short list about {t}.", "Give one surprising fact about {t}.")
_FOLLOW_UPS = ("Say that again more simply.", "Now give an example.", "What is a common mistake about it?")


def opener(session: int) -> str:
    """Session `session`'s first prompt: the same for every run. Pure."""
    topic = _TOPICS[session % len(_TOPICS)]
    return f"User: {_ASKS[(session // len(_TOPICS)) % len(_ASKS)].format(t=topic)}\nAssistant:"


def next_prompt(prompt: str, answer: str, turn: int) -> str:
    """The prompt of the turn after one whose prompt and answer were these (the multi-turn session grows). Pure."""
    return f"{prompt}{answer}\nUser: {_FOLLOW_UPS[turn % len(_FOLLOW_UPS)]}\nAssistant:"


@dataclass
class Answer:
    """One greedy answer: its token ids when the engine gave them, its text, or why there was none."""

    status_code: int | None = None
    ids: list[int] | None = None
    text: str = ""
    error: str = ""  # set when there is no usable answer (refused, timed out, non-200, no text)
    sent: bool = True  # False: the check gave up before sending it (a dead router costs one timeout, not 60)

    @property
    def ok(self) -> bool:
        return not self.error


def parse_answer(status_code: int | None, body: Any, error: str = "") -> Answer:
    """An Answer from a /generate reply (`text`, `output_ids`), or the reason it is none. Pure."""
    if error:
        return Answer(status_code, error=error)
    if status_code != 200:
        detail = body.get("error") if isinstance(body, dict) else body
        return Answer(status_code, error=f"HTTP {status_code}: {str(detail)[:120]}")
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        return Answer(status_code, error="HTTP 200 without a text")
    ids = body.get("output_ids")
    ids = [int(x) for x in ids] if isinstance(ids, list) and all(isinstance(x, int) for x in ids) else None
    return Answer(status_code, ids, body["text"])


@dataclass
class Parting:
    """Where an answer parts from its reference: the index (in tokens, or characters when no ids were given) and
    a short excerpt of each from there."""

    at: int
    unit: str  # "token" | "char"
    expected: str
    found: str

    def says(self) -> str:
        return f"parts at {self.unit} {self.at}: expected {self.expected!r}, found {self.found!r}"


def first_parting(ref: Answer, got: Answer) -> Parting | None:
    """Where `got` first differs from `ref` (None when they agree). Token ids when both have them, else text;
    an answer that stops early parts where it stops. Pure."""
    a: Sequence[object]
    b: Sequence[object]
    if ref.ids is not None and got.ids is not None:
        a, b, unit = ref.ids, got.ids, "token"
    else:
        a, b, unit = ref.text, got.text, "char"
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if at is None:
        if len(a) == len(b):
            return None
        at = min(len(a), len(b))
    # the excerpt in characters: for token ids, the text from about where the tokens part
    cut = at if unit == "char" else at * len(ref.text) // max(1, len(a))
    return Parting(at, unit, ref.text[cut : cut + 20], got.text[cut : cut + 20])


def judge_answer(ref: Answer, got: Answer, early_tokens: int, strict: bool) -> tuple[str, Parting | None]:
    """(pass | corrupt | late | failed, parting) of one answer against its reference. Pure."""
    if not got.ok:
        return FAILED, None
    p = first_parting(ref, got)
    if p is None:
        return PASS, None
    early = early_tokens if p.unit == "token" else early_tokens * CHARS_PER_TOKEN
    return (CORRUPT if strict or p.at < early else LATE), p


@dataclass
class SessionResult:
    session: int
    router: str  # the router label it went through
    status: str  # pass | corrupt | late | failed | unknown (its reference could not be made)
    turn: int | None = None  # the first turn that was not a pass
    parting: Parting | None = None
    found: str = ""  # what went wrong, in words


def judge_session(
    session: int,
    router: str,
    refs: list[Answer],
    got: list[Answer],
    early_tokens: int,
    strict: bool,
) -> SessionResult:
    """A session at concurrency N against its reference turns: its worst turn decides (corrupt > failed > late);
    a reference that failed is a failed session; one not sent, or a turn with no answer at N, is unknown. Pure."""
    bad = next((r for r in refs if not r.ok), None)
    if bad is not None and not bad.sent:
        return SessionResult(session, router, UNKNOWN, found=bad.error)
    if bad is not None or not refs:
        why = bad.error if bad else "no reference"
        return SessionResult(
            session, router, FAILED, turn=refs.index(bad) if bad else None, found=f"at concurrency 1: {why}"
        )
    if len(got) < len(refs):  # never passed for want of an answer
        return SessionResult(session, router, UNKNOWN, len(got), found="no answer at concurrency N to compare")
    worst: SessionResult = SessionResult(session, router, PASS)
    rank = {PASS: 0, LATE: 1, FAILED: 2, CORRUPT: 3}
    for turn, (ref, ans) in enumerate(zip(refs, got)):
        status, parting = judge_answer(ref, ans, early_tokens, strict)
        if rank[status] > rank[worst.status]:
            found = ans.error if status == FAILED else (parting.says() if parting else "")
            worst = SessionResult(session, router, status, turn, parting, found)
    return worst


@dataclass
class PairOutput:
    """One prefill x decode pair's greedy answer to the consensus prompt, against the reference."""

    name: str  # "prefill[0] -> decode[1]"
    status: str  # pass | corrupt | late | failed | unknown
    found: str = ""
    parting: Parting | None = None


def judge_pair_output(
    name: str, ref: Answer, got: Answer | None, why: str, early_tokens: int, *, unknown: bool = False
) -> PairOutput:
    """A pair's answer (None: its canary did not pass, `why` says how; `unknown`: a host did not answer) against
    the reference: every pair must give the same greedy tokens. Pure."""
    if got is None:
        return PairOutput(name, UNKNOWN if unknown else FAILED, why)
    if not ref.ok:
        return PairOutput(name, UNKNOWN, f"no reference answer: {ref.error}")
    status, parting = judge_answer(ref, got, early_tokens, strict=False)
    return PairOutput(name, status, parting.says() if parting else "", parting)


@dataclass
class PdUse:
    """Did the KV go prefill -> decode? The prefills' transfers (sglang:kv_transfer_latency_ms_count, summed) rose
    by at least one per request that went through a router and answered."""

    status: str  # pass | failed | unknown
    answered: int  # requests through the routers that answered 200
    transfers: float | None  # the rise of the prefills' transfer count (None: a prefill's /metrics not read)
    found: str = ""


def judge_pd_use(answered: int, before: dict[str, float | None], after: dict[str, float | None]) -> PdUse:
    """PD really used: prefill label -> its transfer count before and after the check's requests. Pure."""
    unread = sorted(k for k in before if before[k] is None or after.get(k) is None)
    if not answered:
        return PdUse(UNKNOWN, 0, None, "no request answered through the routers")
    if unread:
        return PdUse(UNKNOWN, answered, None, f"{', '.join(unread)}: transfer count not read")
    rise = sum(float(after[k] or 0) - float(before[k] or 0) for k in before)
    if rise < answered:
        return PdUse(
            FAILED,
            answered,
            rise,
            f"{answered} requests answered through the router(s), the prefills' KV transfers rose by {rise:g}: "
            "the decode computed prompts itself (a PD deployment that quietly is not PD)",
        )
    return PdUse(PASS, answered, rise, f"prefills' KV transfers rose by {rise:g} for {answered} answered requests")


@dataclass
class OutputsVerdict:
    ok: bool
    unknown: bool
    summary: str
    corruption_rate: float | None  # corrupt sessions / judged sessions; None when none could be judged
    next_steps: list[str] = field(default_factory=list)


def judge_outputs(
    sessions: list[SessionResult],
    pairs: list[PairOutput],
    pd: PdUse,
    *,
    concurrency: int,
    overlap_on: bool,
) -> OutputsVerdict:
    """The whole check: corrupt sessions, failed requests, disagreeing pairs and a PD that is not used fail it;
    with none of those, a session or pair that could not be judged makes it unknown. Pure."""
    judged = [s for s in sessions if s.status in (PASS, LATE, CORRUPT)]  # answered, so compared
    corrupt = [s for s in judged if s.status == CORRUPT]
    failed = [s for s in sessions if s.status == FAILED]
    late = [s for s in judged if s.status == LATE]
    bad_pairs = [p for p in pairs if p.status in (CORRUPT, FAILED)]
    rate = len(corrupt) / len(judged) if judged else None
    parts: list[str] = []
    if judged:
        parts.append(f"{len(corrupt)}/{len(judged)} sessions corrupt at concurrency {concurrency} ({rate:.0%})")
    if failed:
        parts.append(f"{len(failed)} session(s) with a failed request")
    if late:
        parts.append(f"{len(late)} late divergence(s), not counted")
    if pairs:
        parts.append(f"{len(pairs) - len(bad_pairs)}/{len(pairs)} pairs agree")
    if pd.status == FAILED:
        parts.append("PD not used")
    failing = bool(corrupt or failed or bad_pairs or pd.status == FAILED)
    unknown = not failing and (
        any(s.status == UNKNOWN for s in sessions) or any(p.status == UNKNOWN for p in pairs) or pd.status == UNKNOWN
    )
    steps: list[str] = []
    if corrupt and overlap_on:
        steps.append(OVERLAP_FIX)
    if pd.status == FAILED:
        steps.append(PD_FIX)
    if failed or any(p.status == FAILED for p in pairs):
        steps.append(NEXT_TRIAGE)
    if any(p.status == CORRUPT for p in pairs):
        steps.append("pdctl verify pairs (the disagreeing pair's workers), then pdctl restart --pair")
    return OutputsVerdict(not failing and not unknown, unknown, "; ".join(parts) or "nothing judged", rate, steps)


def outputs_rows(
    sessions: list[SessionResult], pairs: list[PairOutput], pd: PdUse, verdict: OutputsVerdict
) -> list[CheckResult]:
    """final-health's `outputs` layer: one row for the sessions, one per pair, one for PD use. Pure."""
    layer = "outputs"
    step = verdict.next_steps[0] if verdict.next_steps else ""
    bad = [x for x in sessions if x.status in (CORRUPT, FAILED)]
    first = bad[0] if bad else None
    rows = [
        CheckResult(
            layer,
            "sessions",
            f"{len(sessions)} sessions at concurrency {len(sessions)}",
            Status.FAIL if bad else (Status.UNKNOWN if any(x.status == UNKNOWN for x in sessions) else Status.PASS),
            observed=verdict.summary.split("; ")[0]
            + (f"; session {first.session} turn {first.turn}: {first.found}" if first else ""),
            expected="every answer as at concurrency 1",
            next_step=step if bad else "",
        )
    ]
    for p in pairs:
        status = {PASS: Status.PASS, LATE: Status.PASS, UNKNOWN: Status.UNKNOWN}.get(p.status, Status.FAIL)
        rows.append(
            CheckResult(
                layer,
                p.name,
                "greedy tokens",
                status,
                observed=p.found or "the reference's tokens",
                expected="the reference's tokens",
                next_step=step if status is Status.FAIL else "",
            )
        )
    pd_status = {PASS: Status.PASS, UNKNOWN: Status.UNKNOWN}.get(pd.status, Status.FAIL)
    rows.append(
        CheckResult(
            layer,
            "prefills",
            "PD used",
            pd_status,
            observed=pd.found,
            expected="one prefill KV transfer per answered request",
            next_step=PD_FIX if pd_status is Status.FAIL else "",
        )
    )
    return rows
