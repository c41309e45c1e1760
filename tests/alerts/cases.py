"""promtool unit-test cases for pdctl/alerts/pdctl.rules.yml, and the series builders they share with the
whole-incident scenarios (tests/alerts/scenarios.py).

CASES: each alert's condition and its non-firing twin. A case is (name, alert, input series {series: values}, eval
time, expected alerts); an expected alert is its labels (alertname and severity added from the rule) plus `value`
when an annotation prints $value. The test turns these into a promtool test file; the annotations each alert must
carry are rendered from the rule's own templates."""

from __future__ import annotations

from typing import Callable, Optional

D = 'deployment="d"'
KV_P0 = f'pdctl_kv_failures_unexplained{{{D},target="prefill[0]@ha:30000",kind="transfer"}}'
P = 'prefill="prefill[0]@ha:30000",decode="decode[0]@hb:30002"'
PAIR = {"deployment": "d", "prefill": "prefill[0]@ha:30000", "decode": "decode[0]@hb:30002"}
SCHED = 'tp_rank="0",pp_rank="0",moe_ep_rank="0"'


def _dep(dep: str | None) -> str:
    return f'deployment="{dep}",' if dep else ""


def pf(metric: str, inst: str, model: str = "tiny", et: str = "prefill", dep: str | None = "d") -> str:
    """An SGLang scheduler series as Prometheus stores it after scraping job "sglang" (with the `deployment` target
    label the docs ask for; dep=None: a scrape config without it)."""
    return f'{metric}{{job="sglang",instance="{inst}",{_dep(dep)}engine_type="{et}",model_name="{model}",{SCHED}}}'


def tok(metric: str, inst: str, model: str = "tiny", et: str = "decode", dep: str | None = "d") -> str:
    return f'{metric}{{job="sglang",instance="{inst}",{_dep(dep)}engine_type="{et}",model_name="{model}"}}'


def sg(inst: str, et: str, model: str = "tiny", **extra) -> dict:
    """The labels an SGLang alert keeps (its `by`), plus extra ones (value)."""
    return {"deployment": "d", "job": "sglang", "instance": inst, "engine_type": et, "model_name": model, **extra}


INFLIGHT = "sglang:num_prefill_inflight_queue_reqs"
GEN = "sglang:generation_tokens_total"
XFER = "sglang:num_transfer_failed_reqs_total"
BOOT = "sglang:num_bootstrap_failed_reqs_total"
ABORTED = "sglang:num_aborted_requests_total"
USAGE = "sglang:token_usage"
E2E = "sglang:e2e_request_latency_seconds"
RESP = "smg_http_responses_total"
CHAT = "/v1/chat/completions"
WATCH_UP = 'up{job="pdctl-watch",instance="127.0.0.1:9464"}'
CHANGE = f"pdctl_change_in_progress{{{D}}}"  # 1 while a pdctl deploy/restart/heal holds the deployment lock
CANARY_TOK = f"pdctl_canary_generated_tokens_total{{{D}}}"
SV_D = f'pdctl_target_serving{{{D},target="decode[0]@hb:30002"}}'

# ---- series builders -------------------------------------------------------------------------------------------
STEP = 5  # s: the input series interval of every case
STALE = "stale"
Fn = Callable[[int], Optional[float]]


def const(v: float | None) -> Fn:
    return lambda t: v


def during(a: int, b: int, inside: float | None, outside: float | None = 1) -> Fn:
    """`inside` for a <= t < b, else `outside`."""
    return lambda t: inside if a <= t < b else outside


def counter(end: int, rate: Fn, *, start: float = 0.0, resets: tuple[int, ...] = (), lazy: bool = False) -> Fn:
    """A counter counting rate(t) per second over each step; back to 0 at each time in `resets` (a restart); lazy:
    no series while it is 0 (SGLang's and smg's labelled counters are born at their first count)."""
    vals: dict[int, float | None] = {}
    v = start
    for t in range(0, end + 1, STEP):
        if t in resets:
            v = 0.0
        elif t:
            v += (rate(t - STEP) or 0) * STEP
        vals[t] = None if lazy and v == 0 else v
    return lambda t: vals[t]


