"""`pdctl watch` figures on this machine (issue 15): bundled engine, real sglang-router, real Prometheus (Debian's
package, tests/fixtures/prometheus.py) scraping the watch with the shipped rules, free ports, DEFAULT watch settings
(the inventory has no `watch:` section) and the scrape interval docs/alerts.md recommends (5 s).

1. pin: the status-update-race drill (+ transfer-delay-ms=500) on the prefill; an aimed storm (`transfer-window`,
   one request, the library's `storm`, so its abort instant is on this process's monotonic clock) pins a room. From
   that abort to: the watch's timeline line (inflight check failing), the exporter's pdctl_inflight_pinned == 1,
   and PdctlInflightPinned firing in Prometheus. Idle, then under a steady 0.8 requests/s (ClientLoad). Between
   runs `pdctl restart --pair` clears the pin. Targets <= 45 s idle, <= 60 s loaded.
2. heal: the degraded-bootstrap drill on the prefill; a fresh `pdctl watch --heal on` per run; after its first
   passing pair canary, `pdctl restart --role decode --override-hazard --no-verify`. From that restart's end to the
   watch's heal "done" and to the pair canary passing again (exporter pdctl_pair_ok == 1). Target <= 90 s.
3. quiet: a healthy 1P1D (transfer delay, no race) under 0.8 requests/s and back-to-back random abort storms
   (`pdctl storm`, default target) for --quiet-s, with the watch (--heal on) and Prometheus: every alert seen
   pending or firing, every heal line. Target 0.
4. cpu: the watch at its default cadence on the healthy 1P1D: (utime+stime) / wall of its process over --cpu-s
   after a 30 s warm-up (/proc/PID/stat), children too; a sleeping `python3 -c` beside it; the load average.

Prints a markdown summary; writes every raw figure as JSON (--out). Runtime about 20-30 minutes with the defaults.
Usage: python bench/bench_watch.py [--runs 3] [--heal-runs 2] [--quiet-s 240] [--cpu-s 60] [--only pin,heal,...]
       [--decode-waiting-timeout S]   (heal part: the decode's SGLANG_DISAGGREGATION_WAITING_TIMEOUT)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.helpers import kill_leftovers, local_inventory, pdctl, write_inventory  # noqa: E402
from tests.e2e.test_watch import _scrape, _series, _timeline  # noqa: E402
from tests.fixtures.client_load import ClientLoad  # noqa: E402
from tests.fixtures.net import free_port  # noqa: E402
from tests.fixtures.prometheus import Prometheus  # noqa: E402

DELAY = "transfer-delay-ms=500"
SCRAPE = "5s"  # docs/alerts.md's recommended scrape interval for the watch
CLK = os.sysconf("SC_CLK_TCK")


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def poll(fn, limit: float, every: float = 0.25):
    """(fn()'s first truthy value, the wall time it was seen) within `limit` s, else (None, None)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            v = fn()
        except OSError:
            v = None
        if v:
            return v, time.time()
        time.sleep(every)
    return None, None


class Stack:
    """One deployment (CLI deploy/down), its watch process and a Prometheus scraping the watch and the engines."""

    def __init__(self, name: str, root: Path, prefill_drills: str, heal: str = "off", decode_env: dict | None = None):
        self.name, self.heal = name, heal
        self.state = root / name
        self.state.mkdir()
        self.ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
        self.data = local_inventory(
            name, self.ports, prefill_env={"PDCTL_DRILLS": prefill_drills}, decode_env=decode_env
        )
        self.inv = write_inventory(self.state / "inv.yaml", self.data)
        self.watch: subprocess.Popen | None = None
        self.prom: Prometheus | None = None
        self.n = 0

    def cli(self, *args: str, timeout: float = 400):
        return pdctl([*args, "-i", str(self.inv)], state=self.state, timeout=timeout)

    def deploy(self) -> None:
        r = self.cli("deploy", "--no-verify", "--json")
        if r.code:
            raise SystemExit(f"deploy {self.name} failed:\n{r.output[-3000:]}")

    def start_watch(self, heal: str | None = None) -> None:
        self.n += 1
        self.port, self.tl = free_port(), self.state / f"timeline-{self.n}.jsonl"
        env = dict(os.environ, XDG_STATE_HOME=str(self.state), COLUMNS="80", PDCTL_OPERATOR="bench")
        self.watch = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pdctl",
                "watch",
                "-i",
                str(self.inv),
                "--heal",
                heal or self.heal,
                "--listen",
                f"127.0.0.1:{self.port}",
                "--timeline",
                str(self.tl),
                "--for",
                "3600",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.state / "watch.err", "ab"),
        )

    def stop_watch(self) -> None:
        if self.watch and self.watch.poll() is None:
            self.watch.terminate()
            try:
                self.watch.wait(20)
            except subprocess.TimeoutExpired:
                self.watch.kill()
                self.watch.wait(10)

    def start_prom(self) -> None:
        engines = [f"127.0.0.1:{self.ports[r]}" for r in ("prefill", "decode")]
        self.prom = Prometheus(
            {"pdctl-watch": [f"127.0.0.1:{self.port}"], "sglang": engines},
            scrape_interval=SCRAPE,
            evaluation_interval=SCRAPE,
        ).start()

    def metric(self, name: str, **labels) -> list[float]:
        return list(_series(_scrape(self.port), name, **labels).values())

    def timeline(self) -> list[dict]:
        return _timeline(self.tl)

    def close(self) -> None:
        self.stop_watch()
        if self.prom:
            self.prom.stop()
        self.cli("down", timeout=120)
        kill_leftovers(self.state)


