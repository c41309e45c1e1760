"""Bench of the bundled engine on loopback, prefill + decode + the real sglang-router on this machine:
decode tokens/s at concurrency 1, 8, 32 and a storm of 90 x 20k-token prompts, each side by side with the
engine of a baseline commit (extracted with `git archive` into a temp dir and run the same way, same run);
TTFT; KV transfer GB/s of the engine's path vs a bare NIXL WRITE of the same bytes.

The load comes from a separate process (non-streaming requests from threads there); tokens are counted from
the servers' own counters: decode's sglang:generation_tokens_total over the measured window, prefill's
sglang:prompt_tokens_total for the storm. Prints a markdown table (median of several runs).
Usage: python -m bench.bench_engine [--runs 3] [--baseline-ref REF | --no-baseline] [--only decode,step,storm]"""

from __future__ import annotations

import argparse
import io
import multiprocessing as mp
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

import httpx

from tests.engine.stack import ROOT, Stack, metric_sum, server_pids

BASELINE_REF = "acd8547"  # main before issue 16's batching (per-request attention, one chunk a step)
STORM_N, STORM_TOKENS, STORM_OUT = 90, 20000, 4
# Decode must hold the pages of a 20k prompt per request until it finishes: 16 at a time (~330 MB per pool).
POOL_TOKENS = 16 * 20480


