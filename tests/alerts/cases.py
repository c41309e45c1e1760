"""promtool unit-test cases for pdctl/alerts/pdctl.rules.yml.

CASES: each alert's condition and its non-firing twin. A case is (name, alert, input series {series: values}, eval
time, expected alerts); an expected alert is its labels (alertname and severity added from the rule) plus `value`
when an annotation prints $value. The test turns these into a promtool test file; the annotations each alert must
carry are rendered from the rule's own templates.

SCENARIOS: the incidents of issue 27 as whole deployments (the watch's exporter, SGLang's prefill and decode, the
router, Prometheus's `up`), each a timeline built by `scene` below, with checkpoints: (eval time, {alert: (severity,
[expected alerts])}). At a checkpoint EXACTLY the alerts named fire: every other rule of the file is expected
silent, so a scenario says which alerts page, which open a ticket, and that nothing else does."""

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
        "errors stopped 2 minutes ago: resolved",
        "RouterErrorRatioHigh",
        {rt("200"): "0+4x36 144+5x30", rt("503", error_code="no_available_workers"): "0+1x36 36x30"},
        "310s",
        [],
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


# ---- incident scenarios -------------------------------------------------------------------------------------------
# One deployment "d", 1P1D behind a router, as pdctl watch, SGLang and smg expose it; the router's metrics port is
# scraped as job "router", SGLang's as job "sglang", both with the `deployment` target label.
PRE, DEC, RTR = "prefill[0]@ha:30000", "decode[0]@hb:30002", "router[0]@hc:30001"
PRE_I, DEC_I, RTR_I = "ha:30000", "hb:30002", "hc:29000"
CADENCE_EVERY = {"health": 5, "inflight": 1, "e2e": 30, "pairs": 30, "flags": 60}


def check(layer: str, target: str, name: str) -> str:
    return f'pdctl_check_ok{{{D},layer="{layer}",target="{target}",check="{name}"}}'


# the watch's series by short name
W = {
    "tu_p": f'pdctl_target_up{{{D},target="{PRE}"}}',
    "tu_d": f'pdctl_target_up{{{D},target="{DEC}"}}',
    "tu_r": f'pdctl_target_up{{{D},target="{RTR}"}}',
    "sv_p": f'pdctl_target_serving{{{D},target="{PRE}"}}',
    "sv_d": f'pdctl_target_serving{{{D},target="{DEC}"}}',
    "sv_r": f'pdctl_target_serving{{{D},target="{RTR}"}}',
    "health_p": check("health", PRE, "/health"),
    "health_d": check("health", DEC, "/health"),
    "health_r": check("health", RTR, "/health"),
    "ready_check": check("health", RTR, "/readiness"),
    "e2e_check": check("e2e", RTR, "chat completion"),
    "xfer_check_p": check("transfer", PRE, XFER),
    "xfer_check_d": check("transfer", DEC, XFER),
    "inflight_check": check("inflight", "prefill+decode", "inflight"),
    "flags_p": check("flags", PRE, "--mem-fraction-static"),
    "flags_d": check("flags", DEC, "--mem-fraction-static"),
    "router_ready": f'pdctl_router_ready{{{D},target="{RTR}"}}',
    "pinned": f"pdctl_inflight_pinned{{{D}}}",
    "busy": f"pdctl_inflight_busy{{{D}}}",
    "pair_ok": f"pdctl_pair_ok{{{D},{P}}}",
    "pair_fails": f"pdctl_pair_failures_consecutive{{{D},{P}}}",
    "kv_p": KV_P0,
    "kv_d": f'pdctl_kv_failures_unexplained{{{D},target="{DEC}",kind="transfer"}}',
    "kvraw_p": f'pdctl_kv_failures_since_start{{{D},target="{PRE}",kind="transfer"}}',
    "hazard": f'pdctl_lineage_hazard{{{D},{P},hazard="degraded-bootstrap"}}',
    "hazard_alone": f'pdctl_lineage_hazard{{{D},{P},hazard="prefill-restarted-alone"}}',
    "heals_failed": f'pdctl_heals_total{{{D},outcome="failed"}}',
    "heals_done": f'pdctl_heals_total{{{D},outcome="done"}}',
    "budget": f"pdctl_heal_budget_exhausted{{{D}}}",
    **{f"round_{c}": f'pdctl_round_last_timestamp_seconds{{{D},cadence="{c}"}}' for c in CADENCE_EVERY},
}
# SGLang's prefill, SGLang's decode, the router: series by short name, each scraped from one target
SP = {
    "inflight_p": pf(INFLIGHT, PRE_I),
    "bootq_p": pf("sglang:num_prefill_bootstrap_queue_reqs", PRE_I),
    "usage_p": pf(USAGE, PRE_I),
    "xfer_p": pf(XFER, PRE_I),
    "abort_p": tok(ABORTED, PRE_I, et="prefill"),
}
SD = {
    "gen_d": tok(GEN, DEC_I),
    "usage_d": pf(USAGE, DEC_I, et="decode"),
    "abort_d": tok(ABORTED, DEC_I),
}
SR = {
    "ok": rt("200"),
    "e503": rt("503", error_code="no_available_workers"),
    "ready_ok": READY_200,
    "ready_503": rt("503", "/readiness"),
}
UP = {
    "up_watch": WATCH_UP,
    "up_p": f'up{{job="sglang",instance="{PRE_I}",{D}}}',
    "up_d": f'up{{job="sglang",instance="{DEC_I}",{D}}}',
    "up_r": f'up{{job="router",instance="{RTR_I}",{D}}}',
}