def held(s: Stack, reads: int = 8, every: float = 0.6) -> bool:
    """The prefill's inflight gauge >= 1 in every read (the load alone empties it within ~2 s)."""
    import urllib.request

    def inflight() -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{s.ports['prefill']}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("sglang:num_prefill_inflight_queue_reqs{"):
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    for _ in range(reads):
        if inflight() < 1:
            return False
        time.sleep(every)
    return True


def make_pin(s: Stack, dep, seed: int) -> tuple[float | None, list]:
    """Aimed storms of one request (at most 3) until a room stays pinned; (the pinning abort's wall time, tries)."""
    from pdctl.ops.storm import storm
    from pdctl.ops.storm_plan import StormConfig

    tries = []
    for k in range(3):
        rep = storm(
            dep,
            StormConfig(
                requests=1,
                prompt_tokens=3000,
                target="transfer-window",
                calib_requests=2,
                sample_every_s=1,
                watch_s=2,
                seed=seed * 10 + k,
                max_new_tokens=32,
            ),
        )
        o = rep.outcomes[0]
        cal = rep.calibration
        tries.append({"ttft_s": cal.ttft_s if cal else None, "window_s": rep.window, "aborted_s": o.aborted_s})
        if o.aborted_s is not None and held(s):
            mono = rep.t0 + rep.load_started_at + o.launch_at + o.aborted_s
            return time.time() - (time.monotonic() - mono), tries
    return None, tries


def bench_pin(root: Path, runs: int, out: dict) -> None:
    from pdctl.inventory import parse_inventory
    from pdctl.ops.context import Deployment

    s = Stack("pin", root, f"status-update-race,{DELAY}")
    s.deploy()
    try:
        s.start_watch()
        poll(lambda: s.metric("pdctl_inflight_pinned") == [0.0], 60)
        s.start_prom()
        time.sleep(25)  # the first full inflight window, a scrape or two
        with Deployment(parse_inventory(s.data, str(s.inv))) as dep:
            for mode in ("idle", "load"):
                rows = out.setdefault(f"pin_{mode}", [])
                for run in range(runs):
                    load = ClientLoad(f"http://127.0.0.1:{s.ports['router']}", rate=0.8) if mode == "load" else None
                    if load:
                        load.__enter__()
                        time.sleep(30)  # the watch's window is all steady load
                    try:
                        row = one_pin(s, dep, seed=run + (50 if load else 0))
                    finally:
                        if load:
                            load.stop()
                            row["load"] = {"sent": load.sent, "failed": len(load.failed)}
                    row["loadavg"] = loadavg()
                    rows.append(row)
                    print(f"[pin {mode} {run}] {json.dumps(row)}", flush=True)
                    clear_pin(s)
    finally:
        s.close()


