"""Bench of the bundled engine on loopback: TTFT, decode tokens/s at concurrency 1, 8, 32, and KV
transfer GB/s of the engine's path vs a bare NIXL WRITE of the same bytes, same run.
Prints a markdown table (median of several runs). Usage: python -m bench.bench_engine [--runs 3]"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import re
import statistics
import time

import httpx

from tests.engine.stack import Stack


def _hist(url, name):
    t = httpx.get(f"{url}/metrics").text
    s = float(re.search(rf"^sglang:{name}_sum{{[^}}]*}} (\S+)", t, re.M).group(1))
    c = float(re.search(rf"^sglang:{name}_count{{[^}}]*}} (\S+)", t, re.M).group(1))
    return s, c


def _one(router, prompt, n, stream=True):
    t0 = time.monotonic()
    ttft = None
    with httpx.stream("POST", f"{router}/generate", timeout=120,
                      json={"text": prompt, "stream": stream, "sampling_params": {"max_new_tokens": n}}) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and ttft is None:
                ttft = time.monotonic() - t0
    return ttft, time.monotonic() - t0


def _decode_tps(router, conc, n=64):
    with cf.ThreadPoolExecutor(conc) as ex:
        t0 = time.monotonic()
        list(ex.map(lambda i: _one(router, f"bench prompt {i}", n), range(conc)))
        return conc * n / (time.monotonic() - t0)


def _dst_proc(nbytes, q_meta, q_done):
    import torch
    from nixl_cu12._api import nixl_agent, nixl_agent_config
    ag = nixl_agent("bench-dst", nixl_agent_config(enable_prog_thread=False, backends=["UCX"]))
    buf = torch.zeros(nbytes // 4)
    ag.register_memory(buf)
    q_meta.put((ag.get_agent_metadata(), buf.data_ptr()))
    while q_done.empty():
        ag.get_new_notifs()
        time.sleep(0.001)


def _nixl_pair(nbytes: int, runs: int) -> tuple[float, float]:
    """Two processes, nbytes DRAM->DRAM over UCX after a warm-up. Returns GB/s of (a) one bare WRITE,
    (b) the engine's NixlBackend.write path: 512-token chunks of 64-token pages out of a KVPool, as the
    transfer worker issues them (run merging, descriptors, polling, the last with a notification)."""
    import torch
    from engine.disaggregation.kv_pool import KVPool
    from engine.disaggregation.nixl_backend import NixlBackend
    from engine.model import ModelConfig
    cfg = ModelConfig()
    ctx = mp.get_context("spawn")
    qm, qd = ctx.Queue(), ctx.Queue()
    pool = KVPool(cfg.n_layers, cfg.d_model, 64, 1)
    npages = max(1, nbytes // pool.page_bytes)
    nbytes = npages * pool.page_bytes
    p = ctx.Process(target=_dst_proc, args=(nbytes, qm, qd))
    p.start()
    try:
        meta, addr = qm.get(timeout=60)
        pool = KVPool(cfg.n_layers, cfg.d_model, 64, npages + 1)
        be = NixlBackend("bench-src", pool)
        peer = be.add_peer(meta)
        ag = be.agent
        bare, eng = [], []
        for i in range(runs + 1):
            t0 = time.monotonic()
            h = ag.initialize_xfer("WRITE", ag.get_xfer_descs([(pool.base_addr, nbytes, 0)], "DRAM"),
                                   ag.get_xfer_descs([(addr, nbytes, 0)], "DRAM"), peer, b"")
            st = ag.transfer(h)
            while st not in ("DONE", "ERR"):
                st = ag.check_xfer_state(h)
            dt = time.monotonic() - t0
            ag.release_xfer_handle(h)
            t1 = time.monotonic()
            for s in range(0, npages, 8):
                pages = list(range(s, min(npages, s + 8)))
                be.write(peer, pages, addr, pages, pool.page_bytes, b"1:S:0" if s + 8 >= npages else b"")
            dt2 = time.monotonic() - t1
            if i:
                bare.append(nbytes / 1e9 / dt)
                eng.append(nbytes / 1e9 / dt2)
        return statistics.median(bare), statistics.median(eng)
    finally:
        qd.put(1)
        p.join(10)
        if p.is_alive():
            p.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    s = Stack().start()
    rows = []
    try:
        _one(s.router, "warm up", 4)
        ttft = statistics.median(_one(s.router, "hello " * 50, 4)[0] for _ in range(a.runs))
        ttft_long = statistics.median(_one(s.router, "hello " * 1000, 4)[0] for _ in range(a.runs))
        rows.append(("TTFT, 300-token prompt (s)", f"{ttft:.3f}"))
        rows.append(("TTFT, 6000-token prompt (s)", f"{ttft_long:.3f}"))
        for c in (1, 8, 32):
            rows.append((f"decode tokens/s, concurrency {c}",
                         f"{statistics.median(_decode_tps(s.router, c) for _ in range(a.runs)):.0f}"))
        # Engine path: per-request KV transfer speed as the prefill measures it (first chunk queued ->
        # last chunk written, chunked prefill compute overlapping), from its histogram.
        speeds, sizes = [], []
        for _ in range(a.runs):
            s0, c0 = _hist(s.prefill, "kv_transfer_speed_gb_s")
            m0, _ = _hist(s.prefill, "kv_transfer_total_mb")
            _one(s.router, "x" * 16000, 1, stream=False)
            s1, c1 = _hist(s.prefill, "kv_transfer_speed_gb_s")
            m1, _ = _hist(s.prefill, "kv_transfer_total_mb")
            speeds.append((s1 - s0) / (c1 - c0))
            sizes.append(m1 - m0)
        mb = statistics.median(sizes)
        e2e = statistics.median(speeds)
    finally:
        s.stop()
    bare, eng = _nixl_pair(int(mb * 1e6), a.runs)
    rows.append((f"KV transfer GB/s, engine transfer path (chunked page WRITEs, {mb:.1f} MB)", f"{eng:.2f}"))
    rows.append(("KV transfer GB/s, bare NIXL single WRITE of the same bytes", f"{bare:.2f}"))
    rows.append(("engine transfer path / bare NIXL", f"{eng / bare:.0%}"))
    rows.append(("request-level kv_transfer_speed_gb_s (first chunk queued -> last written, includes "
                 "overlapped prefill compute)", f"{e2e:.3f}"))
    print(f"| metric (median of {a.runs} runs) | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