def scene(end: int, load: Fn, *, e2e_mix=None, e2e_resets=(), **over: Fn) -> dict[str, str]:
    """The input series of deployment "d" from t=0 to `end`: healthy under `load` requests/s (a function of t),
    with the series named in `over` replaced. A target whose up is 0 has none of its series then (stale)."""
    one = const(1)
    fns: dict[str, Fn] = {
        **{k: one for k in UP},
        **{
            k: one
            for k in ("tu_p", "tu_d", "tu_r", "sv_p", "sv_d", "sv_r", "health_p", "health_d", "health_r", "ready_check")
        },
        **{k: one for k in ("e2e_check", "xfer_check_p", "xfer_check_d", "inflight_check", "flags_p", "flags_d")},
        "router_ready": one,
        "pinned": const(0),
        "busy": lambda t: 1 if load(t) > 0 else 0,
        "pair_ok": one,
        "pair_fails": const(0),
        **{k: const(0) for k in ("kv_p", "kv_d", "kvraw_p", "heals_failed", "heals_done", "budget")},
        "hazard": const(None),
        "hazard_alone": const(None),
        **{f"round_{c}": (lambda t, e=every: t - t % e) for c, every in CADENCE_EVERY.items()},
        "inflight_p": lambda t: 1 if load(t) > 0 and t % 10 == 0 else 0,  # rooms pass through it under load
        "bootq_p": const(0),
        "usage_p": const(0.05),
        "xfer_p": const(None),
        "abort_p": const(None),
        "gen_d": counter(end, lambda t: 20 * load(t), start=1000),
        "usage_d": lambda t: 0.3 + 0.2 * load(t),
        "abort_d": const(None),
        "ok": counter(end, load, start=100),
        "e503": const(None),
        "ready_ok": counter(end, const(0.2), start=20),  # pdctl watch's /readiness polls, every 5 s
        "ready_503": const(None),
    }
    unknown = set(over) - set(fns)
    assert not unknown, f"no such series: {unknown}"
    fns.update(over)
    gates: dict[str, Fn | None] = {}
    names: dict[str, str] = {}
    for group, gate in ((UP, None), (W, "up_watch"), (SP, "up_p"), (SD, "up_d"), (SR, "up_r")):
        for k, series in group.items():
            names[series], gates[series] = fns[k], (fns[gate] if gate else None)
    mix = e2e_mix or (lambda t: [(1.0, 0.7)])
    for series, fn in e2e(end, load, mix, inst=DEC_I, resets=e2e_resets).items():
        names[series], gates[series] = fn, fns["up_d"]
    return build(end, names, gates)


def steps_since(t0: int, every: int, start: int = 1) -> Callable[[int], int]:
    """start, start+1, ... every `every` s from t0 (consecutive failed canaries)."""
    return lambda t: start + (t - t0) // every