def one_pin(s: Stack, dep, seed: int) -> dict:
    t_pin, tries = make_pin(s, dep, seed)
    row: dict = {"storms": tries}
    if t_pin is None:
        row["pinned"] = False
        return row
    _, t_gauge = poll(lambda: s.metric("pdctl_inflight_pinned") == [1.0], 120)
    alert, t_fire = poll(lambda: [a for a in s.prom.alerts("PdctlInflightPinned") if a["state"] == "firing"], 120, 0.5)
    lines = [x for x in s.timeline() if x.get("layer") == "inflight" and x.get("t", 0) >= t_pin - 5]
    first_fail = next((x for x in lines if x.get("status") == "fail"), None)
    row.update(
        pinned=True,
        t_pin=round(t_pin, 3),
        verdict_s=round(first_fail["t"] - t_pin, 1) if first_fail else None,
        gauge_s=round(t_gauge - t_pin, 1) if t_gauge else None,
        alert_s=round(t_fire - t_pin, 1) if t_fire else None,
        alert_active_at=alert[0].get("activeAt") if alert else None,
        verdict_line=first_fail and {k: first_fail.get(k) for k in ("check", "observed")},
    )
    return row


def clear_pin(s: Stack) -> None:
    r = s.cli("restart", "--pair", "--json")
    if r.code:
        print(f"restart --pair: {r.code} {r.output[-800:]}", flush=True)
    poll(lambda: s.metric("pdctl_inflight_pinned") == [0.0], 120)
    poll(lambda: not s.prom.alerts("PdctlInflightPinned"), 90, 1)
    time.sleep(25)  # a full window without the pin before the next one


def bench_heal(root: Path, runs: int, out: dict, waiting_timeout: int | None = None) -> None:
    # SGLang's default decode waiting timeout (300 s) unless given: a canary's decode leg then waits its whole slot
    env = {"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": str(waiting_timeout)} if waiting_timeout else None
    s = Stack("heal" if not env else f"heal-wt{waiting_timeout}", root, "degraded-bootstrap", heal="on", decode_env=env)
    s.deploy()
    rows = out.setdefault("heal" if not env else f"heal_waiting_timeout_{waiting_timeout}", [])
    try:
        for run in range(runs):
            s.start_watch()  # a fresh watch: its heal budget starts anew
            _, t_ok = poll(lambda: s.metric("pdctl_pair_ok") == [1.0], 90)
            t_r0 = time.time()
            r = s.cli("restart", "--role", "decode", "--override-hazard", "--no-verify", "--json", timeout=300)
            t_r1 = time.time()
            done, t_done_seen = poll(
                lambda: [x for x in s.timeline() if x.get("event") == "heal" and x.get("outcome") == "done"], 400, 0.5
            )
            _, t_pass = poll(lambda: s.metric("pdctl_pair_ok") == [1.0], 150) if done else (None, None)
            tl = s.timeline()
            pairs = [
                (round(x["t"] - t_r1, 1), x.get("status")) for x in tl if x.get("layer") == "pairs" and x["t"] >= t_r0
            ]
            heals = [
                (round(x["t"] - t_r1, 1), x.get("outcome"), x.get("case"), x.get("action"))
                for x in tl
                if x.get("event") == "heal"
            ]
            rounds = [
                (round(x["t"] - t_r1, 1), x.get("ok"), x.get("seconds"))
                for x in tl
                if x.get("event") == "round" and x.get("cadence") == "pairs" and x["t"] >= t_r0
            ]
            skips = sum(1 for x in tl if x.get("event") == "skip" and x.get("cadence") == "pairs")
            row = {
                "first_canary_ok": bool(t_ok),
                "decode_restart_s": round(t_r1 - t_r0, 1),
                "restart_code": r.code,
                "done_s": round(done[0]["t"] - t_r1, 1) if done else None,
                "pair_ok_again_s": round(t_pass - t_r1, 1) if t_pass else None,
                "pairs_lines": pairs,
                "heal_lines": heals,
                "pairs_rounds": rounds,
                "pairs_skips": skips,
                "loadavg": loadavg(),
            }
            rows.append(row)
            print(f"[heal {run}] {json.dumps(row)}", flush=True)
            s.stop_watch()
            if not done:  # leave the pair healed for the next run
                s.cli("restart", "--pair", "--json")
    finally:
        s.close()


