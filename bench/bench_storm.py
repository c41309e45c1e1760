"""Storm and pin-detection figures on this machine (bundled engine, real router, real pdctl library).

1. Pin detection latency: with the status-update-race drill, one aimed abort pins a room; a watcher running
   `sample_inflight(window W, interval I)` back to back measures the time from the room getting pinned (the abort
   instant, when the room's status is overwritten and the queue gauge stops changing) to the first pinned verdict.
   Aim: within W + I.
2. Storm throughput: requests per second through the random storm (launch to last abort) and the aimed storm.
3. Hit rates: random vs aimed, against the racy build.
Prints a markdown table (median of the runs). Runtime: about 5-8 minutes. Usage: python bench/bench_storm.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=6.0)
    ap.add_argument("--interval", type=float, default=2.0)
    args = ap.parse_args()

    from pdctl.inventory import parse_inventory
    from pdctl.ops.context import Deployment
    from pdctl.ops.inflight import judge_points, read_point
    from pdctl.ops.storm import storm
    from pdctl.ops.storm_plan import StormConfig
    from tests.e2e.helpers import local_inventory, pdctl, write_inventory
    from tests.fixtures.net import free_port

    state = Path(tempfile.mkdtemp(prefix="bench-storm-"))
    os.environ["XDG_STATE_HOME"] = str(state)
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    data = local_inventory("bench", ports, prefill_env={"PDCTL_DRILLS": "status-update-race,transfer-delay-ms=500"})
    path = write_inventory(state / "inv.yaml", data)
    r = pdctl(["deploy", "-i", str(path), "--no-verify"], state=state)
    if r.code:
        print(r.output, file=sys.stderr)
        return 1
    detect, rps_random, rps_aimed, hit_random, hit_aimed = [], [], [], [], []
    try:
        inv = parse_inventory(data, str(path))
        with Deployment(inv) as dep:
            for run in range(args.runs):
                # pin detection: watcher loops verify-inflight windows; one aimed request pins a room
                found = {}
                stop = threading.Event()

                def watcher():
                    # a sliding `verify inflight`: a sample every interval, the last `window` judged each time
                    pts, t0 = [], time.monotonic()
                    for _ in range(int(120 / args.interval)):  # bounded
                        if stop.is_set():
                            return
                        pts.append(read_point(dep, t0))
                        v, _ = judge_points(pts, args.window)
                        if (
                            v
                            and v.verdict == "pinned"
                            and v.conclusive
                            and v.last.get("sglang:num_prefill_inflight_queue_reqs", 0) > run
                        ):
                            found["t"] = time.monotonic()
                            return
                        stop.wait(args.interval)

                w = threading.Thread(target=watcher, daemon=True)
                w.start()
                cfg = StormConfig(
                    requests=1,
                    prompt_tokens=3000,
                    target="transfer-window",
                    calib_requests=1,
                    sample_every_s=1,
                    watch_s=1,
                    seed=run,
                    max_new_tokens=16,
                )
                rep = storm(dep, cfg)
                o = rep.outcomes[0]
                pinned_at = None
                if o.aborted_s is not None:
                    # the abort instant on the monotonic clock: storm start + launch + abort delay
                    pinned_at = rep.t0 + rep.load_started_at + o.launch_at + o.aborted_s
                w.join(timeout=args.window * 4 + 30)
                stop.set()
                if pinned_at and "t" in found:
                    detect.append(found["t"] - pinned_at)
                # storm throughput + hit rates (12 requests each)
                for target, rps, hits in (
                    ("random", rps_random, hit_random),
                    ("transfer-window", rps_aimed, hit_aimed),
                ):
                    cfg = StormConfig(
                        requests=12,
                        prompt_tokens=3000,
                        target=target,
                        calib_requests=1,
                        sample_every_s=1,
                        watch_s=1,
                        seed=100 + run,
                        max_new_tokens=16,
                    )
                    rep = storm(dep, cfg)
                    span = rep.load_stopped_at - rep.load_started_at
                    rps.append(12 / span if span > 0 else float("nan"))
                    if rep.hits and rep.hits.hit_rate is not None:
                        hits.append(rep.hits.hit_rate)
    finally:
        pdctl(["down", "-i", str(path)], state=state, timeout=120)

    def med(xs, fmt):
        return fmt.format(statistics.median(xs)) if xs else "n/a"

    print(f"\n| figure (median of {args.runs} runs, {os.cpu_count()} cores) | value |")
    print("|---|---|")
    print(
        f"| pin detection: room pinned -> `verify inflight` says pinned (window {args.window:g}s, interval "
        f"{args.interval:g}s; aim <= {args.window + args.interval:g}s) | {med(detect, '{:.1f} s')} |"
    )
    print(f"| storm throughput, random (12 x 3000-token prompts, aborts 0.1-3 s) | {med(rps_random, '{:.2f} req/s')} |")
    print(f"| storm throughput, transfer-window (paced by calibration) | {med(rps_aimed, '{:.2f} req/s')} |")
    print(f"| hit rate, random | {med(hit_random, '{:.0%}')} |")
    print(f"| hit rate, transfer-window | {med(hit_aimed, '{:.0%}')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
