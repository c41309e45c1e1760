"""One generation request as the scheduler sees it."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

_ids = itertools.count()


@dataclass
class Req:
    rid: str
    input_ids: list[int]
    max_new_tokens: int
    sink: Callable[[tuple], None]            # thread-safe delivery of ("tokens", ids) / ("done", reason) / ("error", code, msg)
    temperature: float = 0.0
    top_p: float = 1.0
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    room: int | None = None
    bootstrap_host: str | None = None
    bootstrap_port: int | None = None
    health: bool = False                     # /health_generate: local run, never the transfer path
    stream: bool = True                      # False: the caller wants the final answer only (no token events)
    created: float = field(default_factory=time.monotonic)
    out_ids: list[int] = field(default_factory=list)
    cache: object = None
    prefill_pos: int = 0
    pages: list[int] = field(default_factory=list)
    t_queue: float = 0.0
    first_token_at: float | None = None
    done: bool = False
    gen: torch.Generator | None = None

    def generator(self) -> torch.Generator | None:
        if self.temperature <= 1e-5:
            return None
        if self.gen is None:
            self.gen = torch.Generator()
            self.gen.manual_seed(self.seed if self.seed is not None else next(_ids) * 7919 + 17)
        return self.gen

    def finish(self, reason: dict) -> None:
        if not self.done:
            self.done = True
            self.sink(("done", reason))

    def fail(self, code: int, msg: str) -> None:
        if not self.done:
            self.done = True
            self.sink(("error", code, msg))
