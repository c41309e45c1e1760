"""Alert quality (issue 27): are the pages worth waking someone for? The shipped rules (pdctl/alerts/pdctl.rules.yml)
in a real Prometheus (Debian's), the shipped Alertmanager configuration (pdctl/alerts/alertmanager.yml, its timers
as shipped) in a real Alertmanager (Debian's) whose `pager` and `ticket` webhooks come to this script, and
`pdctl watch` at its default cadences over a local 1P1D of the bundled engine behind the default router. Prometheus
scrapes the watch, both engines and the router's metrics port every 5 s (docs/alerts.md), the engines and the
router with the `deployment` label docs/alert-routing.md asks for. Each scenario has a deployment of its own.

  soak       healthy, under 0.8 requests/s, with a random abort storm (`pdctl storm`, its default target) every
             --storm-every s and a client that gives up after 0.3 s every 5 s, for --soak-min minutes: any page
             is a false page
  degraded   the degraded-bootstrap drill: the decode restarted alone (`--override-hazard`); fixed with
             `pdctl restart --pair`
  degraded-heal  the same under the watch with --heal on: from the decode's restart to the heal done and to the pair
             canary passing again (timeline times); a page is not expected but counted
  pin-idle   an aimed abort storm pins a room on an idle deployment; fixed with `pdctl restart --pair` (behind
             sglang-router 0.3.2: smg does not pass a client's disconnect on, docs/storm-and-triage.md)
  pin-load   the same under 0.8 requests/s
  killed     the decode killed (SIGKILL); fixed with `pdctl restart --pair`
  hung       the decode stopped (SIGSTOP) for --hang-s, then continued (SIGCONT)
  redeploy   a decode launch flag changed in the inventory and `pdctl deploy`: no page expected

Per scenario: seconds from the fault to the first page (a `pager` notification that fires), the pages during the
incident (the target: exactly one), false pages (any page where none is expected, or a page for another alert than
the scenario's), and seconds from the fix's end (the co-restart's, the SIGCONT, the heal's `done`) to no alert of
the deployment pending or firing in Prometheus. Prints a markdown table; writes every raw figure as JSON (--out).

Usage: python bench/bench_alerts.py [--only soak,degraded,...] [--soak-min 30] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_watch import Stack, make_pin, poll  # noqa: E402
from tests.e2e.helpers import write_inventory  # noqa: E402
from tests.fixtures.alertmanager import Alertmanager, WebhookReceiver  # noqa: E402
from tests.fixtures.client_load import ClientLoad  # noqa: E402
from tests.fixtures.prometheus import Prometheus  # noqa: E402

SCRAPE = "5s"
ALL = ("soak", "degraded", "degraded-heal", "pin-idle", "pin-load", "killed", "hung", "redeploy")
#: the one page each incident should give (None: no page at all)
EXPECTED = {
    "soak": None,
    "degraded": "PdctlPairBroken",
    "degraded-heal": "PdctlPairBroken",  # if the heal is not faster than the page
    "pin-idle": "PdctlInflightPinned",
    "pin-load": "PdctlInflightPinned",
    "killed": "PdctlTargetDown",
    "hung": "PdctlTargetDown",
    "redeploy": None,
}
DRILLS = {"degraded": "degraded-bootstrap", "pin-idle": "status-update-race,transfer-delay-ms=500"}
DRILLS["pin-load"] = DRILLS["pin-idle"]
DRILLS["degraded-heal"] = DRILLS["degraded"]
ROUTER_KIND = {"pin-idle": "sglang-router", "pin-load": "sglang-router"}


class Scene:
    """One deployment with its watch, a Prometheus that sends to an Alertmanager, and the receiver of its pages."""

    def __init__(self, name: str, root: Path, heal: str = "off"):
        self.name = name
        self.stack = Stack(name, root, DRILLS.get(name, "transfer-delay-ms=200"), heal=heal)
        if name in ROUTER_KIND:
            self.stack.data["roles"]["router"][0]["kind"] = ROUTER_KIND[name]
            write_inventory(self.stack.inv, self.stack.data)
        self.hook = WebhookReceiver().start()
        self.am = Alertmanager(self.hook).start()
        self.prom: Prometheus | None = None

    def up(self) -> None:
        s = self.stack
        s.deploy()
        s.start_watch()
        ports = s.ports
        engines = [f"127.0.0.1:{ports[r]}" for r in ("prefill", "decode")]
        self.prom = Prometheus(
            {"pdctl-watch": [f"127.0.0.1:{s.port}"], "sglang": engines, "router": [f"127.0.0.1:{ports['prometheus']}"]},
            scrape_interval=SCRAPE,
            evaluation_interval=SCRAPE,
            alertmanagers=[self.am.address],
            labels={"sglang": {"deployment": self.name}, "router": {"deployment": self.name}},
        ).start()
        # the watch's first rounds done and every rule evaluated once before the fault
        poll(lambda: s.metric("pdctl_pair_ok") == [1.0], 120)
        self.prom.wait_evaluated(timeout=150)  # a group may be evaluated once a minute

    def pages(self, since: float) -> list:
        """`pager` notifications that fire, received since `since` (monotonic)."""
        return [n for n in self.hook.received(lambda n: n.receiver == "pager" and n.status == "firing") if n.t >= since]

    def tickets(self, since: float) -> list:
        return [
            n for n in self.hook.received(lambda n: n.receiver == "ticket" and n.status == "firing") if n.t >= since
        ]

    def active(self) -> list[dict]:
        assert self.prom is not None
        return [a for a in self.prom.alerts() if a["labels"].get("deployment") == self.name]

    def resolved_after(self, t_fix: float, limit: float = 600) -> dict:
        """From the fix (monotonic) to no alert of the deployment pending or firing, and to the resolved page."""
        seen: set[str] = set()

        def none_active() -> bool:
            active = self.active()
            seen.update(f"{a['labels']['alertname']} ({a['state']})" for a in active)
            return not active

        _, t_clear = poll(none_active, limit, 1)
        clear_s = round(t_clear - (time.time() - (time.monotonic() - t_fix)), 1) if t_clear else None
        left = [a["labels"]["alertname"] for a in self.active()] if t_clear is None else []
        return {"resolved_s": clear_s, "still_active": left, "active_after_the_fix": sorted(seen)}

    def close(self) -> None:
        for stop in (self.stack.close, self.am.stop, self.hook.stop):
            try:
                stop()
            except Exception as e:  # the rest still stop
                print(f"[{self.name}] close: {e}", flush=True)
        if self.prom:
            self.prom.stop()


def judge(name: str, pages: list, first_page_s: float | None) -> dict:
    expected = EXPECTED[name]
    names = [n.alertnames("firing") for n in pages]
    wrong = [x for x in names if expected is None or x != [expected]]
    return {
        "expected": expected,
        "first_page_s": first_page_s,
        "pages": len(pages),
        "page_alerts": names,
        "false_pages": len(wrong),
    }


def wait_page(sc: Scene, since: float, limit: float) -> float | None:
    got, _ = poll(lambda: sc.pages(since), limit, 0.5)
    return round(got[0].t - since, 1) if got else None


def settle(sc: Scene, since: float, quiet_s: float = 90) -> None:
    """Wait until no new page came for `quiet_s` (a second page would come within a group interval of the first)."""
    last = len(sc.pages(since))
    t = time.monotonic()
    while time.monotonic() - t < quiet_s:
        time.sleep(2)
        now = len(sc.pages(since))
        if now != last:
            last, t = now, time.monotonic()


def decode_pid(s: Stack) -> int:
    pidfile = next(s.state.rglob(f"pdctl-{s.name}-decode-0.pid"))
    text = pidfile.read_text()
    return int(json.loads(text)["pid"]) if text.strip().startswith("{") else int(text.split()[0])


def fix_pair(sc: Scene) -> float:
    """`pdctl restart --pair`; the instant (monotonic) it ended: the fix's end, from which "resolved" is timed."""
    r = sc.stack.cli("restart", "--pair", "--json", timeout=400)
    if r.code:
        print(f"[{sc.name}] restart --pair: {r.code} {r.output[-600:]}", flush=True)
    return time.monotonic()