def emit(end: int, fn: Fn, gate: Fn | None = None) -> str | None:
    """promtool values for t = 0, 5, ..., end: fn's number, or no sample where it is None or its scrape target is
    down (gate 0); a series that disappears gets the staleness marker a real scrape writes. None: never present."""
    out: list[str] = []
    prev: float | None = None
    for t in range(0, end + 1, STEP):
        v = fn(t) if gate is None or gate(t) == 1 else None
        out.append(f"{v:.12g}" if v is not None else STALE if prev is not None else "_")
        prev = v
    return None if all(x in ("_", STALE) for x in out) else " ".join(out)


BUCKETS = ("0.1", "0.4", "1.0", "4.0", "10.0", "+Inf")  # a subset of SGLang 0.5.23's e2e latency buckets


def e2e(
    end: int, rate: Fn, mix: Callable[[int], list[tuple[float, float]]], *, inst: str = "hb:30002", resets=()
) -> dict[str, Fn]:
    """A decode's sglang:e2e_request_latency_seconds histogram: rate(t) requests/s, mix(t) = [(share, seconds)]."""
    lab = f'job="sglang",instance="{inst}",deployment="d",engine_type="decode",model_name="tiny",is_streaming="false"'
    out = {}
    for le in BUCKETS:
        bound = float("inf") if le == "+Inf" else float(le)
        share = lambda t, b=bound: sum(s for s, lat in mix(t) if lat <= b)  # noqa: E731
        out[f'{E2E}_bucket{{{lab},le="{le}"}}'] = counter(
            end, lambda t, sh=share: rate(t) * sh(t), resets=resets, lazy=True
        )
    out[f"{E2E}_count{{{lab}}}"] = counter(end, rate, resets=resets, lazy=True)
    return out


def build(end: int, series: dict[str, Fn], gates: dict[str, Fn | None] | None = None) -> dict[str, str]:
    gates = gates or {}
    out = {}
    for name, fn in series.items():
        v = emit(end, fn, gates.get(name))
        if v is not None:
            out[name] = v
    return out


def hist(end: int, phases: list[tuple[int, float, float]], *, inst: str = "hb:30002") -> dict[str, str]:
    """A decode's e2e latency histogram through `phases` [(until t, requests/s, seconds each)] (none after)."""

    def at(t: int) -> tuple[float, float]:
        return next(((r, s) for until, r, s in phases if t < until), (0.0, 0.0))

    return build(end, e2e(end, lambda t: at(t)[0], lambda t: [(1.0, at(t)[1])], inst=inst))


def rt(status: str, path: str | None = CHAT, error_code: str = "", inst: str = "hc:29000") -> str:
    """A router answer counter as Prometheus stores it (job "router", `deployment` added on the target); smg labels
    the path, sglang-router 0.3.2 does not (path=None)."""
    where = f'path="{path}",' if path is not None else ""
    return f'{RESP}{{job="router",instance="{inst}",{D},{where}status_code="{status}",error_code="{error_code}"}}'


ROUTER = {"deployment": "d", "job": "router", "instance": "hc:29000"}
READY_200 = rt("200", "/readiness")
# 1 request/s; every one fails 105-155 s (a 1P1D's workers restarting), then all succeed
FIX_BURST = {rt("200"): "100+5x20 200x10 200+5x30", rt("503", error_code="no_available_workers"): "_x20 0+5x10 50x30"}


def usage(inst: str, et: str, rank: str) -> str:
    return (
        f'{USAGE}{{job="sglang",instance="{inst}",{D},engine_type="{et}",model_name="tiny",'
        f'tp_rank="{rank}",pp_rank="0",moe_ep_rank="0"}}'
    )


