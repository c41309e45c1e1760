"""Triage's findings from the outputs check (`pdctl triage --outputs`): corruption under concurrency named as the
seed's multi-stream overlap failure when a decode runs with the switch on, and a PD deployment that is not PD. Pure:
ops/triage.py runs the check and hands its summary here; checks/triage.py calls `outputs_findings`."""

from __future__ import annotations

from dataclasses import dataclass, field

from pdctl.checks.outputs import OVERLAP_FIX, OVERLAP_SWITCH, PD_FIX
from pdctl.checks.triage_finding import Finding


@dataclass
class OutputsSummary:
    """What the outputs check saw, for triage."""

    concurrency: int
    judged: int  # sessions whose answers were compared
    corrupt: int
    example: str = ""  # "session 3 turn 1: parts at token 1: expected ..., found ..."
    pd_status: str = "pass"  # pass | failed | unknown
    pd_found: str = ""
    overlap_on: list[str] = field(default_factory=list)  # decodes whose declared env leaves the switch on


def outputs_findings(s: OutputsSummary) -> list[Finding]:
    """0-2 findings. Pure."""
    out = []
    if s.corrupt:
        observed = [
            f"{s.corrupt}/{s.judged} sessions corrupt at concurrency {s.concurrency}, every answer a 200; "
            "the same prompts at concurrency 1 answered right",
        ] + ([s.example] if s.example else [])
        if s.overlap_on:
            observed.append(
                f"{', '.join(s.overlap_on)}: {OVERLAP_SWITCH} on (not set is on: SGLang's default), per the inventory"
            )
            inferred = [
                "the seed's high-concurrency output corruption: multi-stream overlap (CUDA-graph capture with bf16 "
                "index keys) corrupts KV under a large decode batch; the seed fixed it with the switch off"
            ]
            action, step = f"set {OVERLAP_FIX}; then `pdctl verify outputs` must show 0 corrupt", OVERLAP_FIX
        else:
            inferred = [
                f"corruption that depends on concurrency, with {OVERLAP_SWITCH} already off: another batch-size "
                "dependent bug (a kernel, a cache, a quantisation path)"
            ]
            action, step = "collect `pdctl logs decode`, compare builds, bisect the decodes' flags", "pdctl logs decode"
        out.append(
            Finding(
                "outputs corrupt under concurrency",
                "action",
                observed,
                inferred,
                action,
                kind="outputs-corruption",
                next_step=step,
            )
        )
    if s.pd_status == "failed":
        out.append(
            Finding(
                "PD is not used: the decode computes the prompts itself",
                "action",
                [s.pd_found],
                ["no KV transfer backend moves KV (fake, or none configured), or the router is not in PD mode"],
                f"run {PD_FIX}",
                kind="outputs-not-pd",
                next_step="pdctl verify final-health --layer flags",
            )
        )
    return out