# -- the scenarios ------------------------------------------------------------------------------------------------
def soak(sc: Scene, minutes: float, storm_every: float) -> dict:
    s, t0 = sc.stack, time.monotonic()
    router = f"http://127.0.0.1:{s.ports['router']}"
    stop = threading.Event()
    gave_up = [0]

    def impatient() -> None:  # a client that times out (and goes away) on a long prompt
        body = json.dumps(
            {"model": "pdctl-tiny", "messages": [{"role": "user", "content": "x " * 2000}], "max_tokens": 64}
        ).encode()
        while not stop.wait(5):
            req = urllib.request.Request(f"{router}/v1/chat/completions", body, {"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=0.3).read()
            except Exception:
                gave_up[0] += 1

    storms = []
    th = threading.Thread(target=impatient, daemon=True)
    th.start()
    with ClientLoad(router, rate=0.8) as load:
        while time.monotonic() - t0 < minutes * 60:
            r = s.cli("storm", "--json", "--requests", "6", timeout=300)
            storms.append(r.code)
            stop.wait(storm_every)
    stop.set()
    th.join(10)
    row = judge("soak", sc.pages(t0), None)
    row.update(
        minutes=minutes,
        storms=len(storms),
        storm_codes=sorted(set(storms)),
        timed_out_clients=gave_up[0],
        load=load.summary(),
        tickets=[n.alertnames("firing") for n in sc.tickets(t0)],
    )
    return row


def degraded(sc: Scene) -> dict:
    s = sc.stack
    t0 = time.monotonic()
    r = s.cli("restart", "--role", "decode", "--override-hazard", "--no-verify", "--json", timeout=300)
    t_fault = time.monotonic()  # the decode is back: the pair is broken from here
    first = wait_page(sc, t_fault, 240)
    settle(sc, t_fault, 60)
    row = judge("degraded", sc.pages(t_fault), first)
    row.update(restart_code=r.code, restart_s=round(t_fault - t0, 1))
    row.update(sc.resolved_after(fix_pair(sc)))
    return row


def degraded_heal(sc: Scene) -> dict:
    """The watch heals it (--heal on): times from the timeline, since the decode-only restart ended."""
    s = sc.stack
    r = s.cli("restart", "--role", "decode", "--override-hazard", "--no-verify", "--json", timeout=300)
    t_fault, t_wall = time.monotonic(), time.time()
    done, _ = poll(lambda: [x for x in s.timeline() if x.get("event") == "heal" and x.get("outcome") == "done"], 300, 1)

    def passed_after_heal():
        if not done:
            return None
        return [
            x
            for x in s.timeline()
            if x.get("layer") == "pairs" and x.get("status") == "pass" and x["t"] > done[0]["t"] - 30
        ]

    passed, _ = poll(passed_after_heal, 120, 1)
    settle(sc, t_fault, 60)
    row = judge("degraded-heal", sc.pages(t_fault), None)
    row.update(
        restart_code=r.code,
        heal_done_s=round(done[0]["t"] - t_wall, 1) if done else None,
        pair_ok_again_s=round(passed[0]["t"] - t_wall, 1) if passed else None,
        heal_lines=[
            (round(x["t"] - t_wall, 1), x.get("outcome"), x.get("case"))
            for x in s.timeline()
            if x.get("event") == "heal"
        ],
        canary_lines=[
            round(x["t"] - t_wall, 1) for x in s.timeline() if x.get("event") == "canary" and x["t"] >= t_wall
        ],
    )
    t_healed = t_fault + (done[0]["t"] - t_wall) if done else time.monotonic()
    row.update(sc.resolved_after(t_healed))
    return row


def pin(sc: Scene, loaded: bool) -> dict:
    from pdctl.inventory import load_inventory
    from pdctl.ops.context import Deployment

    s = sc.stack
    load = ClientLoad(f"http://127.0.0.1:{s.ports['router']}", rate=0.8) if loaded else None
    if load:
        load.__enter__()
    try:
        with Deployment(load_inventory(s.inv)) as dep:
            t_wall, tries = make_pin(s, dep, seed=7)
        if t_wall is None:
            return {"pinned": False, "storms": tries}
        t_pin = time.monotonic() - (time.time() - t_wall)
        first = wait_page(sc, t_pin, 240)
        stall_s = None
        if not loaded:  # SGLang's own stall rule must see the pin although the watch's canaries keep decoding
            assert sc.prom is not None
            stalled = sc.prom.alerts
            _, t_stall = poll(
                lambda: [a for a in stalled("SGLangPrefillInflightStalled") if a["state"] == "firing"], 300, 2
            )
            stall_s = round(t_stall - t_wall, 1) if t_stall else None
        settle(sc, t_pin, 60)
        pages = sc.pages(t_pin)
    finally:
        if load:
            load.__exit__(None, None, None)
    row = judge(sc.name, pages, first)
    row.update(pinned=True, storms=tries, stall_rule_firing_s=stall_s)
    row.update(sc.resolved_after(fix_pair(sc)))
    return row


def killed(sc: Scene) -> dict:
    t_fault = time.monotonic()
    os.kill(decode_pid(sc.stack), signal.SIGKILL)
    first = wait_page(sc, t_fault, 240)
    settle(sc, t_fault, 60)
    row = judge("killed", sc.pages(t_fault), first)
    row.update(sc.resolved_after(fix_pair(sc)))
    return row


def hung(sc: Scene, hang_s: float) -> dict:
    pid = decode_pid(sc.stack)
    t_fault = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        first = wait_page(sc, t_fault, hang_s)
        left = hang_s - (time.monotonic() - t_fault)
        if left > 0:
            time.sleep(left)
    finally:
        os.kill(pid, signal.SIGCONT)
    t_fix = time.monotonic()
    settle(sc, t_fault, 30)
    row = judge("hung", sc.pages(t_fault), first)
    row.update(hang_s=hang_s)
    row.update(sc.resolved_after(t_fix))
    return row


def redeploy(sc: Scene) -> dict:
    import yaml

    s = sc.stack
    data = yaml.safe_load(s.inv.read_text())
    decode = data["roles"]["decode"][0]
    decode.setdefault("args", {})["--max-running-requests"] = 6
    s.inv.write_text(yaml.safe_dump(data))
    t0 = time.monotonic()
    r = s.cli("deploy", "--no-verify", "--json", timeout=400)
    t_done = time.monotonic()
    followed, _ = poll(lambda: [x for x in s.timeline() if x.get("event") == "declared"], 180, 1)
    settle(sc, t0, 120)
    row = judge("redeploy", sc.pages(t0), None)
    row.update(
        deploy_code=r.code,
        deploy_s=round(t_done - t0, 1),
        followed=[x.get("observed") for x in followed or []],
        tickets=[n.alertnames("firing") for n in sc.tickets(t0)],
    )
    row.update(sc.resolved_after(t_done, 300))
    return row


def run(name: str, root: Path, args: argparse.Namespace) -> dict:
    sc = Scene(name, root, heal="on" if name == "degraded-heal" else "off")
    try:
        sc.up()
        if name == "soak":
            return soak(sc, args.soak_min, args.storm_every)
        if name == "degraded":
            return degraded(sc)
        if name == "degraded-heal":
            return degraded_heal(sc)
        if name in ("pin-idle", "pin-load"):
            return pin(sc, loaded=name == "pin-load")
        if name == "killed":
            return killed(sc)
        if name == "hung":
            return hung(sc, args.hang_s)
        return redeploy(sc)
    finally:
        sc.close()


def table(rows: dict[str, dict]) -> str:
    out = [
        "| scenario | expected page | first page (s) | pages | false pages | resolved after the fix (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        if "error" in r:
            out.append(f"| {name} | {EXPECTED[name] or 'none'} | error: {r['error']} | | | |")
            continue
        out.append(
            f"| {name} | {r.get('expected') or 'none'} | {r.get('first_page_s')} | {r.get('pages')} "
            f"| {r.get('false_pages')} | {r.get('resolved_s', '')} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(ALL))
    ap.add_argument("--soak-min", type=float, default=30.0)
    ap.add_argument("--storm-every", type=float, default=60.0)
    ap.add_argument("--hang-s", type=float, default=90.0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(ALL))
    if unknown:
        ap.error(f"--only: unknown scenario(s) {', '.join(unknown)} (choose from {', '.join(ALL)})")
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-alerts-") as tmp:
        for name in names:
            t = time.monotonic()
            try:
                rows[name] = run(name, Path(tmp), args)
            except Exception as e:  # the other scenarios still run
                rows[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
            rows[name]["seconds"] = round(time.monotonic() - t, 1)
            print(f"[{name}] {json.dumps(rows[name])}", flush=True)
    print(table(rows))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
