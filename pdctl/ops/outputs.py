"""`pdctl verify outputs`: the same fixed, greedy prompts at concurrency 1 (the reference) and at concurrency N
through the routers, and one through every prefill x decode pair straight; pdctl.checks.outputs judges.

A session's turns go one after another (each turn's prompt is the reference transcript so far, so every request
at concurrency N has a reference answer); sessions spread over the routers in turn. Around the concurrent run the
prefills' KV transfer counts are read, to tell whether PD was used at all.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace

from pdctl.checks.outputs import (
    EARLY_TOKENS,
    MAX_TOKENS,
    OVERLAP_SWITCH,
    SESSIONS,
    TURNS,
    Answer,
    OutputsVerdict,
    PairOutput,
    PdUse,
    SessionResult,
    judge_outputs,
    judge_pair_output,
    judge_pd_use,
    judge_session,
    next_prompt,
    opener,
    parse_answer,
)
from pdctl.checks.metric_names import KV_TRANSFER_LATENCY_MS
from pdctl.checks.pairs import GENERATE_PATH  # SGLang's native endpoint: it answers `output_ids` beside the text
from pdctl.checks.pairs import PASS as PAIR_PASS
from pdctl.checks.pairs import UNKNOWN as PAIR_UNKNOWN
from pdctl.ops.context import Deployment

TRANSFERS = f"{KV_TRANSFER_LATENCY_MS}_count"  # one observation per KV transfer a prefill sent


@dataclass
class OutputsSettings:
    sessions: int = SESSIONS
    turns: int = TURNS
    max_tokens: int = MAX_TOKENS
    early_tokens: int = EARLY_TOKENS
    strict: bool = False
    pairs: bool = True
    timeout_s: float | None = None  # one request's bound; None: the inventory's final_health.probe.timeout


@dataclass
class OutputsReport:
    inventory: str
    settings: OutputsSettings
    elapsed_s: float
    sessions: list[SessionResult]
    pairs: list[PairOutput]
    pd_use: PdUse
    verdict: OutputsVerdict
    rule: str = (
        "an answer that parts from its concurrency-1 reference before its first early_tokens tokens is corrupt; "
        "a later parting is a late divergence (an engine that is not batch-invariant), said and not counted "
        "unless --strict"
    )
    notes: list[str] = field(default_factory=list)
    json_extra = ("ok", "exit_code", "next_steps")

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def next_steps(self) -> list[str]:
        return self.verdict.next_steps

    @property
    def exit_code(self) -> int:
        """0 every answer agreed; 1 corruption, a failed request, a disagreeing pair or PD not used; 3 nothing
        failed but something could not be judged."""
        return 0 if self.ok else (3 if self.verdict.unknown else 1)


def _generate(base: str, prompt: str, max_tokens: int, timeout: float, rid: str) -> Answer:
    """One greedy /generate; never raises."""
    from pdctl.checks.e2e import REQUEST_ID_HEADER
    from pdctl.checks.http_util import client, describe_error

    body = {
        "text": prompt,
        "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0},
        "stream": False,
        "rid": rid,
    }
    try:
        r = client().post(
            f"{base.rstrip('/')}{GENERATE_PATH}", json=body, timeout=timeout, headers={REQUEST_ID_HEADER: rid}
        )
    except Exception as e:
        return Answer(error=describe_error(e, timeout, base))
    try:
        parsed = r.json()
    except ValueError:
        parsed = r.text
    return parse_answer(r.status_code, parsed)


def _reference(base: str, session: int, s: OutputsSettings, timeout: float, tag: str) -> tuple[list[str], list[Answer]]:
    """Session `session` at concurrency 1: its prompts (each built from the answers before it) and answers."""
    prompts, answers = [opener(session)], []
    for turn in range(s.turns):
        a = _generate(base, prompts[-1], s.max_tokens, timeout, f"{tag}-ref-s{session}-t{turn}")
        answers.append(a)
        if not a.ok:
            break
        if turn + 1 < s.turns:
            prompts.append(next_prompt(prompts[-1], a.text, turn))
    return prompts, answers


def _transfer_counts(dep: Deployment) -> dict[str, float | None]:
    """prefill label -> its KV transfers so far (None: its /metrics could not be read)."""
    from pdctl.checks.sampling import fetch_metrics
    from pdctl.errors import PdctlError

    def count(role: str, i: int) -> float | None:
        try:
            ms = fetch_metrics(dep.base_url(role, i), families=[TRANSFERS])
        except PdctlError:
            return None
        return sum(x.value for x in ms.samples(TRANSFERS))

    return {dep.inv.label(*r.key): r.value for r in dep.each_instance(count, roles=("prefill",))}


def overlap_on_decodes(dep: Deployment) -> list[str]:
    """The decodes whose declared env leaves multi-stream overlap on, read as SGLang reads its EnvBool: unset, or a
    value it cannot parse, is its default (on)."""
    from pdctl.checks.lint import effective_env

    registry = {"fields": {OVERLAP_SWITCH: {"type": "EnvBool", "default": True}}}
    return [
        dep.inv.label("decode", j)
        for j, d in enumerate(dep.inv.roles.decode)
        if effective_env(OVERLAP_SWITCH, d.env, registry) is not False
    ]


def _pair_outputs(dep: Deployment, prompt: str, s: OutputsSettings, ref: Answer) -> list[PairOutput]:
    """The consensus prompt through every pair straight (verify pairs' canary), each answer against `ref`."""
    from pdctl.ops.pairs import verify_pairs

    rep = verify_pairs(dep, lineage=False, prompt=(prompt, s.max_tokens))
    out = []
    for r in rep.pairs:
        got = Answer(200, r.output_ids, r.text) if r.status == PAIR_PASS else None
        unknown = r.status == PAIR_UNKNOWN
        why = "" if got else ("unknown: " if unknown else "pair canary failed: ") + r.found
        out.append(judge_pair_output(r.name, ref, got, why, s.early_tokens, unknown=unknown))
    return out


def verify_outputs(dep: Deployment, settings: OutputsSettings | None = None) -> OutputsReport:
    """Run the check: the reference, the concurrent run between two reads of the prefills' transfer counts, then
    the pairs. Raises UnreachableError when no router can be asked."""
    from pdctl.ops.fanout import fan_out, raise_first_unreachable

    s = settings or OutputsSettings()
    inv = dep.inv
    timeout = s.timeout_s if s.timeout_s is not None else inv.final_health.probe.timeout
    s = replace(s, timeout_s=timeout)  # the report says the bound its requests had
    started = time.monotonic()
    tag = f"pdctl-outputs-{secrets.token_hex(4)}"  # pdctl's own requests, recognisable in every log
    routers = dep.each_instance(lambda role, i: dep.base_url(role, i), roles=("router",))
    raise_first_unreachable(routers)
    bases = [str(r.value) for r in routers]
    labels = [inv.label("router", i) for i in range(len(bases))]
    route = [k % len(bases) for k in range(s.sessions)]

    refs: list[tuple[list[str], list[Answer]]] = []
    with dep.progress.step(f"outputs: {s.sessions} session(s) x {s.turns} turn(s) at concurrency 1"):
        for k in range(s.sessions):
            refs.append(_reference(bases[route[k]], k, s, timeout, tag))
            if not all(a.ok for a in refs[-1][1]):  # the router fails already: one timeout is enough to say so
                gave_up = Answer(error=f"not sent: session {k} failed at concurrency 1", sent=False)
                refs += [([], [gave_up])] * (s.sessions - k - 1)
                break
    sendable = [k for k in range(s.sessions) if refs[k][1] and all(a.ok for a in refs[k][1])]

    def concurrent(k: int) -> list[Answer]:
        prompts = refs[k][0]
        return [
            _generate(bases[route[k]], p, s.max_tokens, timeout, f"{tag}-c{s.sessions}-s{k}-t{t}")
            for t, p in enumerate(prompts)
        ]

    before = _transfer_counts(dep)
    with dep.progress.step(f"outputs: the same sessions at concurrency {s.sessions}"):
        runs = fan_out([(f"session {k}", k) for k in sendable], concurrent, bound=max(1, len(sendable)))
    after = _transfer_counts(dep)
    got: list[list[Answer]] = [[] for _ in range(s.sessions)]
    for r in runs:
        got[r.key] = r.value or []
    sessions = [
        judge_session(k, labels[route[k]], refs[k][1], got[k], s.early_tokens, s.strict) for k in range(s.sessions)
    ]
    answered = sum(1 for answers in got for a in answers if a.ok)
    pd = judge_pd_use(answered, before, after)

    pairs: list[PairOutput] = []
    notes: list[str] = []
    if s.pairs and sendable:
        with dep.progress.step("outputs: the first prompt through every pair straight"):
            k = sendable[0]
            pairs = _pair_outputs(dep, refs[k][0][0], s, refs[k][1][0])
    else:
        notes.append("pairs not asked: " + ("--no-pairs" if not s.pairs else "no reference answer to compare with"))
    verdict = judge_outputs(sessions, pairs, pd, concurrency=s.sessions, overlap_on=bool(overlap_on_decodes(dep)))
    return OutputsReport(inv.name, s, round(time.monotonic() - started, 1), sessions, pairs, pd, verdict, notes=notes)
