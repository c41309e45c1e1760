"""Failed client requests during `restart --rolling` against `restart --pair`, under the same checked load.

A local 2 prefill x 2 decode x 1 router deployment of the bundled engine (free ports); a client load of 2 requests
a second through the router (tests/fixtures/client_load.py: each request checked: HTTP 200, text, finish_reason);
then, alternating, `restart --rolling` and `restart --pair` with the load running, each RUNS times. Prints one JSON
document: per run the requests sent and failed and the restart's wall time; the medians.

    python3 bench/bench_rolling.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.helpers import pdctl, write_inventory  # noqa: E402
from tests.e2e.test_verify_pairs import xpyd_inventory  # noqa: E402
from tests.engine.test_storm_engine import _kill_leftovers  # noqa: E402
from tests.fixtures.client_load import ClientLoad  # noqa: E402


def one(state: Path, inv: Path, router: str, how: str) -> dict:
    with ClientLoad(router, rate=2.0) as load:
        time.sleep(2)  # the load is steady before the restart starts
        t0 = time.monotonic()
        r = pdctl(["restart", how, "-i", str(inv), "--json"], state=state, timeout=600)
        took = time.monotonic() - t0
        time.sleep(2)
    s = load.summary()
    return {"how": how, "exit": r.code, "seconds": round(took, 1), "sent": s["sent"], "failed": len(s["failed"])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="bench-rolling-"))
    data = xpyd_inventory("bench-rolling")
    inv = write_inventory(state / "inv.yaml", data)
    router = f"http://127.0.0.1:{data['roles']['router'][0]['port']}"
    rows: list[dict] = []
    try:
        r = pdctl(["deploy", "-i", str(inv), "--json"], state=state, timeout=600)
        if r.code != 0:
            print(r.output, file=sys.stderr)
            return 1
        for _ in range(args.runs):
            for how in ("--rolling", "--pair"):
                rows.append(one(state, inv, router, how))
                print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        pdctl(["down", "-i", str(inv)], state=state, timeout=120)
        _kill_leftovers(state)

    def med(how: str, key: str) -> float:
        return statistics.median(x[key] for x in rows if x["how"] == how)

    print(
        json.dumps(
            {
                "runs": rows,
                "median": {h: {k: med(h, k) for k in ("failed", "sent", "seconds")} for h in ("--rolling", "--pair")},
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
