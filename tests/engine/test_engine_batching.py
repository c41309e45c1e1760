"""Batching in the real PD stack (prefill + decode + sglang-router): concurrent requests of different lengths are
prefilled in shared steps and decoded in one batch, and every answer still equals the greedy reference."""

from __future__ import annotations

import concurrent.futures as cf
import os
import re

import httpx
import pytest
import torch

from engine.model import TinyLM
from engine.tokenizer import ByteTokenizer
from tests.engine.stack import Stack, wait_for

tok = ByteTokenizer()
# 1800 tokens: the last chunk (264 of a 512 budget) leaves room for the next request's first page in that step
LENGTHS = (1800, 1800, 40, 90, 1800, 25, 300, 60)


@pytest.fixture(scope="module")
def stack():
    with Stack().running() as s:
        yield s


def _prompt(i: int, n: int) -> str:
    return (f"req {i}: " + "the quick brown fox jumps over the lazy dog " * 50)[:n]


def _log(s: Stack, name: str) -> str:
    with open(os.path.join(s.logdir, f"{name}.log"), errors="replace") as f:
        return f.read()


def test_concurrent_requests_share_prefill_steps_and_the_decode_batch(stack):
    n_new = 200  # long enough that the requests overlap in the decode batch

    def one(i):
        r = httpx.post(
            f"{stack.router}/generate",
            timeout=60,
            json={"text": _prompt(i, LENGTHS[i]), "sampling_params": {"max_new_tokens": n_new, "temperature": 0}},
        )
        r.raise_for_status()
        return r.json()["text"]

    with cf.ThreadPoolExecutor(len(LENGTHS)) as ex:
        texts = list(ex.map(one, range(len(LENGTHS))))
    torch.set_num_threads(1)  # the reference in this process: intra-op threads only fight the servers for 2 cores
    ref = TinyLM()
    for i, text in enumerate(texts):
        assert text == tok.decode(ref.generate_greedy(tok.encode(_prompt(i, LENGTHS[i])), n_new)), f"request {i}"
    # the engines' own batch log lines (SGLang's wording): some prefill step held several requests' chunks,
    # some decode step ran several requests
    seqs = wait_for(
        lambda: [int(x) for x in re.findall(r"Prefill batch, #new-seq: (\d+)", _log(stack, "prefill"))],
        5,
        "prefill batch log lines",
    )
    assert max(seqs) >= 2, seqs
    running = [int(x) for x in re.findall(r"Decode batch, #running-req: (\d+)", _log(stack, "decode"))]
    assert running and max(running) >= 2, running
