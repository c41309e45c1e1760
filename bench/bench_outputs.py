"""What a default `pdctl verify outputs` costs (issue 29): wall time of the whole command and the requests it sends,
side by side with `pdctl verify pairs` (the baseline: one canary per pair) in the same run, interleaved, on a
bundled-engine 1P1D behind the router that this script deploys on free ports and takes down.

Usage: python bench/bench_outputs.py [--runs 5] [--sessions 30]
Prints one line per command: the median, min and max of --runs wall times, and the check's own elapsed time.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _inventory() -> dict:
    worker = {"host": "local", "ready_timeout": 180}
    return {
        "name": "bench-outputs",
        "engine": "bundled",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
        "roles": {
            "prefill": [{**worker, "port": _port(), "bootstrap_port": _port()}],
            "decode": [{**worker, "port": _port()}],
            "router": [
                {**worker, "port": _port(), "args": {"--prometheus-port": _port(), "--health-check-interval-secs": 2}}
            ],
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sessions", type=int, default=30)
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="bench-outputs-"))
    inv = state / "inv.yaml"
    inv.write_text(yaml.safe_dump(_inventory()))
    env = {**os.environ, "XDG_STATE_HOME": str(state)}

    def pdctl(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pdctl", *a, "-i", str(inv)], cwd=REPO, env=env, capture_output=True, text=True
        )

    r = pdctl("deploy", "--no-verify")
    if r.returncode:
        print(r.stdout + r.stderr)
        return 1
    try:
        commands = {
            "verify outputs": ["verify", "outputs", "--sessions", str(args.sessions), "--json"],
            "verify pairs (baseline)": ["verify", "pairs", "--json"],
        }
        walls: dict[str, list[float]] = {k: [] for k in commands}
        own: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                t0 = time.perf_counter()
                r = pdctl(*argv)
                walls[name].append(time.perf_counter() - t0)
                doc = json.loads(r.stdout)
                if r.returncode:
                    print(f"{name} exited {r.returncode}: {r.stdout[:400]}")
                    return 1
                own[name].append(doc.get("elapsed_s") or doc.get("elapsed_ms", 0) / 1000)
        requests = args.sessions * 2 * 2 + 1
        for name in commands:
            w = walls[name]
            print(
                f"{name:26s} median {statistics.median(w):.2f}s (min {min(w):.2f}, max {max(w):.2f}; "
                f"its own clock {statistics.median(own[name]):.2f}s) over {args.runs} runs"
                + (f"; {requests} requests" if name == "verify outputs" else "; 1 canary")
            )
    finally:
        pdctl("down")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