def proc_cpu(pid: int) -> tuple[float, float]:
    """(utime+stime, cutime+cstime) of pid in seconds, from /proc/PID/stat."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / CLK, (int(f[13]) + int(f[14])) / CLK


def bench_quiet_and_cpu(root: Path, parts: set, quiet_s: float, cpu_s: float, out: dict, drills: str = DELAY) -> None:
    s = Stack("quiet", root, drills, heal="on")
    s.deploy()
    try:
        if "cpu" in parts:
            s.start_watch("off")
            sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            try:
                time.sleep(30)  # start-up and the first rounds are not the cadence
                la0, w0, c0, s0 = loadavg(), time.monotonic(), proc_cpu(s.watch.pid), proc_cpu(sleeper.pid)
                time.sleep(cpu_s)
                w1, c1, s1, la1 = time.monotonic(), proc_cpu(s.watch.pid), proc_cpu(sleeper.pid), loadavg()
            finally:
                sleeper.kill()
                sleeper.wait()
            wall = w1 - w0
            out["cpu"] = {
                "wall_s": round(wall, 1),
                "watch_cpu_s": round(c1[0] - c0[0], 2),
                "watch_children_cpu_s": round(c1[1] - c0[1], 2),
                "watch_pct": round(100 * (c1[0] - c0[0] + c1[1] - c0[1]) / wall, 2),
                "sleeper_pct": round(100 * (s1[0] - s0[0]) / wall, 2),
                "loadavg_before": la0,
                "loadavg_after": la1,
                "rounds": {
                    c: sum(1 for x in s.timeline() if x.get("event") == "round" and x.get("cadence") == c)
                    for c in ("health", "inflight", "e2e", "pairs", "flags")
                },
            }
            print(f"[cpu] {json.dumps(out['cpu'])}", flush=True)
            s.stop_watch()
        if "quiet" in parts:
            quiet(s, quiet_s, out)
    finally:
        s.close()


def quiet(s: Stack, quiet_s: float, out: dict) -> None:
    s.start_watch("on")
    poll(lambda: s.metric("pdctl_pair_ok") == [1.0], 90)
    s.start_prom()
    time.sleep(25)
    seen: dict[str, set] = {"pending": set(), "firing": set()}
    storms, t0 = [], time.monotonic()
    with ClientLoad(f"http://127.0.0.1:{s.ports['router']}", rate=0.8) as load:
        k = 0
        while time.monotonic() - t0 < quiet_s:
            p = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pdctl",
                    "storm",
                    "-i",
                    str(s.inv),
                    "--json",
                    "--requests",
                    "12",
                    "--prompt-tokens",
                    "3000",
                    "--abort-min",
                    "0.1",
                    "--abort-max",
                    "3",
                    "--sample-every",
                    "1",
                    "--watch",
                    "4",
                    "--calibrate",
                    "0",
                    "--seed",
                    str(k),
                    "--max-new-tokens",
                    "32",
                ],
                cwd=REPO,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=dict(os.environ, XDG_STATE_HOME=str(s.state)),
            )
            while p.poll() is None:
                for a in s.prom.alerts():
                    seen[a["state"]].add(
                        json.dumps(
                            {
                                k2: v
                                for k2, v in a["labels"].items()
                                if k2 in ("alertname", "instance", "target", "kind")
                            }
                        )
                    )
                time.sleep(2)
            try:
                doc = json.loads(p.stdout.read())
                storms.append(
                    {"code": p.returncode, "aborted": doc["hits"]["aborted"], "pinned": doc["verdict"]["pinned"]}
                )
            except (ValueError, KeyError, TypeError):
                storms.append({"code": p.returncode})
            k += 1
        span = time.monotonic() - t0
    time.sleep(20)  # the last storm's effects reach the watch and the rules
    for a in s.prom.alerts():
        seen[a["state"]].add(
            json.dumps({k2: v for k2, v in a["labels"].items() if k2 in ("alertname", "instance", "target", "kind")})
        )
    tl = s.timeline()
    out["quiet"] = {
        "seconds": round(span),
        "storms": len(storms),
        "aborted": sum(x.get("aborted", 0) for x in storms),
        "storm_codes": [x["code"] for x in storms],
        "storm_pinned": sum(bool(x.get("pinned")) for x in storms),
        "load": load.summary()["sent"],
        "load_failed": len(load.failed),
        "alerts_firing": sorted(seen["firing"]),
        "alerts_pending": sorted(seen["pending"] - seen["firing"]),
        "heal_lines": [x for x in tl if x.get("event") == "heal"],
        "inflight_fail_lines": sum(1 for x in tl if x.get("layer") == "inflight" and x.get("status") == "fail"),
        "fail_lines": sorted({f"{x.get('layer')}/{x.get('check')}" for x in tl if x.get("status") == "fail"}),
        "loadavg": loadavg(),
    }
    print(f"[quiet] {json.dumps(out['quiet'])}", flush=True)
    s.stop_watch()


def med(rows: list[dict], key: str) -> str:
    xs = [r[key] for r in rows if r.get(key) is not None]
    return f"{statistics.median(xs):.1f} s (n={len(xs)}, {min(xs):.1f}-{max(xs):.1f})" if xs else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3, help="pins per mode (idle, load)")
    ap.add_argument("--heal-runs", type=int, default=2)
    ap.add_argument("--quiet-s", type=float, default=240)
    ap.add_argument("--cpu-s", type=float, default=60)
    ap.add_argument(
        "--decode-waiting-timeout",
        type=int,
        default=None,
        help="heal: the decode's SGLANG_DISAGGREGATION_WAITING_TIMEOUT (default: SGLang's 300 s)",
    )
    ap.add_argument("--quiet-drills", default=DELAY, help="quiet/cpu: the prefill's drills ('' : none)")
    ap.add_argument("--only", default="pin,heal,quiet,cpu")
    ap.add_argument("--out", default="/tmp/bench_watch.json")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    root = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    os.environ["XDG_STATE_HOME"] = str(root)
    out: dict = {"cores": os.cpu_count(), "loadavg_start": loadavg(), "scrape_interval": SCRAPE}
    try:
        # one part failing (its error kept in the JSON) does not lose the others' figures
        for part, fn in (
            ("heal", lambda: bench_heal(root, args.heal_runs, out, args.decode_waiting_timeout)),
            ("quiet", lambda: bench_quiet_and_cpu(root, parts, args.quiet_s, args.cpu_s, out, args.quiet_drills)),
            ("pin", lambda: bench_pin(root, args.runs, out)),
        ):
            if part in parts or (part == "quiet" and "cpu" in parts):
                try:
                    fn()
                except Exception as e:  # noqa: BLE001
                    out.setdefault("errors", {})[part] = f"{type(e).__name__}: {e}"
                    print(f"[{part}] failed: {type(e).__name__}: {e}", flush=True)
    finally:
        out["loadavg_end"] = loadavg()
        Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"\n| figure ({os.cpu_count()} cores, load {out['loadavg_start']} -> {out['loadavg_end']}) | median |")
    print("|---|---|")
    for mode, target in (("idle", 45), ("load", 60)):
        rows = [r for r in out.get(f"pin_{mode}", []) if r.get("pinned")]
        if rows:
            print(f"| pin -> watch verdict, {mode} | {med(rows, 'verdict_s')} |")
            print(f"| pin -> pdctl_inflight_pinned 1, {mode} | {med(rows, 'gauge_s')} |")
            print(f"| pin -> PdctlInflightPinned firing, {mode} (target <= {target} s) | {med(rows, 'alert_s')} |")
    for key in [k for k in out if k.startswith("heal")]:
        print(f"| {key}: decode restart end -> heal done | {med(out[key], 'done_s')} |")
        print(f"| {key}: decode restart end -> pair canary ok (target <= 90 s) | {med(out[key], 'pair_ok_again_s')} |")
    if "quiet" in out:
        q = out["quiet"]
        print(
            f"| {q['seconds']} s load + {q['storms']} random storms: alerts fired / heals | "
            f"{len(q['alerts_firing'])} / {sum(1 for h in q['heal_lines'] if h.get('outcome') == 'done')} |"
        )
    if "cpu" in out:
        print(f"| watch CPU, default cadence (target <= 3%) | {out['cpu']['watch_pct']}% of one core |")
    print(f"raw figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