class TreeStack(Stack):
    """A Stack whose engines run from another source tree, with a given KV pool size."""

    def __init__(self, root: str, max_total_tokens: int | None = None, **kw):
        super().__init__(**kw)
        self.root, self.mtt = root, max_total_tokens

    def worker_argv(self, mode, port, bootstrap_port=None):
        extra = ["--max-total-tokens", str(self.mtt)] if self.mtt else []
        return super().worker_argv(mode, port, bootstrap_port) + extra

    def _spawn(self, name, argv, env):
        log = open(os.path.join(self.logdir, f"{name}.log"), "ab")
        e = {**os.environ, "PYTHONPATH": self.root, **env}
        self.procs[name] = subprocess.Popen(
            argv, cwd=self.root, env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def extract_tree(ref: str) -> str:
    """The engine/ of commit ref in a temp dir (the caller removes it)."""
    d = tempfile.mkdtemp(prefix="bench-engine-base-")
    data = subprocess.run(["git", "archive", ref, "engine"], cwd=ROOT, check=True, capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(data)).extractall(d)
    return d


def _hist(url, name):
    t = httpx.get(f"{url}/metrics").text
    s = float(re.search(rf"^sglang:{name}_sum{{[^}}]*}} (\S+)", t, re.M).group(1))
    c = float(re.search(rf"^sglang:{name}_count{{[^}}]*}} (\S+)", t, re.M).group(1))
    return s, c


def _one(router, prompt, n, stream=True):
    t0 = time.monotonic()
    ttft = None
    with httpx.stream(
        "POST",
        f"{router}/generate",
        timeout=600,
        json={"text": prompt, "stream": stream, "sampling_params": {"max_new_tokens": n, "temperature": 0}},
    ) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and ttft is None:
                ttft = time.monotonic() - t0
    return ttft, time.monotonic() - t0


def _load_proc(router, conc, prompts, max_new, stop, done_q):
    """The load generator's process: conc threads, each sending non-streaming requests back to back (from
    `prompts` in turn) until `stop` is set; or, with prompts of the storm, each prompt once. Puts (ok, failed)."""
    ok, failed, lock = [0], [0], threading.Lock()
    it = iter(prompts)

    def worker():
        with httpx.Client(timeout=900) as c:
            while not stop.is_set():
                with lock:
                    p = next(it, None)
                if p is None:
                    return
                try:
                    r = c.post(
                        f"{router}/generate",
                        json={"text": p, "sampling_params": {"max_new_tokens": max_new, "temperature": 0}},
                    )
                    good = r.status_code == 200
                except httpx.HTTPError:
                    good = False
                with lock:
                    ok[0] += good
                    failed[0] += not good

    ts = [threading.Thread(target=worker) for _ in range(conc)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    done_q.put((ok[0], failed[0]))


def _gen_tokens(url):
    return metric_sum(url, "sglang:generation_tokens_total")


def _cpu_s(pid: int) -> float:
    """utime + stime of a local server, seconds: its processes (an engine of this tree runs its scheduler in a
    child process; a baseline from before runs in one)."""
    total = 0
    for p in server_pids(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _decode_tps(s: Stack, conc: int, warm: float, window: float, max_new: int = 256) -> tuple[float, float]:
    """Decode tokens/s at `conc` requests in flight: the decode's generation_tokens_total over `window` seconds,
    after `warm` seconds of the same load; and the same tokens per CPU second of the decode process (the figure
    that other load on the machine disturbs least)."""
    ctx = mp.get_context("spawn")
    stop, q = ctx.Event(), ctx.Queue()
    p = ctx.Process(target=_load_proc, args=(s.router, conc, _Cycle(conc), max_new, stop, q))
    p.start()
    pid = s.procs["decode"].pid
    try:
        time.sleep(warm)
        n0, c0, t0 = _gen_tokens(s.decode), _cpu_s(pid), time.monotonic()
        time.sleep(window)
        n1, c1, t1 = _gen_tokens(s.decode), _cpu_s(pid), time.monotonic()
        return (n1 - n0) / (t1 - t0), (n1 - n0) / max(c1 - c0, 1e-9)
    finally:
        stop.set()
        p.join(120)
        if p.is_alive():
            p.kill()


class _Cycle:
    """Endless distinct short prompts (picklable for the spawned load process)."""

    def __init__(self, seed):
        self.i, self.seed = 0, seed

    def __iter__(self):
        return self

    def __next__(self):
        self.i += 1
        return f"bench prompt {self.seed} {self.i}"


def _storm(s: Stack, timeout: float) -> dict:
    """90 x 20k-token prompts at once; seconds from the storm's start to all prefilled (the prefill's
    prompt_tokens_total) and to all answered (the load process's end)."""
    ctx = mp.get_context("spawn")
    stop, q = ctx.Event(), ctx.Queue()
    prompts = [(f"storm {i} " + "lorem ipsum dolor sit amet " * 800)[:STORM_TOKENS] for i in range(STORM_N)]
    target = sum(len(x.encode()) for x in prompts)
    base = metric_sum(s.prefill, "sglang:prompt_tokens_total")
    p = ctx.Process(target=_load_proc, args=(s.router, STORM_N, prompts, STORM_OUT, stop, q))
    t0 = time.monotonic()
    p.start()
    prefilled = answered = None
    try:
        while time.monotonic() - t0 < timeout:
            if prefilled is None and metric_sum(s.prefill, "sglang:prompt_tokens_total") - base >= target:
                prefilled = time.monotonic() - t0
            if answered is None and not p.is_alive():
                answered = time.monotonic() - t0
            if prefilled is not None and answered is not None:
                break
            time.sleep(0.2)
        stop.set()
        p.join(60)
        ok, failed = q.get(timeout=5) if not q.empty() else (0, STORM_N)
        return {"prefilled": prefilled, "answered": answered, "ok": ok, "failed": failed}
    finally:
        if p.is_alive():
            p.kill()


# The decode step alone in one process (no HTTP): batch 1, 8, 32 over the decode load's 20..275-token contexts.
STEP_CODE = r"""
import statistics, sys, time, torch
torch.set_num_threads(1)
from engine.model import TinyLM
m, g, ms = TinyLM(), torch.Generator().manual_seed(0), {1: [], 8: [], 32: []}
made = {B: (m.new_slots(B), [150] if B == 1 else [20 + b * 255 // (B - 1) for b in range(B)]) for B in ms}
w = getattr(m.cfg, "kv_dim", m.cfg.d_model)  # a baseline from before GQA has no kv_dim
[s.join(torch.randn(m.cfg.n_layers, 2, n, w, generator=g), n) for s, ns in made.values() for n in ns]
for r in range(int(sys.argv[1]) + 1):  # the first round warms up (and compiles the step)
    for B, (s, ns) in made.items():
        t = time.perf_counter()
        for _ in range(100):
            m.decode([40] * B, s)
            s.pos[:B] = torch.tensor(ns)
        ms[B].append((time.perf_counter() - t) * 10)
print(*(statistics.median(v[1:]) for v in ms.values()))
"""


def _engine_figures(root: str, a, label: str, storm_runs: int) -> dict:
    """Every figure of one engine tree, each on its own fresh stack."""
    out: dict = {}
    if "step" in a.only:  # in a process of its own, on the tree's engine
        res = subprocess.run(
            [sys.executable, "-c", STEP_CODE, str(3 * a.runs)],
            cwd=root,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": root},
            check=True,
        ).stdout
        out.update({f"step{c}": float(v) for c, v in zip((1, 8, 32), res.splitlines()[-1].split())})
    if "decode" in a.only or "ttft" in a.only:
        st = TreeStack(root).start()
        try:
            _one(st.router, "warm up", 4)
            if "ttft" in a.only:
                out["ttft300"] = statistics.median(_one(st.router, "hello " * 50, 4)[0] for _ in range(a.runs))
                out["ttft6000"] = statistics.median(_one(st.router, "hello " * 1000, 4)[0] for _ in range(a.runs))
            if "decode" in a.only:
                # interleaved (1, 8, 32, 1, 8, 32, ...) so that a change in the machine's other load hits every
                # concurrency alike; the 32/1 ratio is the median of each round's own ratio
                runs: dict[int, list] = {1: [], 8: [], 32: []}
                for _ in range(a.runs):
                    for c in runs:
                        runs[c].append(_decode_tps(st, c, a.warm, a.window))
                    print(
                        f"[{label}] decode round: {[(c, round(v[-1][0]), round(v[-1][1])) for c, v in runs.items()]}",
                        flush=True,
                    )
                for c, v in runs.items():
                    tps = [x for x, _ in v]
                    out[f"decode{c}"] = (statistics.median(tps), min(tps), max(tps))
                    out[f"cpu{c}"] = statistics.median(y for _, y in v)
                out["ratio"] = statistics.median(x[0] / y[0] for x, y in zip(runs[32], runs[1]))
                out["cpu_ratio"] = statistics.median(x[1] / y[1] for x, y in zip(runs[32], runs[1]))
        finally:
            st.stop()
    if "storm" in a.only:
        runs = []
        for _ in range(storm_runs):
            st = TreeStack(root, POOL_TOKENS).start()
            try:
                _one(st.router, "warm up", 4)
                runs.append(_storm(st, a.storm_timeout))
                print(f"[{label}] storm: {runs[-1]}", flush=True)
            finally:
                st.stop()
        out["storm"] = runs
    return out


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
    from engine.disaggregation.kv_pool import KVPool
    from engine.disaggregation.nixl_backend import NixlBackend
    from engine.model import ModelConfig

    cfg = ModelConfig()
    ctx = mp.get_context("spawn")
    qm, qd = ctx.Queue(), ctx.Queue()
    pool = KVPool(cfg.n_layers, cfg.kv_dim, 64, 1)
    npages = max(1, nbytes // pool.page_bytes)
    nbytes = npages * pool.page_bytes
    p = ctx.Process(target=_dst_proc, args=(nbytes, qm, qd))
    p.start()
    try:
        meta, addr = qm.get(timeout=60)
        pool = KVPool(cfg.n_layers, cfg.kv_dim, 64, npages + 1)
        be = NixlBackend("bench-src", pool)
        peer = be.add_peer(meta)
        ag = be.agent
        bare, eng = [], []
        for i in range(runs + 1):
            t0 = time.monotonic()
            h = ag.initialize_xfer(
                "WRITE",
                ag.get_xfer_descs([(pool.base_addr, nbytes, 0)], "DRAM"),
                ag.get_xfer_descs([(addr, nbytes, 0)], "DRAM"),
                peer,
                b"",
            )
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


def _fmt_range(v):
    return f"{v[0]:.0f} ({v[1]:.0f}-{v[2]:.0f})" if v else "-"


def _fmt_storm(runs, key):
    xs = [r[key] for r in runs or [] if r[key] is not None]
    if not runs:
        return "-"
    if len(xs) < len(runs):
        return f"not within the limit in {len(runs) - len(xs)} of {len(runs)} runs" + (
            f"; {statistics.median(xs):.1f} s in the others" if xs else ""
        )
    return f"{statistics.median(xs):.1f} s" + (f" ({min(xs):.1f}-{max(xs):.1f})" if len(xs) > 1 else "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--storm-runs", type=int, default=2)
    ap.add_argument("--baseline-storm-runs", type=int, default=1, help="the baseline's storm takes minutes")
    ap.add_argument("--storm-timeout", type=float, default=600)
    ap.add_argument("--warm", type=float, default=2.0, help="seconds of load before the measured window")
    ap.add_argument("--window", type=float, default=8.0, help="seconds of the measured decode window")
    ap.add_argument("--baseline-ref", default=BASELINE_REF)
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--only", default="ttft,decode,storm,transfer")
    a = ap.parse_args()
    a.only = set(a.only.split(","))
    new = _engine_figures(ROOT, a, "this tree", a.storm_runs)
    old: dict = {}
    if not a.no_baseline:
        base = extract_tree(a.baseline_ref)
        try:
            old = _engine_figures(base, a, a.baseline_ref, a.baseline_storm_runs)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    rows = []
    if "ttft" in a.only:
        for k, n in (("ttft300", 300), ("ttft6000", 6000)):
            rows.append((f"TTFT, {n}-token prompt (s)", f"{old[k]:.3f}" if k in old else "-", f"{new[k]:.3f}"))
    if "decode" in a.only:
        for c in (1, 8, 32):
            rows.append(
                (f"decode tokens/s, concurrency {c}", _fmt_range(old.get(f"decode{c}")), _fmt_range(new[f"decode{c}"]))
            )
        ratio = lambda f, k: f"{f[k]:.1f}x" if f else "-"  # noqa: E731
        rows.append(
            (
                "decode tokens/s, concurrency 32 / concurrency 1 (median of the rounds' ratios)",
                ratio(old, "ratio"),
                ratio(new, "ratio"),
            )
        )
        for c in (1, 8, 32):
            rows.append(
                (
                    f"decode tokens per decode-process CPU second, concurrency {c}",
                    f"{old[f'cpu{c}']:.0f}" if old else "-",
                    f"{new[f'cpu{c}']:.0f}",
                )
            )
        rows.append(("the same, concurrency 32 / concurrency 1", ratio(old, "cpu_ratio"), ratio(new, "cpu_ratio")))
    if "step" in a.only:  # ms per step; then tokens per second at batch 32 over batch 1
        rows += [
            (f"decode step alone, batch {c} (ms)", *(f"{f[f'step{c}']:.3f}" if f else "-" for f in (old, new)))
            for c in (1, 8, 32)
        ] + [
            (
                "the same, batch 32 / batch 1 tokens/s",
                *(f"{32 * f['step1'] / f['step32']:.1f}x" if f else "-" for f in (old, new)),
            )
        ]
    if "storm" in a.only:
        for key, what in (("prefilled", "prefilled (prefill prompt_tokens_total)"), ("answered", "answered")):
            rows.append(
                (
                    f"storm {STORM_N} x {STORM_TOKENS // 1000}k tokens, start -> all {what}",
                    _fmt_storm(old.get("storm"), key),
                    _fmt_storm(new["storm"], key),
                )
            )
        fails = lambda f: str(sum(r["failed"] for r in f["storm"])) if f else "-"  # noqa: E731
        rows.append(("storm requests failed (all runs)", fails(old), fails(new)))
    if "transfer" in a.only:
        s = Stack().start()
        try:
            _one(s.router, "warm up", 4)
            speeds, sizes = [], []
            for _ in range(a.runs):
                s0, c0 = _hist(s.prefill, "kv_transfer_speed_gb_s")
                m0, _ = _hist(s.prefill, "kv_transfer_total_mb")
                _one(s.router, "x" * 16000, 1, stream=False)
                s1, c1 = _hist(s.prefill, "kv_transfer_speed_gb_s")
                m1, _ = _hist(s.prefill, "kv_transfer_total_mb")
                speeds.append((s1 - s0) / (c1 - c0))
                sizes.append(m1 - m0)
            mb, e2e = statistics.median(sizes), statistics.median(speeds)
        finally:
            s.stop()
        bare, eng = _nixl_pair(int(mb * 1e6), a.runs)
        rows.append((f"KV transfer GB/s, engine transfer path (chunked page WRITEs, {mb:.1f} MB)", "-", f"{eng:.2f}"))
        rows.append(("KV transfer GB/s, bare NIXL single WRITE of the same bytes", "-", f"{bare:.2f}"))
        rows.append(("engine transfer path / bare NIXL", "-", f"{eng / bare:.0%}"))
        rows.append(("request-level kv_transfer_speed_gb_s (first chunk queued -> last written)", "-", f"{e2e:.3f}"))
    base_name = "-" if a.no_baseline else f"before ({a.baseline_ref})"
    print(
        f"| metric (median of {a.runs} runs; storm {a.storm_runs}, baseline's {a.baseline_storm_runs}) "
        f"| {base_name} | now |"
    )
    print("|---|---|---|")
    for k, v0, v1 in rows:
        print(f"| {k} | {v0} | {v1} |")


if __name__ == "__main__":
    main()
