"""A pin under steady load: record the gauges a judge can use, with and without a pin (issue 15 item 5).

Bundled engine, real router, real pdctl library. A steady client load (tests/fixtures/client_load.py, 0.8 req/s)
runs through every phase; a sampler reads every worker's /metrics once a second (ops.inflight.read_point) and
writes one JSON line per sample: the phase, the summed PD gauges, each side's rooms and their balance, decode
generation tokens. Phases, on two deployments (both with the transfer delay that widens the KV window):
  fixed   (no race drill): load only for --load-s, then load + a random abort storm (`pdctl storm` default target);
  racy    (status-update-race drill): load for --pre-s, then an aimed storm (`--target transfer-window`, the
          calibration under the load) and --post-s more of load: the pin, if the storm made one.
At the end it replays the recorded series through the judge as `verify inflight --window W` would (a sliding
window every sample) and prints: pin time (the aborts that hit), the first pinned verdict, the false pinned verdicts
over how many seconds of load without a pin. Runtime about --load-s + --post-s + 3 minutes.
Usage: python bench/bench_pinload.py [--out /tmp/pinload.jsonl] [--load-s 150] [--post-s 120]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DELAY = "transfer-delay-ms=500"


class Recorder(threading.Thread):
    """read_point every second into `rows` (and the file), tagged with the current phase; bounded by max_s."""

    def __init__(self, dep, t0: float, out, max_s: float):
        super().__init__(daemon=True)
        self.dep, self.t0, self.out, self.max_s = dep, t0, out, max_s
        self.phase, self.stop, self.rows, self.points = "start", threading.Event(), [], []

    def run(self) -> None:
        from pdctl.ops.inflight import read_point

        k = 0
        while not self.stop.is_set() and time.monotonic() - self.t0 < self.max_s:
            p = read_point(self.dep, self.t0)
            self.points.append(p)
            row = {
                "t": round(p.t, 3),
                "phase": self.phase,
                "gauges": p.gauges,
                "gen": p.generation_tokens,
                "prefill_rooms": p.prefill_rooms,
                "decode_rooms": p.decode_rooms,
                "balance": p.balance,
                "errors": p.errors,
            }
            self.rows.append(row)
            self.out.write(json.dumps(row) + "\n")
            self.out.flush()
            k += 1
            self.stop.wait(max(0.0, self.t0 + k * 1.0 - time.monotonic()))


def deploy(name: str, drills: str, state: Path):
    from pdctl.inventory import parse_inventory
    from tests.e2e.helpers import local_inventory, pdctl, write_inventory
    from tests.fixtures.net import free_port

    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    data = local_inventory(name, ports, prefill_env={"PDCTL_DRILLS": drills})
    path = write_inventory(state / f"{name}.yaml", data)
    r = pdctl(["deploy", "-i", str(path), "--no-verify"], state=state, timeout=400)
    if r.code:
        raise SystemExit(r.output)
    return parse_inventory(data, str(path)), path, ports


def down(path: Path, state: Path) -> None:
    from tests.e2e.helpers import pdctl

    pdctl(["down", "-i", str(path)], state=state, timeout=120)


def replay(points, window_s: float):
    """The verdict a `verify inflight --window W` ending at each sample would give: [(t, verdict, pinned_by)]."""
    from pdctl.checks.inflight import BALANCE_WINDOW_S, judge_points

    out = []
    for i, p in enumerate(points):
        if p.t < points[0].t + window_s:
            continue
        # what a run of that window would have sampled, extended to the balance window as sample_inflight does
        v, _ = judge_points(
            [q for q in points[: i + 1] if q.t >= p.t - max(window_s, BALANCE_WINDOW_S) - 1.5], window_s
        )
        out.append((p.t, v.verdict if v else "none", getattr(v, "pinned_by", "") if v else ""))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/pinload.jsonl")
    ap.add_argument("--load-s", type=float, default=150.0)
    ap.add_argument("--pre-s", type=float, default=30.0)
    ap.add_argument("--post-s", type=float, default=120.0)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=0.8)
    ap.add_argument("--only", choices=("fixed", "racy", "both"), default="both")
    ap.add_argument("--aimed-requests", type=int, default=6, help="requests of the aimed storm (1: one pin at most)")
    args = ap.parse_args()

    from pdctl.ops.context import Deployment
    from pdctl.ops.storm import storm
    from pdctl.ops.storm_plan import StormConfig
    from tests.fixtures.client_load import ClientLoad

    state = Path(tempfile.mkdtemp(prefix="bench-pinload-"))
    os.environ["XDG_STATE_HOME"] = str(state)
    results = {}
    with open(args.out, "w") as out:
        for name, drills in (("fixed", DELAY), ("racy", f"status-update-race,{DELAY}")):
            if args.only not in (name, "both"):
                continue
            inv, path, ports = deploy(name, drills, state)
            try:
                with Deployment(inv) as dep:
                    t0 = time.monotonic()
                    rec = Recorder(dep, t0, out, max_s=args.load_s + args.post_s + 400)
                    rec.phase = f"{name}:load"
                    rec.start()
                    with ClientLoad(f"http://127.0.0.1:{ports['router']}", rate=args.rate) as load:
                        if name == "fixed":
                            time.sleep(args.load_s)
                            rec.phase = "fixed:load+random-storm"
                            storm(
                                dep,
                                StormConfig(
                                    requests=12,
                                    prompt_tokens=3000,
                                    abort_min_s=0.1,
                                    abort_max_s=3,
                                    sample_every_s=1,
                                    watch_s=4,
                                    calib_requests=0,
                                    seed=7,
                                    max_new_tokens=32,
                                ),
                            )
                            rec.phase = "fixed:load-after-storm"
                            time.sleep(30)
                        else:
                            time.sleep(args.pre_s)
                            rec.phase = "racy:load+aimed-storm"
                            ts = time.monotonic() - t0
                            rep = storm(
                                dep,
                                StormConfig(
                                    requests=args.aimed_requests,
                                    prompt_tokens=3000,
                                    target="transfer-window",
                                    calib_requests=2,
                                    sample_every_s=1,
                                    watch_s=4,
                                    seed=7,
                                    max_new_tokens=32,
                                ),
                            )
                            results["calibration"] = {
                                "ttft_s": rep.calibration.ttft_s if rep.calibration else None,
                                "transfer_s": getattr(rep.calibration, "transfer_latency_s", None),
                                "prefill_s": getattr(rep.calibration, "prefill_ttft_s", None),
                                "background_per_s": getattr(rep.calibration, "background_per_s", None),
                                "window_s": rep.window,
                                "spacing_s": rep.spacing_s,
                                "hits": rep.hits.hits if rep.hits else None,
                                "verdict": rep.verdict.reason if rep.verdict else None,
                            }
                            # the storm's times are relative to its own t0: shift to the recorder's clock
                            shift = rep.t0 - t0
                            results["aborts_at"] = sorted(
                                round(shift + rep.load_started_at + o.launch_at + o.aborted_s, 2)
                                for o in rep.outcomes
                                if o.aborted_s is not None
                            )
                            results["storm_started_at"] = round(ts, 2)
                            rec.phase = "racy:load-after-storm"
                            time.sleep(args.post_s)
                    results[f"{name}_load"] = load.summary()["sent"], len(load.failed)
                    rec.stop.set()
                    rec.join(10)
                    results[f"{name}_replay"] = replay(rec.points, args.window)
                    results[f"{name}_phases"] = [(r["t"], r["phase"]) for r in rec.rows]
            finally:
                down(path, state)
    for name in ("fixed", "racy"):
        rp = results.get(f"{name}_replay")
        if not rp:
            continue
        pinned = [(round(t, 1), by) for t, v, by in rp if v == "pinned"]
        print(
            f"[{name}] load {results.get(name + '_load')} verdicts: "
            f"{ {v: sum(1 for _t, x, _ in rp if x == v) for v in ('drained', 'busy', 'pinned')} }"
        )
        print(
            f"[{name}] pinned at {pinned[:5]}{' ...' if len(pinned) > 5 else ''} (of {len(rp)} windows, "
            f"{rp[-1][0] - rp[0][0]:.0f}s judged)"
        )
    print(json.dumps({k: v for k, v in results.items() if not k.endswith(("_replay", "_phases"))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
