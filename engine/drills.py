"""Fault drills that reproduce the seed incidents on demand. Off unless named in env PDCTL_DRILLS
(comma list) or with --drill NAME.

- status-update-race: upstream's pre-fix update_status (max() lets Failed become Transferring) and a
  transfer worker that skips a room it no longer knows without forcing Failed; also disables the
  engine's inflight timeout (upstream has none), so a pinned room stays pinned.
- transfer-delay-ms=N: sleep N ms in the transfer worker per chunk (widens the abort window).
- degraded-bootstrap: models a decode restarted under a long-running prefill. The prefill remembers
  each decode it paired with by the decode's identity (its server host:port, sent with /kv/peer as
  decode_addr; not the NIXL agent name, which is new for every process). When a decode it already
  knew comes back as a new process (a new agent under the same identity), transfers to it fail
  silently (decode never sees success; prefill counts transfer_failed; every /health stays 200).
  A decode never seen before works; a restarted prefill has forgotten everything, so a co-restart heals.
- overlap-corruption[=N]: the seed's third failure, high-concurrency output corruption (CUDA-graph capture with
  bf16 index keys under multi-stream overlap), under SGLang's switch for it: while SGLANG_OPT_USE_MULTI_STREAM_OVERLAP
  is on (SGLang's default; the seed's fix set it to 0), a decode that joins a request to a running batch of N or
  more (default 8) writes that request's KV rows scrambled (each row's elements in reverse: a stand-in for the seed's
  aliased intermediates), so its output is garbage from its second token on, with a 200. Below N, or with the
  switch off, output is right.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DRILL_NAMES = ("status-update-race", "transfer-delay-ms=N", "degraded-bootstrap", "overlap-corruption[=N]")
OVERLAP_BATCH = 8  # overlap-corruption: the running batch (the joining request counted) from which rows go astray


@dataclass(frozen=True)
class Drills:
    status_update_race: bool = False
    transfer_delay_ms: int = 0
    degraded_bootstrap: bool = False
    overlap_corruption_batch: int = 0  # 0: off; else the batch size from which a joining request's KV goes astray

    def names(self) -> list[str]:
        out = []
        if self.status_update_race:
            out.append("status-update-race")
        if self.transfer_delay_ms:
            out.append(f"transfer-delay-ms={self.transfer_delay_ms}")
        if self.degraded_bootstrap:
            out.append("degraded-bootstrap")
        if self.overlap_corruption_batch:
            out.append(f"overlap-corruption={self.overlap_corruption_batch}")
        return out


def parse(cli: list[str] | None = None, env: str | None = None) -> Drills:
    """Combine --drill values and PDCTL_DRILLS; raises ValueError on an unknown drill."""
    env = os.environ.get("PDCTL_DRILLS", "") if env is None else env
    items = [x.strip() for x in env.split(",") if x.strip()] + [x.strip() for x in (cli or []) if x.strip()]
    kw: dict = {}
    for it in items:
        if it == "status-update-race":
            kw["status_update_race"] = True
        elif it == "degraded-bootstrap":
            kw["degraded_bootstrap"] = True
        elif it == "overlap-corruption" or it.startswith("overlap-corruption="):
            n = it.partition("=")[2] or str(OVERLAP_BATCH)
            if not n.isdigit() or int(n) < 1:
                raise ValueError(f"bad drill {it!r}: overlap-corruption's batch size must be an integer >= 1")
            kw["overlap_corruption_batch"] = int(n)
        elif it.startswith("transfer-delay-ms="):
            try:
                kw["transfer_delay_ms"] = int(it.split("=", 1)[1])
            except ValueError:
                raise ValueError(f"bad drill {it!r}: transfer-delay-ms needs an integer") from None
            if kw["transfer_delay_ms"] < 0:
                raise ValueError(f"bad drill {it!r}: delay must be >= 0")
        else:
            raise ValueError(f"unknown drill {it!r} (known: {', '.join(DRILL_NAMES)})")
    return Drills(**kw)