def tgt(target: str) -> dict:
    return {"deployment": "d", "target": target}


def up_alert(job: str, inst: str) -> dict:
    return {"job": job, "instance": inst, "deployment": "d"}


def chk(layer: str, target: str, name: str) -> dict:
    return {"deployment": "d", "layer": layer, "target": target, "check": name}


ONE = const(1.0)

# ---- healthy soak: steady load, client aborts every minute, a few client timeouts --------------------------------
# Every minute 3 clients abort mid-request on each worker, and the prefill counts 2 of those as transfer failures
# (an abort in the transfer window fails the room); pdctl's raw count rises, its unexplained count stays 0. 3% of the
# requests are slow (6 s: clients that time out). Nothing may fire.
ABORTS = lambda t: 3 / STEP if t >= 100 and t % 60 == 40 else 0  # noqa: E731
SOAK = scene(
    1800,
    ONE,
    e2e_mix=lambda t: [(0.97, 0.7), (0.03, 6.0)],
    xfer_p=counter(1800, lambda t: 2 / 3 * ABORTS(t), lazy=True),
    abort_p=counter(1800, ABORTS, lazy=True),
    abort_d=counter(1800, ABORTS, lazy=True),
    kvraw_p=counter(1800, lambda t: 2 / 3 * ABORTS(t)),
    usage_d=lambda t: 0.4 + 0.2 * ((t // 60) % 2),
)


# ---- degraded bootstrap, then the fix ------------------------------------------------------------------------------
# Times as pdctl watch runs them: health every 5 s, pairs every 30 s (on the minute and half-minute) and a failed
# canary sent again 5 s later until it passes or has failed 3 times in a row (then every 30 s); the flags round at
# once after a failed canary; a canary through a worker whose /health fails is unknown (pdctl_pair_ok absent, the run
# of failures neither broken nor extended). A restarting role's port refuses, then its /health answers 503 while it
# loads: it is not serving (pdctl_target_serving 0) while its host answers (pdctl_target_up 1).
#
# t=305: the decode is restarted alone under the long-running prefill (not serving for 20 s). From 325 every
# transfer fails silently: the router still answers 200 (a failed transfer can return 200 with one token
# repeated). The canary at 330 fails, again at 335 and 340 (broken); the failures stand (pdctl_kv_failures_unexplained)
# and the lineage hazard is read at 335. t=600: `pdctl restart --pair`: prefill (600-620), decode (620-640), router
# (640-650); canaries through a restarting worker are unknown (the run of failures stays); the router not ready
# 600-655 and answering 503 to every request until its restart. The canary passes at 660: the fix is over; 2
# minutes later nothing fires.
def broken_from(t0: int) -> Callable[[int], int]:
    """pdctl_pair_failures_consecutive of a pair failing from t0: 1, 2, 3 five seconds apart, then +1 per period."""
    return lambda t: 0 if t < t0 else 1 + (t - t0) // 5 if t < t0 + 10 else 3 + (t - t0 - 10) // 30


DEGRADED = scene(
    840,
    ONE,
    e2e_resets=(325, 640),
    up_d=lambda t: 0 if 305 <= t < 325 or 620 <= t < 640 else 1,
    sv_d=lambda t: 0 if 305 <= t < 325 or 620 <= t < 640 else 1,
    health_d=lambda t: 0 if 305 <= t < 325 or 620 <= t < 640 else 1,
    up_p=during(600, 620, 0),
    sv_p=during(600, 620, 0),
    health_p=during(600, 620, 0),
    up_r=during(640, 650, 0),
    sv_r=during(640, 650, 0),
    health_r=during(640, 650, 0),
    router_ready=during(600, 655, 0),
    ready_check=during(600, 655, 0),
    gen_d=counter(840, lambda t: 0 if 305 <= t < 325 or 620 <= t < 640 else 20, start=1000, resets=(325, 640)),
    xfer_p=counter(840, lambda t: 1 if 325 <= t < 600 else 0, lazy=True, resets=(620,)),
    kvraw_p=counter(840, lambda t: 1 if 325 <= t < 600 else 0),
    kv_p=lambda t: t - 325 if 330 <= t < 600 else 0,
    xfer_check_p=during(330, 620, 0),
    e2e_check=during(330, 660, 0),
    hazard=lambda t: 1 if 335 <= t < 660 else None,
    pair_ok=lambda t: 0 if 330 <= t < 600 else None if 600 <= t < 660 else 1,
    pair_fails=lambda t: broken_from(330)(min(t, 599)) if t < 660 else 0,
    ok=counter(840, lambda t: 0 if 600 <= t < 655 else 1, start=100, resets=(650,)),
    e503=counter(840, lambda t: 1 if 600 <= t < 640 else 0, lazy=True, resets=(650,)),
    ready_ok=counter(840, lambda t: 0 if 600 <= t < 655 else 0.2, start=20, resets=(650,)),
    ready_503=counter(840, lambda t: 0.2 if 600 <= t < 640 else 0, lazy=True, resets=(650,)),
)

# ---- a pin, idle and under load ------------------------------------------------------------------------------------
# t=100: a room sticks in the prefill's inflight queue; the watch's verdict turns pinned at 125. Idle, decode makes
# no progress at all and SGLang's own stall rule agrees after its 2 minutes (both critical: Alertmanager lets
# PdctlInflightPinned inhibit it); under load decode keeps generating and only the watch sees the pin.
PIN_IDLE = scene(
    300,
    const(0),
    inflight_p=during(100, 10**6, 1, 0),
    pinned=during(125, 10**6, 1, 0),
    inflight_check=during(125, 10**6, 0),
)
PIN_LOAD = scene(
    300,
    ONE,
    inflight_p=lambda t: (1 + t % 10 // 5) if t >= 100 else (1 if t % 10 == 0 else 0),
    pinned=during(125, 10**6, 1, 0),
    inflight_check=during(125, 10**6, 0),
)

# ---- a killed decode, then restarted -------------------------------------------------------------------------------
# t=100: the decode is killed under load: its port refuses (not serving, /health failing; its host answers), its
# /metrics too; the router answers 503 to every request; the canaries through it are unknown (its /health fails); the
# router marks the decode unhealthy after its own health checks (275). t=420: `pdctl restart --pair` (prefill
# 420-440, decode 440-470, router 470-480); the canary passes at 480; 2 minutes later nothing fires.
KILLED = scene(
    600,
    ONE,
    e2e_resets=(470,),
    up_d=during(100, 470, 0),
    sv_d=during(100, 470, 0),
    health_d=during(100, 470, 0),
    gen_d=counter(600, lambda t: 0 if 100 <= t < 470 else 20, start=1000, resets=(470,)),
    up_p=during(420, 440, 0),
    sv_p=during(420, 440, 0),
    health_p=during(420, 440, 0),
    bootq_p=lambda t: min(t - 100, 60) if 100 <= t < 420 else 0,  # rooms wait for the dead decode's handshake
    up_r=during(470, 480, 0),
    sv_r=during(470, 480, 0),
    health_r=during(470, 480, 0),
    router_ready=during(275, 480, 0),
    ready_check=during(275, 480, 0),
    e2e_check=during(120, 480, 0),
    pair_ok=during(120, 480, None),
    ok=counter(600, lambda t: 0 if 100 <= t < 480 else 1, start=100, resets=(480,)),
    e503=counter(600, lambda t: 1 if 100 <= t < 470 else 0, lazy=True, resets=(480,)),
    ready_ok=counter(600, lambda t: 0 if 275 <= t < 480 else 0.2, start=20, resets=(480,)),
    ready_503=counter(600, lambda t: 0.2 if 275 <= t < 470 else 0, lazy=True, resets=(480,)),
)

# ---- a hung host (the decode SIGSTOPped), then resumed -------------------------------------------------------------
# t=100: the decode stops answering: Prometheus's scrapes time out (up 0), the watch's reads time out (its target
# unknown from 110: not up, not serving, its checks and its pairs unknown), the router's requests hang (no answers at
# all: RouterErrorRatioHigh's minimum rate keeps it quiet), the e2e probe times out (fails from 150), the router marks
# the decode unhealthy at 280. t=300: SIGCONT; the router ready again at 340; 2 minutes later nothing fires.
HUNG = scene(
    460,
    ONE,
    up_d=during(100, 300, 0),
    tu_d=during(110, 300, 0),
    sv_d=during(110, 300, 0),
    health_d=during(110, 300, None),
    gen_d=counter(460, lambda t: 0 if 100 <= t < 300 else 20, start=1000),
    bootq_p=lambda t: min(t - 100, 60) if 100 <= t < 300 else 0,
    pair_ok=during(120, 300, None),
    e2e_check=during(150, 330, 0),
    router_ready=during(280, 340, 0),
    ready_check=during(280, 340, 0),
    ok=counter(460, lambda t: 0 if 100 <= t < 300 else 2 if 300 <= t < 400 else 1, start=100),
    ready_ok=counter(460, lambda t: 0 if 280 <= t < 340 else 0.2, start=20),
    ready_503=counter(460, lambda t: 0.2 if 280 <= t < 340 else 0, lazy=True),
)

# ---- a re-deploy with changed flags (clients paused: a 1P1D has no second unit to serve them) ----------------------
# t=90: the inventory gets a new --mem-fraction-static; t=100: `pdctl deploy`: prefill (100-120), decode (120-140),
# router (140-150), each not serving for its 20 s or 10 s. The flags round at 120 judges the new inventory: the old
# decode fails it until the round at 180; the lineage passes through prefill-restarted-alone for a minute; the canary
# at 120 goes through the restarting decode (unknown) and the one at 150 passes. A trickle of client requests
# (0.05/s) gets 503s meanwhile: under RouterErrorRatioHigh's minimum rate. Only the router's readiness (down 50 s)
# opens a ticket.
TRICKLE = const(0.05)
REDEPLOY = scene(
    420,
    TRICKLE,
    e2e_resets=(140,),
    up_p=during(100, 120, 0),
    sv_p=during(100, 120, 0),
    health_p=during(100, 120, 0),
    up_d=during(120, 140, 0),
    sv_d=during(120, 140, 0),
    health_d=during(120, 140, 0),
    up_r=during(140, 150, 0),
    sv_r=during(140, 150, 0),
    health_r=during(140, 150, 0),
    router_ready=during(100, 150, 0),
    ready_check=during(100, 150, 0),
    flags_d=during(120, 180, 0),
    hazard_alone=lambda t: 1 if 120 <= t < 180 else None,
    pair_ok=during(120, 150, None),
    e2e_check=during(120, 150, 0),
    gen_d=counter(420, lambda t: 0 if 100 <= t < 140 else 1, start=1000, resets=(140,)),
    ok=counter(420, lambda t: 0 if 100 <= t < 150 else 0.05, start=100, resets=(150,)),
    e503=counter(420, lambda t: 0.05 if 100 <= t < 140 else 0, lazy=True, resets=(150,)),
    ready_ok=counter(420, lambda t: 0 if 100 <= t < 150 else 0.2, start=20, resets=(150,)),
    ready_503=counter(420, lambda t: 0.2 if 100 <= t < 140 else 0, lazy=True, resets=(150,)),
)

NOTHING: dict = {}
# (name, {series: values}, [(eval time, {alertname: (severity, [expected alerts])})])
SCENARIOS = [
    (
        "healthy soak: steady load, client aborts, client timeouts",
        SOAK,
        [("600s", NOTHING), ("1200s", NOTHING), ("1800s", NOTHING)],
    ),
    (
        "degraded bootstrap, then restart --pair",
        DEGRADED,
        [
            (
                "420s",
                {
                    "PdctlPairBroken": ("critical", [{**PAIR, "value": 5}]),
                    "PdctlPairCanaryFailing": ("warning", [PAIR]),
                    "PdctlKvFailuresRising": ("warning", [{**tgt(PRE), "kind": "transfer", "value": 95}]),
                    "SGLangTransferFailuresRising": ("warning", [sg(PRE_I, "prefill", value=95)]),
                },
            ),
            (
                "590s",
                {
                    "PdctlPairBroken": ("critical", [{**PAIR, "value": 11}]),
                    "PdctlPairCanaryFailing": ("warning", [PAIR]),
                    "PdctlKvFailuresRising": ("warning", [{**tgt(PRE), "kind": "transfer", "value": 265}]),
                    "SGLangTransferFailuresRising": ("warning", [sg(PRE_I, "prefill", value=265)]),
                    "PdctlLineageHazard": ("warning", [{**PAIR, "hazard": "degraded-bootstrap"}]),
                    "PdctlCheckFailing": (
                        "warning",
                        [chk("e2e", RTR, "chat completion"), chk("transfer", PRE, XFER)],
                    ),
                },
            ),
            # during the fix (the router restarted at 640 has no 5xx series left): still the one page until a canary
            # passes
            (
                "650s",
                {
                    "PdctlPairBroken": ("critical", [{**PAIR, "value": 11}]),
                    "PdctlLineageHazard": ("warning", [{**PAIR, "hazard": "degraded-bootstrap"}]),
                    "PdctlCheckFailing": ("warning", [chk("e2e", RTR, "chat completion")]),
                    "PdctlRouterNotReady": ("warning", [tgt(RTR)]),
                },
            ),
            ("780s", NOTHING),
            ("840s", NOTHING),
        ],
    ),
    (
        "a pin on an idle deployment",
        PIN_IDLE,
        [
            ("150s", {"PdctlInflightPinned": ("critical", [{"deployment": "d"}])}),
            (
                "300s",
                {
                    "PdctlInflightPinned": ("critical", [{"deployment": "d"}]),
                    "SGLangPrefillInflightStalled": (
                        "critical",
                        [{"deployment": "d", "job": "sglang", "instance": PRE_I, "model_name": "tiny", "value": 1}],
                    ),
                    "PdctlCheckFailing": ("warning", [chk("inflight", "prefill+decode", "inflight")]),
                },
            ),
        ],
    ),
    (
        "a pin under load",
        PIN_LOAD,
        [
            ("150s", {"PdctlInflightPinned": ("critical", [{"deployment": "d"}])}),
            (
                "300s",
                {
                    "PdctlInflightPinned": ("critical", [{"deployment": "d"}]),
                    "PdctlCheckFailing": ("warning", [chk("inflight", "prefill+decode", "inflight")]),
                },
            ),
        ],
    ),
    (
        "a killed decode, then restart --pair",
        KILLED,
        [
            ("150s", {"PdctlTargetDown": ("critical", [tgt(DEC)])}),
            (
                "200s",
                {
                    "PdctlTargetDown": ("critical", [tgt(DEC)]),
                    "RouterErrorRatioHigh": ("critical", [{**ROUTER, "value": 0.8333}]),
                    "ScrapeTargetDown": ("warning", [up_alert("sglang", DEC_I)]),
                },
            ),
            (
                "400s",
                {
                    "PdctlTargetDown": ("critical", [tgt(DEC)]),
                    "RouterErrorRatioHigh": ("critical", [{**ROUTER, "value": 1}]),
                    "ScrapeTargetDown": ("warning", [up_alert("sglang", DEC_I)]),
                    "PdctlRouterNotReady": ("warning", [tgt(RTR)]),
                    "PdctlCheckFailing": (
                        "warning",
                        [
                            chk("e2e", RTR, "chat completion"),
                            chk("health", DEC, "/health"),
                            chk("health", RTR, "/readiness"),
                        ],
                    ),
                },
            ),
            ("600s", NOTHING),
        ],
    ),
    (
        "a hung host (the decode SIGSTOPped), then SIGCONT",
        HUNG,
        [
            (
                "200s",
                {
                    "PdctlTargetDown": ("critical", [tgt(DEC)]),
                    "ScrapeTargetDown": ("warning", [up_alert("sglang", DEC_I)]),
                },
            ),
            (
                "290s",
                {
                    "PdctlTargetDown": ("critical", [tgt(DEC)]),
                    "ScrapeTargetDown": ("warning", [up_alert("sglang", DEC_I)]),
                    "PdctlCheckFailing": ("warning", [chk("e2e", RTR, "chat completion")]),
                },
            ),
            ("460s", NOTHING),
        ],
    ),
    (
        "a re-deploy with changed flags",
        REDEPLOY,
        [
            ("110s", NOTHING),
            ("145s", {"PdctlRouterNotReady": ("warning", [tgt(RTR)])}),
            ("240s", NOTHING),
            ("420s", NOTHING),
        ],
    ),
]
