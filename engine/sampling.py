"""Logprobs of sampled tokens, as SGLang returns them: the log of the distribution the token was drawn from
(log_softmax of the masked logits, divided by the temperature when sampling; unscaled when greedy).

An entry is (logprob, [(token_id, logprob), ...top k]). pack/unpack carry one entry in the prefill's
success notification (the first output token is sampled at prefill, decode only streams it)."""

from __future__ import annotations

import math

import torch

Entry = tuple  # (float, list[tuple[int, float]])


def log_probs(logits: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    t = temperature if temperature > 1e-5 else 1.0
    return torch.log_softmax((logits.float() + mask) / t, dim=-1)


def entry(logits: torch.Tensor, tok: int, mask: torch.Tensor, temperature: float, k: int) -> Entry:
    lp = log_probs(logits, mask, temperature)
    top: list[tuple[int, float]] = []
    if k > 0:
        vals, idx = lp.topk(k)
        top = [(int(i), float(v)) for v, i in zip(vals, idx) if math.isfinite(float(v))]
    return float(lp[tok]), top


def pack(e: Entry | None) -> str:
    """'<lp>;<id>=<lp>,...' -- no ':' so it rides as one field of '<room>:S:<tok>:<packed>'."""
    if e is None:
        return ""
    return f"{e[0]!r};" + ",".join(f"{i}={v!r}" for i, v in e[1])


def unpack(s: str) -> Entry | None:
    if not s:
        return None
    try:
        lp, _, rest = s.partition(";")
        top = [(int(a), float(b)) for a, _, b in (x.partition("=") for x in rest.split(",") if x)]
        return float(lp), top
    except ValueError:
        return None
