"""One generation request as the scheduler sees it."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.events import Done, Failed, LogprobEntry, Sink

if TYPE_CHECKING:  # the HTTP process builds Reqs and never imports torch
    import torch

    from engine.model import KVCache

_ids = itertools.count()


@dataclass
class Req:
    rid: str
    input_ids: list[int]
    max_new_tokens: int
    # thread-safe delivery of the request's events (engine/events.py): Tokens..., then Done or Failed
    sink: Sink
    temperature: float = 0.0  # greedy: the engine's own health and warm-up runs, as SGLang's;
    #                                          an HTTP request gets SGLang's default, 1.0 (request_parse)
    top_p: float = 1.0
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    return_logprob: bool = False
    top_logprobs_num: int = 0
    first_logprob: LogprobEntry | None = None  # the first token's entry as prefill computed it (PD decode side)
    seed: int | None = None
    room: int | None = None
    bootstrap_host: str | None = None
    bootstrap_port: int | None = None
    health: bool = False  # /health_generate: local run, never the transfer path
    stream: bool = False  # the client asked for a stream (metrics' is_streaming label)
    created: float = field(default_factory=time.monotonic)
    out_ids: list[int] = field(default_factory=list)
    cache: KVCache | None = None  # the dense prompt cache while it prefills
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
            import torch

            self.gen = torch.Generator()
            self.gen.manual_seed(self.seed if self.seed is not None else next(_ids) * 7919 + 17)
        return self.gen

    def transfer_room(self) -> int:
        """The bootstrap room of a request on the transfer path (request_parse requires one in PD modes and the
        PD schedulers refuse a request without it, Scheduler.refused_without_bootstrap)."""
        if self.room is None:
            raise ValueError(f"request {self.rid} has no bootstrap room")
        return self.room

    def bootstrap_addr(self) -> tuple[str, int]:
        """The prefill's bootstrap server a request on the transfer path names (as transfer_room)."""
        if self.bootstrap_host is None or self.bootstrap_port is None:
            raise ValueError(f"request {self.rid} has no bootstrap host and port")
        return self.bootstrap_host, self.bootstrap_port

    def finish(self, reason: dict) -> None:
        if not self.done:
            self.done = True
            self.sink(Done(reason))

    def fail(self, code: int, msg: str) -> None:
        if not self.done:
            self.done = True
            self.sink(Failed(code, msg))
