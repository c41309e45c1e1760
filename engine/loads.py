"""GET /v1/loads as SGLang 0.5.23 serves it (python/sglang/srt/entrypoints/v1_loads.py, managers/load_snapshot.py,
scheduler_components/load_inquirer.py): one load snapshot per DP rank (the engine has one), its core fields always,
its sections (`memory`, `disaggregation`, `queues`; `speculative` and `lora` never, as SGLang without speculative
decoding or LoRA) unless `include` names only some; `format=prometheus` renders the numbers as gauges.

`snapshot` runs in the scheduler process (it reads the queues and the pool); `answer` in the HTTP process.
SGLang 0.5.23 has no `/loads` and no `/version` route: both answer 404 there, and here (smg asks `/loads` first,
then remembers that `/v1/loads` answered).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from engine import __version__

VALID_SECTIONS = frozenset({"core", "memory", "spec", "lora", "disagg", "queues", "all"})
# section key in a load -> its name in `include`
SECTIONS = (
    ("memory", "memory"),
    ("speculative", "spec"),
    ("lora", "lora"),
    ("disaggregation", "disagg"),
    ("queues", "queues"),
)
GB = float(1 << 30)


def _seqlen(r) -> int:
    return len(r.input_ids) + len(r.out_ids)


def snapshot(st) -> dict:
    """The load snapshot of this server (st: engine_state.EngineState), every section SGLang fills: the core
    fields in SGLang's order, then `memory`, `disaggregation` and `queues`."""
    s, mode = st.scheduler, st.args.disaggregation_mode
    stats = s.stats
    waiting = list(s.waiting)
    running = list(s.running)
    bootstrap, inflight = list(getattr(s, "bootstrap", ())), list(getattr(s, "inflight", ()))
    prealloc, transfer = list(getattr(s, "prealloc", ())), list(getattr(s, "transfer", ()))
    # waiting: every queue a request waits in before it runs; pending: those whose KV is not allocated yet
    waiting_queues, pending = [waiting], [waiting]
    awaiting_kv = 0
    if mode == "prefill":
        waiting_queues.append(bootstrap)
        pending.append(bootstrap)
    elif mode == "decode":
        waiting_queues += [prealloc, transfer]
        pending = [[r for r in prealloc if not r.pages]]  # the engine allocates in the prealloc queue; those count
        awaiting_kv = sum(_seqlen(r) for q in (prealloc, transfer) for r in q)
    kv = getattr(s, "kv", None)
    if kv is not None:
        from engine.scheduler_stats import kv_tokens

        used, capacity = kv_tokens(kv.pool)
        kv_bytes = kv.pool.pool.numel() * kv.pool.pool.element_size()
    else:  # a unified server keeps each running request's last window in a slot of its decode batch
        slots = s.slots
        window, n = slots.window, slots.n
        used = int(slots.pos[:n].clamp(max=window).sum()) if n else 0
        capacity = slots.kv.shape[2] * window
        kv_bytes = slots.kv.numel() * slots.kv.element_size()
    total = used + sum(_seqlen(r) for q in pending for r in q)
    uncached = 0
    if mode != "decode":  # no prefix cache: every waiting prompt token still has to be computed
        uncached = sum(len(r.input_ids) - r.prefill_pos for r in waiting) + sum(len(r.input_ids) for r in bootstrap)
    moments = stats.decode_moments
    m = st.metrics
    weights = sum(p.numel() * p.element_size() for p in s.model.p.values())
    return {
        "timestamp": time.time(),
        "dp_rank": 0,
        "num_running_reqs": len(running),
        "num_waiting_reqs": sum(len(q) for q in waiting_queues),
        "num_waiting_uncached_tokens": uncached,
        "num_used_tokens": used,
        "num_total_tokens": total,
        "num_active_tokens": max(0, total - awaiting_kv),
        "num_prealloc_ready_tokens": 0,  # a room that reached WaitingForInput has left the prealloc queue here
        "max_total_num_tokens": capacity,
        "max_running_requests": s.max_running,
        "token_usage": round(used / capacity if capacity else 0.0, 4),
        "gen_throughput": round(m.value("gen_throughput"), 2),  # the gauge the scheduler thread refreshes
        "cache_hit_rate": 0.0,  # no prefix cache
        "utilization": -1.0 if mode == "prefill" else 0.0,  # SGLang's: -1 on a prefill, no SLO setter elsewhere
        "total_prefill_uncached_tokens": stats.total_prefill_uncached_tokens,
        "total_prefill_busy_us": stats.total_prefill_busy_us,
        "decode_moments": list(moments) if moments[0] > 0 else None,
        "memory": {
            "weight_gb": round(weights / GB, 3),
            "kv_cache_gb": round(kv_bytes / GB, 3),
            "graph_gb": 0.0,
            "token_capacity": int(capacity),
        },
        "disaggregation": {
            "mode": mode,
            "prefill_bootstrap_queue_reqs": len(bootstrap),
            "prefill_inflight_queue_reqs": len(inflight),
            "decode_prealloc_queue_reqs": len(prealloc),
            "decode_transfer_queue_reqs": len(transfer),
            "decode_retracted_queue_reqs": 0,  # no retraction
            "kv_transfer_speed_gb_s": m.last.get("kv_transfer_speed_gb_s", 0.0),
            "kv_transfer_latency_ms": m.last.get("kv_transfer_latency_ms", 0.0),
        },
        "queues": {"waiting": len(waiting), "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0},
    }


def to_dict(load: dict, include: set[str] | None) -> dict:
    """SGLang's LoadSnapshot.to_dict: the core fields, plus the sections `include` asks for (all when None or
    "all"). An unknown section raises ValueError (which SGLang 0.5.23 leaves unhandled: HTTP 500)."""
    out = {k: v for k, v in load.items() if k not in dict(SECTIONS)}
    if include is None or "all" in include:
        include_all = True
    else:
        if not include <= VALID_SECTIONS:
            raise ValueError(
                f"Invalid include sections: {include - VALID_SECTIONS}. Valid options: {sorted(VALID_SECTIONS)}"
            )
        if include == {"core"}:
            return out
        include_all = False
    for key, name in SECTIONS:
        if key in load and (include_all or include is not None and name in include):
            out[key] = dict(load[key])
    return out


def answer(loads: list[dict], include: set[str] | None) -> dict:
    """The JSON body of GET /v1/loads. On a CPU SGLang names no accelerator (get_device_name returns None) and counts
    tp_size * pp_size = 1 behind the rank."""
    return {
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "version": __version__,
        "accelerator": None,
        "num_accelerators": 1,
        "loads": [to_dict(x, include) for x in loads],
    }


def prometheus(loads: list[dict], include: set[str] | None) -> str:
    """format=prometheus: every number as a gauge `sglang_<key>` (`sglang_<section>_<key>`, with `spec` and `disagg`
    for the speculative and disaggregation sections) labelled by dp_rank, in SGLang's layout."""
    prefixes = {"speculative": "spec", "disaggregation": "disagg"}
    samples: dict[str, list] = {}
    for load in loads:
        d = to_dict(load, include)
        rank = d.pop("dp_rank")
        for key, value in d.items():
            if isinstance(value, dict):
                for sub, v in value.items():
                    if isinstance(v, (int, float)):
                        samples.setdefault(f"sglang_{prefixes.get(key, key)}_{sub}", []).append((rank, v))
            elif isinstance(value, (int, float)):
                samples.setdefault(f"sglang_{key}", []).append((rank, value))
    lines = []
    for name, values in samples.items():
        lines.append(f"# TYPE {name} gauge")
        lines += [f'{name}{{dp_rank="{rank}"}} {v}' for rank, v in values]
    return "\n".join(lines) + "\n"