# (name, alertname, {series: values}, eval_time, [expected alert labels])   input interval: 5 s
CASES = [
    # the pin: the watch's verdict turns pinned at 25 s; firing by 40 s (for 10 s on a 5 s group interval)
    ("pin fires", "PdctlInflightPinned", {f"pdctl_inflight_pinned{{{D}}}": "0x4 1x30"}, "40s", [{"deployment": "d"}]),
    ("pin still pending before for:", "PdctlInflightPinned", {f"pdctl_inflight_pinned{{{D}}}": "0x4 1x30"}, "30s", []),
    ("one pinned sample is a flap", "PdctlInflightPinned", {f"pdctl_inflight_pinned{{{D}}}": "0x4 1 0x30"}, "60s", []),
    # keep_firing_for 90s: pinned 25-75 s, firing from 35 s; the verdict clears at 80 s (the co-restart), the page
    # stays to 165 s (its inhibition holds while the windows of what it explains drain) and resolves at 170 s
    (
        "after the pin clears the page stays 90 s",
        "PdctlInflightPinned",
        {f"pdctl_inflight_pinned{{{D}}}": "0x4 1x10 0x30"},
        "165s",
        [{"deployment": "d"}],
    ),
    (
        "90 s after the pin cleared: resolved",
        "PdctlInflightPinned",
        {f"pdctl_inflight_pinned{{{D}}}": "0x4 1x10 0x30"},
        "170s",
        [],
    ),
    (
        "busy is not pinned",
        "PdctlInflightPinned",
        {f"pdctl_inflight_busy{{{D}}}": "1x30", f"pdctl_inflight_pinned{{{D}}}": "0x30"},
        "120s",
        [],
    ),
    (
        "unexplained transfer failures on a prefill",
        "PdctlKvFailuresRising",
        {KV_P0: "0x10 2x20"},
        "120s",
        [{"deployment": "d", "target": "prefill[0]@ha:30000", "kind": "transfer", "value": 2}],
    ),
    (
        "a series born non-zero (a worker's first unexplained failure) fires too",
        "PdctlKvFailuresRising",
        {f'pdctl_kv_failures_unexplained{{{D},target="decode[0]@hb:30002",kind="bootstrap"}}': "_x10 1x20"},
        "120s",
        [{"deployment": "d", "target": "decode[0]@hb:30002", "kind": "bootstrap", "value": 1}],
    ),
    (
        "failures every abort explains (a storm): the raw count rises, the unexplained stays 0",
        "PdctlKvFailuresRising",
        {
            f'pdctl_kv_failures_since_start{{{D},target="prefill[0]@ha:30000",kind="transfer"}}': "0x10 3x40",
            KV_P0: "0x50",
        },
        "240s",
        [],
    ),
    (
        "unexplained for 20 s, then explained by a passing canary: shorter than for:",
        "PdctlKvFailuresRising",
        {KV_P0: "0x10 2x4 0x20"},
        "150s",
        [],
    ),
    (
        "the gauge back to 0 (the worker restarted, a heal, or the window passed): resolved at once",
        "PdctlKvFailuresRising",
        {KV_P0: "0x10 3x30 0x20"},
        "215s",
        [],
    ),
    (
        "SGLang transfer failures on one prefill",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "0x80 2x40", pf(XFER, "hc:30000"): "0x120"},
        "450s",
        [sg("ha:30000", "prefill", value=2)],
    ),
    (
        "a scrape target without the deployment label still alerts (without it)",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000", dep=None): "0x80 2x40"},
        "450s",
        [{"job": "sglang", "instance": "ha:30000", "engine_type": "prefill", "model_name": "tiny", "value": 2}],
    ),
    (
        "failures no more than the aborts there (an abort storm): no alert",
        "SGLangTransferFailuresRising",
        {
            pf(XFER, "ha:30000"): "0x80 3x40",
            tok(ABORTED, "ha:30000", et="prefill"): "0x80 5x40",
        },
        "450s",
        [],
    ),
    (
        "failures beyond the aborts there fire",
        "SGLangTransferFailuresRising",
        {
            pf(XFER, "ha:30000"): "0x80 4x40",
            tok(ABORTED, "ha:30000", et="prefill"): "0x80 1x40",
        },
        "450s",
        [sg("ha:30000", "prefill", value=4)],
    ),
    (
        "another deployment's aborts do not explain them",
        "SGLangTransferFailuresRising",
        {
            pf(XFER, "ha:30000"): "0x80 4x40",
            tok(ABORTED, "ha:30000", et="prefill", dep="other"): "0x80 9x40",
        },
        "450s",
        [sg("ha:30000", "prefill", value=4)],
    ),
    (
        "a failure counter born at its first failure, as SGLang's (no series before it), fires",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "_x80 1x40"},
        "450s",
        [sg("ha:30000", "prefill", value=1)],
    ),
    (
        "a failure counter born with as many aborts born beside it: no alert",
        "SGLangTransferFailuresRising",
        {
            pf(XFER, "ha:30000"): "_x80 1x40",
            tok(ABORTED, "ha:30000", et="prefill"): "_x80 1x40",
        },
        "450s",
        [],
    ),
    (
        "a prefill restart resets the counter: no failure",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "5x80 0x40"},
        "450s",
        [],
    ),
    (
        "a restart with a scrape gap: no failure",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "5x80 _x3 0x40"},
        "450s",
        [],
    ),
    (
        "failures, then the co-restart that fixes them (SGLang's counter has no series after it): resolved at once",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "0x60 1+1x20 stale"},
        "420s",
        [],
    ),
    (
        "SGLang bootstrap failures on a decode",
        "SGLangBootstrapFailuresRising",
        {pf(BOOT, "hb:30002", et="decode"): "0x80 1x40"},
        "450s",
        [sg("hb:30002", "decode", value=1)],
    ),
    (
        "a bootstrap failure counter born at its first failure fires",
        "SGLangBootstrapFailuresRising",
        {pf(BOOT, "hb:30002", et="decode"): "_x80 2x40"},
        "450s",
        [sg("hb:30002", "decode", value=2)],
    ),
    (
        "a decode restart resets the counter: no failure",
        "SGLangBootstrapFailuresRising",
        {pf(BOOT, "hb:30002", et="decode"): "4x80 0x40"},
        "450s",
        [],
    ),
    (
        "a pair fails two canaries and more",
        "PdctlPairCanaryFailing",
        {f"pdctl_pair_ok{{{D},{P}}}": "1x5 0x20"},
        "90s",
        [PAIR],
    ),
    (
        "a pair fails one canary then recovers",
        "PdctlPairCanaryFailing",
        {f"pdctl_pair_ok{{{D},{P}}}": "1x5 0x5 1x20"},
        "90s",
        [],
    ),
    (
        "three consecutive failed canaries",
        "PdctlPairBroken",
        {f"pdctl_pair_failures_consecutive{{{D},{P}}}": "0x5 1x5 2x5 3x5"},
        "90s",
        [{**PAIR, "value": 3}],
    ),
    (
        "two failures then a pass",
        "PdctlPairBroken",
        {f"pdctl_pair_failures_consecutive{{{D},{P}}}": "0x5 1x5 2x5 0x5"},
        "90s",
        [],
    ),
    # keep_firing_for 90s: broken 90-115 s, a canary passes at 120 s; the page stays to 205 s with its last value
    (
        "after the passing canary the page stays 90 s",
        "PdctlPairBroken",
        {f"pdctl_pair_failures_consecutive{{{D},{P}}}": "0x5 1x5 2x5 3x5 0x30"},
        "205s",
        [{**PAIR, "value": 3}],
    ),
    (
        "90 s after the passing canary: resolved",
        "PdctlPairBroken",
        {f"pdctl_pair_failures_consecutive{{{D},{P}}}": "0x5 1x5 2x5 3x5 0x30"},
        "210s",
        [],
    ),
    (
        "a decode restarted under a long-running prefill",
        "PdctlLineageHazard",
        {f'pdctl_lineage_hazard{{{D},{P},hazard="degraded-bootstrap"}}': "1x40"},
        "150s",
        [{**PAIR, "hazard": "degraded-bootstrap"}],
    ),
    (
        "a co-restart passing through prefill-restarted-alone",
        "PdctlLineageHazard",
        {f'pdctl_lineage_hazard{{{D},{P},hazard="prefill-restarted-alone"}}': "1x12 0x30"},
        "150s",
        [],
    ),
    (
        "router not ready",
        "PdctlRouterNotReady",
        {f'pdctl_router_ready{{{D},target="router[0]@hc:30001"}}': "0x20"},
        "60s",
        [{"deployment": "d", "target": "router[0]@hc:30001"}],
    ),
    (
        "router not ready for 20 s (a worker restarting)",
        "PdctlRouterNotReady",
        {f'pdctl_router_ready{{{D},target="router[0]@hc:30001"}}': "0x4 1x20"},
        "60s",
        [],
    ),
    (
        "router not ready while a pdctl deploy/restart/heal holds the lock: planned",
        "PdctlRouterNotReady",
        {f'pdctl_router_ready{{{D},target="router[0]@hc:30001"}}': "0x20", CHANGE: "1x20"},
        "60s",
        [],
    ),
    (
        "a target whose /health has not answered 200 for a minute",
        "PdctlTargetDown",
        {f'pdctl_target_serving{{{D},target="decode[0]@hb:30002"}}': "1x4 0x20"},
        "80s",
        [{"deployment": "d", "target": "decode[0]@hb:30002"}],
    ),
    (
        "a target not serving for 20 s (a quick restart)",
        "PdctlTargetDown",
        {f'pdctl_target_serving{{{D},target="decode[0]@hb:30002"}}': "1x4 0x3 1x20"},
        "80s",
        [],
    ),
    # planned changes page nobody: the same minute-long outage while a pdctl deploy/restart/heal holds the lock
    (
        "a target down a minute while a pdctl change holds the lock: held",
        "PdctlTargetDown",
        {SV_D: "1x4 0x20", CHANGE: "0x4 1x20"},
        "80s",
        [],
    ),
    (
        "the same outage with no change in progress (pdctl_change_in_progress 0) fires",
        "PdctlTargetDown",
        {SV_D: "1x4 0x20", CHANGE: "0x24"},
        "80s",
        [{"deployment": "d", "target": "decode[0]@hb:30002"}],
    ),
    (
        "a change in another deployment does not hold it",
        "PdctlTargetDown",
        {SV_D: "1x4 0x20", 'pdctl_change_in_progress{deployment="other"}': "1x24"},
        "80s",
        [{"deployment": "d", "target": "decode[0]@hb:30002"}],
    ),
    # the lock released at 100 s with the target still down: `for:` counts from there
    (
        "still down when the change ends: pending for its 30 s",
        "PdctlTargetDown",
        {SV_D: "1x4 0x40", CHANGE: "0x4 1x14 0x20"},
        "125s",
        [],
    ),
    (
        "still down 30 s after the change ends: fires",
        "PdctlTargetDown",
        {SV_D: "1x4 0x40", CHANGE: "0x4 1x14 0x20"},
        "130s",
        [{"deployment": "d", "target": "decode[0]@hb:30002"}],
    ),
    # keep_firing_for 90s: down 25-105 s (firing from 55 s), serving again at 110 s; the page stays to 195 s, so that
    # its inhibition of RouterErrorRatioHigh holds while the router's 5xx drain from its 1-minute window, with 30 s
    # to spare
    (
        "back up: the page stays 90 s",
        "PdctlTargetDown",
        {SV_D: "1x4 0x16 1x30"},
        "195s",
        [{"deployment": "d", "target": "decode[0]@hb:30002"}],
    ),
    (
        "back up 90 s ago: resolved",
        "PdctlTargetDown",
        {SV_D: "1x4 0x16 1x30"},
        "200s",
        [],
    ),
    (
        "a check failing",
        "PdctlCheckFailing",
        {f'pdctl_check_ok{{{D},layer="health",target="decode[0]@hb:30002",check="health"}}': "0x40"},
        "180s",
        [{"deployment": "d", "layer": "health", "target": "decode[0]@hb:30002", "check": "health"}],
    ),
    (
        "a check of an unknown target (its series removed)",
        "PdctlCheckFailing",
        {f'pdctl_check_ok{{{D},layer="health",target="decode[0]@hb:30002",check="health"}}': "1x4 _x40"},
        "180s",
        [],
    ),
    (
        "heal budget spent",
        "PdctlHealBudgetExhausted",
        {f"pdctl_heal_budget_exhausted{{{D}}}": "0x4 1x10"},
        "60s",
        [{"deployment": "d"}],
    ),
    ("heal budget not spent", "PdctlHealBudgetExhausted", {f"pdctl_heal_budget_exhausted{{{D}}}": "0x20"}, "60s", []),
    (
        "a heal failed",
        "PdctlHealFailed",
        {f'pdctl_heals_total{{{D},outcome="failed"}}': "0x10 1x10", f'pdctl_heals_total{{{D},outcome="done"}}': "0x20"},
        "90s",
        [{"deployment": "d", "outcome": "failed"}],
    ),
    (
        "heals that worked",
        "PdctlHealFailed",
        {f'pdctl_heals_total{{{D},outcome="failed"}}': "0x20", f'pdctl_heals_total{{{D},outcome="done"}}': "0x10 1x10"},
        "90s",
        [],
    ),
    (
        "the timeline cannot be written for a minute",
        "PdctlWatchOutputFailing",
        {f'pdctl_output_ok{{{D},output="timeline /var/log/pdctl/t.jsonl"}}': "1x4 0x10"},
        "120s",
        [{"deployment": "d", "output": "timeline /var/log/pdctl/t.jsonl"}],
    ),
    (
        "a timeline reader that comes back within the minute",
        "PdctlWatchOutputFailing",
        {f'pdctl_output_ok{{{D},output="timeline stdout"}}': "1x4 0x3 1x10"},
        "120s",
        [],
    ),
    (
        "the watch's scrape fails",
        "PdctlWatchDown",
        {'up{job="pdctl-watch",instance="127.0.0.1:9464"}': "0x30"},
        "120s",
        [{"job": "pdctl-watch", "instance": "127.0.0.1:9464"}],
    ),
    (
        "the watch restarted (one failed scrape)",
        "PdctlWatchDown",
        {'up{job="pdctl-watch",instance="127.0.0.1:9464"}': "1x4 0x4 1x30", 'up{job="other",instance="x:1"}': "0x30"},
        "120s",
        [],
    ),
    (
        "no watch scraped at all",
        "PdctlWatchAbsent",
        {'up{job="sglang",instance="ha:30000"}': "1x80"},
        "360s",
        [{"job": "pdctl-watch"}],
    ),
    ("a watch scraped", "PdctlWatchAbsent", {'up{job="pdctl-watch",instance="127.0.0.1:9464"}': "1x80"}, "360s", []),
    (
        "health rounds stopped at 60 s",
        "PdctlWatchRoundsStale",
        {f'pdctl_round_last_timestamp_seconds{{{D},cadence="health"}}': "0+5x12 60x30"},
        "190s",
        [{"deployment": "d", "cadence": "health", "value": 130}],
    ),
    (
        "rounds on time (pairs every 30 s)",
        "PdctlWatchRoundsStale",
        {
            f'pdctl_round_last_timestamp_seconds{{{D},cadence="health"}}': "0+5x40",
            f'pdctl_round_last_timestamp_seconds{{{D},cadence="pairs"}}': "0x6 30x6 60x6 90x6 120x6 150x6 180x6",
        },
        "200s",
        [],
    ),
    (
        "a decode's /metrics not answering for 2 minutes",
        "ScrapeTargetDown",
        {'up{job="sglang",instance="hb:30002",deployment="d"}': "1x10 0x30", WATCH_UP: "1x40"},
        "150s",
        [{"job": "sglang", "instance": "hb:30002", "deployment": "d"}],
    ),
    (
        "a worker restarting: 30 s without a scrape",
        "ScrapeTargetDown",
        {'up{job="sglang",instance="hb:30002",deployment="d"}': "1x10 0x6 1x30"},
        "150s",
        [],
    ),
    (
        "the watch's own scrape failing is PdctlWatchDown's",
        "ScrapeTargetDown",
        {WATCH_UP: "0x40", 'up{job="sglang",instance="hb:30002",deployment="d"}': "1x40"},
        "150s",
        [],
    ),
    (
        "a decode's /metrics down 2 minutes while a pdctl change of its deployment holds the lock: held",
        "ScrapeTargetDown",
        {'up{job="sglang",instance="hb:30002",deployment="d"}': "1x10 0x30", WATCH_UP: "1x40", CHANGE: "0x10 1x30"},
        "150s",
        [],
    ),
    (
        "a target without the deployment label matches no lock: it still alerts",
        "ScrapeTargetDown",
        {'up{job="sglang",instance="hb:30002"}': "1x10 0x30", WATCH_UP: "1x40", CHANGE: "0x10 1x30"},
        "150s",
        [{"job": "sglang", "instance": "hb:30002"}],
    ),
    (
        "inflight held, decode flat: the seed's wedge",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hb:30002"): "100x40"},
        "180s",
        [{"deployment": "d", "job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 1}],
    ),
    (
        "inflight held, decode never generated (no series)",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "2x40"},
        "180s",
        [{"deployment": "d", "job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 2}],
    ),
    (
        "another model's decode progress does not hide it",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hx:30002", model="other"): "0+10x40"},
        "180s",
        [{"deployment": "d", "job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 1}],
    ),
    (
        "another deployment's decode progress (same model) does not hide it",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hx:30002", dep="other"): "0+10x40"},
        "180s",
        [{"deployment": "d", "job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 1}],
    ),
    (
        "inflight > 0 under load with decode progress",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hb:30002"): "0+10x40"},
        "180s",
        [],
    ),
    (
        "idle: inflight 0, decode flat",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "0x40", tok(GEN, "hb:30002"): "100x40"},
        "180s",
        [],
    ),
    # pdctl watch's canaries keep decode generating: their tokens (pdctl_canary_generated_tokens_total) are no progress
    (
        "decode's only progress is the watch's canaries (0.5 token/s each): the wedge",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hb:30002"): "1000+2.5x40", CANARY_TOK: "400+2.5x40"},
        "180s",
        [{"deployment": "d", "job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 1}],
    ),
    (
        "the canaries' 16 tokens every 30 s land in the two counters 5 s apart: still the wedge",
        "SGLangPrefillInflightStalled",
        {
            pf(INFLIGHT, "ha:30000"): "1x40",
            **build(
                200,
                {
                    tok(GEN, "hb:30002"): counter(200, lambda t: 16 / STEP if t % 30 == 0 else 0, start=1000),
                    CANARY_TOK: counter(200, lambda t: 16 / STEP if t % 30 == 5 else 0, start=400),
                },
            ),
        },
        "180s",
        [{"deployment": "d", "job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 1}],
    ),
    (
        "real traffic on top of the canaries (10 tokens/s more): progress",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hb:30002"): "1000+52.5x40", CANARY_TOK: "400+2.5x40"},
        "180s",
        [],
    ),
    (
        "no pdctl watch (no canary series): decode's own 0.5 token/s is progress",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hb:30002"): "1000+2.5x40"},
        "180s",
        [],
    ),
    (
        "another deployment's canaries are not taken off this one's decode",
        "SGLangPrefillInflightStalled",
        {
            pf(INFLIGHT, "ha:30000"): "1x40",
            tok(GEN, "hb:30002"): "1000+2.5x40",
            'pdctl_canary_generated_tokens_total{deployment="other"}': "400+2.5x40",
        },
        "180s",
        [],
    ),
    (
        "no pdctl watch, decode trickling 0.1 token/s (12 tokens in 2 m): under the threshold, no progress",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hb:30002"): "1000+0.5x40"},
        "180s",
        [{"deployment": "d", "job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 1}],
    ),
    (
        "10% of chat completions fail at 1 request/s (smg: path labelled; the watch's /readiness polls left out)",
        "RouterErrorRatioHigh",
        {
            rt("200"): "0+4.5x60",
            rt("500", error_code="prefill_internal_error"): "0+0.5x60",
            READY_200: "0+1x60",
        },
        "180s",
        [{**ROUTER, "value": 0.1}],
    ),
    (
        "sglang-router 0.3.2's answers (no path label) fire the same",
        "RouterErrorRatioHigh",
        {
            rt("200", path=None): "0+4x60",
            rt("503", path=None, error_code="server_selection_failed"): "0+1x60",
        },
        "180s",
        [{**ROUTER, "value": 0.2}],
    ),
    (
        "one error on an idle router (0.1 request/s) is not a page",
        "RouterErrorRatioHigh",
        {rt("200"): "0+0.5x60", rt("500", error_code="prefill_internal_error"): "_x20 1x40", READY_200: "0+1x60"},
        "180s",
        [],
    ),
    (
        "the watch's /readiness polls answered 503 while a worker is down: not clients' errors",
        "RouterErrorRatioHigh",
        {
            rt("200"): "0+5x60",
            rt("503", "/readiness"): "0+1x60",
            rt("503", "/health_generate", "no_healthy_worker_pair"): "0+1x60",
        },
        "180s",
        [],
    ),
    (
        "2% of requests fail: under the threshold",
        "RouterErrorRatioHigh",
        {rt("200"): "0+4.9x60", rt("500", error_code="prefill_internal_error"): "0+0.1x60"},
        "180s",
        [],
    ),
    (
        "10% fail at 0.3 request/s (18 in the minute): under the minimum rate",
        "RouterErrorRatioHigh",
        {rt("200"): "0+1.35x60", rt("500", error_code="prefill_internal_error"): "0+0.15x60"},
        "180s",
        [],
    ),
    (
        "10% fail at 0.5 request/s: over the minimum rate",
        "RouterErrorRatioHigh",
        {rt("200"): "0+2.25x60", rt("500", error_code="prefill_internal_error"): "0+0.25x60"},
        "180s",
        [{**ROUTER, "value": 0.1}],
    ),
    (
        "errors stopped at 180 s: out of the 1-minute window at 245 s, resolved",
        "RouterErrorRatioHigh",
        {rt("200"): "0+4x36 144+5x30", rt("503", error_code="no_available_workers"): "0+1x36 36x30"},
        "245s",
        [],
    ),
    (
        "20% fail while a pdctl deploy/restart/heal holds the lock: held",
        "RouterErrorRatioHigh",
        {rt("200"): "0+4x60", rt("503", error_code="no_available_workers"): "0+1x60", CHANGE: "1x60"},
        "180s",
        [],
    ),
    (
        "20% fail with a lock in another deployment: fires",
        "RouterErrorRatioHigh",
        {
            rt("200"): "0+4x60",
            rt("503", error_code="no_available_workers"): "0+1x60",
            'pdctl_change_in_progress{deployment="other"}': "1x60",
        },
        "180s",
        [{**ROUTER, "value": 0.2}],
    ),
    # a fix under load: every request fails 105-155 s while the lock is held (105-165 s), then all succeed; what is
    # left of the burst in the 1-minute window once the lock is released (the ratio over 5% to about 210 s) lasts
    # under `for: 1m`; without the lock the same burst has been firing since 165 s
    (
        "a fix's error burst drains from the window before it could fire once the lock is released",
        "RouterErrorRatioHigh",
        {**FIX_BURST, CHANGE: "0x20 1x12 0x28"},
        "205s",
        [],
    ),
    (
        "the same burst with no lock (restarts by hand) fires",
        "RouterErrorRatioHigh",
        {**FIX_BURST, CHANGE: "0x60"},
        "205s",
        [{**ROUTER, "value": 0.1}],
    ),
    (
        "p90 latency 10x its level of the hour before, for 11 minutes",
        "E2ELatencyHigh",
        hist(4320, [(3600, 1, 0.7), (4320, 1, 6)]),
        "4260s",
        [{"deployment": "d", "job": "sglang", "instance": "hb:30002", "model_name": "tiny", "value": 9.4}],
    ),
    (
        "a fast model 3x slower, still under the 1 s floor",
        "E2ELatencyHigh",
        hist(4320, [(3600, 1, 0.05), (4320, 1, 0.3)]),
        "4260s",
        [],
    ),
    (
        "slow, but 0.05 request/s: under the minimum rate",
        "E2ELatencyHigh",
        hist(4320, [(3600, 1, 0.7), (4320, 0.05, 6)]),
        "4260s",
        [],
    ),
    (
        "slow for 5 minutes only",
        "E2ELatencyHigh",
        hist(4320, [(3600, 1, 0.7), (3900, 1, 6), (4320, 1, 0.7)]),
        "4200s",
        [],
    ),
    (
        "no history yet: slow from the start is its own baseline",
        "E2ELatencyHigh",
        hist(1500, [(1500, 1, 6)]),
        "1200s",
        [],
    ),
    (
        "latency back to its level: resolved within 2 minutes (the 1-minute window)",
        "E2ELatencyHigh",
        hist(4380, [(3600, 1, 0.7), (4260, 1, 6), (4380, 1, 0.7)]),
        "4380s",
        [],
    ),
    (
        "a decode's KV cache 97% full for 6 minutes (the fullest rank counts)",
        "KvCacheNearlyFull",
        {usage("hb:30002", "decode", "0"): "0.5x10 0.97x80", usage("hb:30002", "decode", "1"): "0.5x90"},
        "420s",
        [sg("hb:30002", "decode", value=0.97)],
    ),
    (
        "90% full: headroom left",
        "KvCacheNearlyFull",
        {usage("hb:30002", "decode", "0"): "0.9x90"},
        "420s",
        [],
    ),
    (
        "97% for 4 minutes, then drained",
        "KvCacheNearlyFull",
        {usage("hb:30002", "decode", "0"): "0.5x10 0.97x48 0.6x40"},
        "420s",
        [],
    ),
]
