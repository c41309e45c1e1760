"""The incidents of issue 27 as whole deployments, replayed under `promtool test rules` on pdctl/alerts/pdctl.rules.yml.

SCENARIOS: each incident as one deployment (the watch's exporter, SGLang's prefill and decode, the router,
Prometheus's `up`), a timeline built by `scene` below, with checkpoints: (eval time, {alert: (severity, [expected
alerts])}). At a checkpoint EXACTLY the alerts named fire: every other rule of the file is expected silent, so a
scenario says which alerts page, which open a ticket, and that nothing else does. The series builders are
tests/alerts/cases.py's (shared with the per-rule cases)."""

from __future__ import annotations

from typing import Callable

from tests.alerts.cases import (
    ABORTED,
    D,
    GEN,
    INFLIGHT,
    KV_P0,
    P,
    PAIR,
    READY_200,
    ROUTER,
    STEP,
    USAGE,
    WATCH_UP,
    XFER,
    Fn,
    build,
    const,
    counter,
    during,
    e2e,
    pf,
    rt,
    sg,
    tok,
)

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
    "change": f"pdctl_change_in_progress{{{D}}}",
    "canary_tok": f"pdctl_canary_generated_tokens_total{{{D}}}",
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


# pdctl watch's canaries (pairs and router, every 30 s) make the decode generate about 16 tokens each half-minute: the
# decode counts them as it generates (in the step from the canary's start), the watch when the answer arrives (the
# step after). Both counters rise by the same tokens, a few seconds apart.
CANARY_EVERY, CANARY_TOKENS = 30, 16


def canary_tokens(t: int) -> float:
    """Tokens/s the watch's canaries make the decode generate over the step starting at t."""
    return CANARY_TOKENS / STEP if t >= 0 and t % CANARY_EVERY == 0 else 0.0


def scene(
    end: int,
    load: Fn,
    *,
    served: Fn | None = None,
    canaries: Fn = const(1),
    decode_restarts: tuple[int, ...] = (),
    e2e_mix=None,
    **over: Fn,
) -> dict[str, str]:
    """The input series of deployment "d" from t=0 to `end`: healthy under `load` requests/s (a function of t),
    with the series named in `over` replaced. A target whose up is 0 has none of its series then (stale).
    `served`: the requests/s the decode serves (default `load`; 20 tokens and one e2e latency sample each);
    `canaries`: 1 while the watch's canaries pass through the decode (their tokens counted by both), 0 while they fail
    or are unknown; `decode_restarts`: when the decode's counters restart from nothing."""
    one = const(1)
    served = served or load
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
        "change": const(0),
        "canary_tok": counter(end, lambda t: canary_tokens(t - STEP) * (canaries(t - STEP) or 0), start=480),
        "hazard": const(None),
        "hazard_alone": const(None),
        **{f"round_{c}": (lambda t, e=every: t - t % e) for c, every in CADENCE_EVERY.items()},
        "inflight_p": lambda t: 1 if load(t) > 0 and t % 10 == 0 else 0,  # rooms pass through it under load
        "bootq_p": const(0),
        "usage_p": const(0.05),
        "xfer_p": const(None),
        "abort_p": const(None),
        "gen_d": counter(
            end, lambda t: 20 * served(t) + canary_tokens(t) * canaries(t), start=1000, resets=decode_restarts
        ),
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
    for series, fn in e2e(end, served, mix, inst=DEC_I, resets=decode_restarts).items():
        names[series], gates[series] = fn, fns["up_d"]
    return build(end, names, gates)


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
# and the lineage hazard is read at 335. t=600: `pdctl restart --pair`, holding the deployment lock
# (pdctl_change_in_progress 1) from 600 to 660: prefill (600-620), decode (620-640), router (640-650); canaries
# through a restarting worker are unknown (the run of failures stays); the router not ready 600-655 and answering
# 503 to every request until its restart. The canary passes at 660: the fix is over. PdctlPairBroken keeps firing
# until 750 (keep_firing_for 90 s: its inhibition holds while the router's 5xx window drains, with 30 s to spare);
# 2 minutes after the fix nothing fires.
def broken_from(t0: int) -> Callable[[int], int]:
    """pdctl_pair_failures_consecutive of a pair failing from t0: 1, 2, 3 five seconds apart, then +1 per period."""
    return lambda t: 0 if t < t0 else 1 + (t - t0) // 5 if t < t0 + 10 else 3 + (t - t0 - 10) // 30


DEGRADED = scene(
    840,
    ONE,
    served=lambda t: 0 if 305 <= t < 325 or 620 <= t < 640 else 1,
    canaries=during(305, 660, 0),
    decode_restarts=(325, 640),
    change=during(600, 660, 1, 0),
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
# no progress but the watch's own canaries (they still pass: ~16 tokens every 30 s, counted by the decode and by the
# watch), and SGLang's own stall rule agrees after its 2 minutes: it takes the canaries' tokens off (both critical:
# Alertmanager lets PdctlInflightPinned inhibit it). Under load decode keeps generating and only the watch sees the
# pin.
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
# router marks the decode unhealthy after its own health checks (275). t=420: `pdctl restart --pair`, holding the
# lock from 420 to 480 (prefill 420-440, decode 440-470, router 470-480): the router's 5xx, its readiness and the
# decode's /metrics hold their fire from 420; PdctlTargetDown, firing since 130, is held by the lock from 420 too and
# keeps firing 90 s from then (keep_firing_for), to 510. The canary passes at 480: the fix is over; PdctlTargetDown
# resolves 30 s later and nothing fires from then on.
KILLED = scene(
    600,
    ONE,
    served=during(100, 470, 0),
    canaries=during(100, 480, 0),
    decode_restarts=(470,),
    change=during(420, 480, 1, 0),
    up_d=during(100, 470, 0),
    sv_d=during(100, 470, 0),
    health_d=during(100, 470, 0),
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
# the decode unhealthy at 280. t=300: SIGCONT (no pdctl command: no lock); the router ready again at 340;
# PdctlTargetDown keeps firing to 390 (keep_firing_for 90 s); 2 minutes after SIGCONT nothing fires.
HUNG = scene(
    460,
    ONE,
    served=lambda t: 0 if 100 <= t < 300 else 1,
    canaries=during(100, 300, 0),
    up_d=during(100, 300, 0),
    tu_d=during(110, 300, 0),
    sv_d=during(110, 300, 0),
    health_d=during(110, 300, None),
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
# t=90: the inventory gets a new --mem-fraction-static; t=100: `pdctl deploy`, holding the lock from 100 to 155:
# prefill (100-120), decode (120-140), router (140-150), each not serving for its 20 s or 10 s. The flags round at 120
# judges the new inventory: the old decode fails it until the round at 180; the lineage passes through
# prefill-restarted-alone for a minute; the canary at 120 goes through the restarting decode (unknown) and the one at
# 150 passes. A trickle of client requests (0.05/s) gets 503s meanwhile: under RouterErrorRatioHigh's minimum rate.
# The router not ready for 50 s holds its fire (the lock): nothing fires.
TRICKLE = const(0.05)
REDEPLOY = scene(
    420,
    TRICKLE,
    served=lambda t: 0 if 100 <= t < 140 else 0.05,
    canaries=during(100, 150, 0),
    decode_restarts=(140,),
    change=during(100, 155, 1, 0),
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
    ok=counter(420, lambda t: 0 if 100 <= t < 150 else 0.05, start=100, resets=(150,)),
    e503=counter(420, lambda t: 0.05 if 100 <= t < 140 else 0, lazy=True, resets=(150,)),
    ready_ok=counter(420, lambda t: 0 if 100 <= t < 150 else 0.2, start=20, resets=(150,)),
    ready_503=counter(420, lambda t: 0.2 if 100 <= t < 140 else 0, lazy=True, resets=(150,)),
)


# ---- the same re-deploy under load, with a larger model ------------------------------------------------------------
# Clients are not paused (1 request/s) and each worker loads for 35-40 s. t=100: `pdctl deploy`, holding the lock
# from 100 to 190: prefill (100-140), decode (140-175), router (175-185). Every client request fails meanwhile: the
# router answers 503 while a worker is down (100-175), then refuses while it restarts (no answer counted). The flags
# round at 120 fails both workers (the prefill is down, the decode runs the old flags) until the round at 180; the
# lineage passes through prefill-restarted-alone (140-180); the canaries at 120 and 150 are unknown, the one at 180
# passes; the e2e probe through the router fails until 210. Each worker is down over PdctlTargetDown's 30 s and the
# 5xx ratio is 100% for 75 s: without the lock they would page (`lock=False`: the same restarts made by hand,
# `systemctl restart`, which pdctl cannot tell from an outage); with it nothing fires, before, during or after.
def redeploy_under_load(lock: bool) -> dict[str, str]:
    return scene(
        420,
        ONE,
        served=lambda t: 0 if 100 <= t < 185 else 1,
        canaries=during(100, 180, 0),
        decode_restarts=(175,),
        change=during(100, 190, 1 if lock else 0, 0),
        up_p=during(100, 140, 0),
        sv_p=during(100, 140, 0),
        health_p=during(100, 140, 0),
        up_d=during(140, 175, 0),
        sv_d=during(140, 175, 0),
        health_d=during(140, 175, 0),
        up_r=during(175, 185, 0),
        sv_r=during(175, 185, 0),
        health_r=during(175, 185, 0),
        router_ready=during(100, 185, 0),
        ready_check=during(100, 185, 0),
        flags_p=during(120, 180, 0),
        flags_d=during(120, 180, 0),
        hazard_alone=lambda t: 1 if 140 <= t < 180 else None,
        pair_ok=during(120, 180, None),
        e2e_check=during(120, 210, 0),
        ok=counter(420, lambda t: 0 if 100 <= t < 185 else 1, start=100, resets=(185,)),
        e503=counter(420, lambda t: 1 if 100 <= t < 175 else 0, lazy=True, resets=(185,)),
        ready_ok=counter(420, lambda t: 0 if 100 <= t < 185 else 0.2, start=20, resets=(185,)),
        ready_503=counter(420, lambda t: 0.2 if 100 <= t < 175 else 0, lazy=True, resets=(185,)),
    )


REDEPLOY_LOAD = redeploy_under_load(lock=True)
RESTART_BY_HAND = redeploy_under_load(lock=False)

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
            # during the fix (the lock held): still the one page until a canary passes; the router's readiness and
            # its 503s hold their fire
            (
                "650s",
                {
                    "PdctlPairBroken": ("critical", [{**PAIR, "value": 11}]),
                    "PdctlLineageHazard": ("warning", [{**PAIR, "hazard": "degraded-bootstrap"}]),
                    "PdctlCheckFailing": ("warning", [chk("e2e", RTR, "chat completion")]),
                },
            ),
            # the fix is over at 660: PdctlPairBroken keeps firing 90 s (its inhibition holds while the 503s of the
            # fix drain from the router's window, pending for less than its `for:`, and 30 s more), then resolves
            ("720s", {"PdctlPairBroken": ("critical", [{**PAIR, "value": 11}])}),
            ("745s", {"PdctlPairBroken": ("critical", [{**PAIR, "value": 11}])}),
            ("750s", NOTHING),
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
                    "RouterErrorRatioHigh": ("critical", [{**ROUTER, "value": 1}]),
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
            # during the fix (the lock held since 420): the page it already sent keeps firing (keep_firing_for), the
            # router's 5xx and readiness and the decode's scrape hold their fire
            (
                "450s",
                {
                    "PdctlTargetDown": ("critical", [tgt(DEC)]),
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
            (
                "475s",
                {
                    "PdctlTargetDown": ("critical", [tgt(DEC)]),
                    "PdctlCheckFailing": (
                        "warning",
                        [chk("e2e", RTR, "chat completion"), chk("health", RTR, "/readiness")],
                    ),
                },
            ),
            # the fix is over at 480 (the canary passes): the page, its condition gone since the lock was taken at
            # 420, keeps firing to 505 (keep_firing_for 90 s), then resolves
            ("480s", {"PdctlTargetDown": ("critical", [tgt(DEC)])}),
            ("505s", {"PdctlTargetDown": ("critical", [tgt(DEC)])}),
            ("510s", NOTHING),
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
            # resumed at 300: the page keeps firing 90 s (keep_firing_for), then resolves
            ("385s", {"PdctlTargetDown": ("critical", [tgt(DEC)])}),
            ("390s", NOTHING),
            ("420s", NOTHING),
            ("460s", NOTHING),
        ],
    ),
    (
        "a re-deploy with changed flags",
        REDEPLOY,
        [("110s", NOTHING), ("145s", NOTHING), ("240s", NOTHING), ("420s", NOTHING)],
    ),
    (
        "a re-deploy under load (a larger model)",
        REDEPLOY_LOAD,
        [("130s", NOTHING), ("170s", NOTHING), ("185s", NOTHING), ("200s", NOTHING), ("310s", NOTHING)],
    ),
    (
        "the same restarts made by hand under load (no pdctl lock)",
        RESTART_BY_HAND,
        [
            (
                "130s",
                {
                    "PdctlTargetDown": ("critical", [tgt(PRE)]),
                    "PdctlRouterNotReady": ("warning", [tgt(RTR)]),
                },
            ),
            (
                "170s",
                {
                    "PdctlTargetDown": ("critical", [tgt(PRE), tgt(DEC)]),
                    "RouterErrorRatioHigh": ("critical", [{**ROUTER, "value": 1}]),
                    "PdctlRouterNotReady": ("warning", [tgt(RTR)]),
                },
            ),
            # the restarts are over at 185: each TargetDown keeps firing 90 s after its worker is back (the prefill's
            # to 225, the decode's to 260), longer than the router's 5xx window takes to drain: RouterErrorRatioHigh
            # is inhibited under them until it resolves at 230, 30 s before the decode's page stops holding
            (
                "200s",
                {
                    "PdctlTargetDown": ("critical", [tgt(PRE), tgt(DEC)]),
                    "RouterErrorRatioHigh": ("critical", [{**ROUTER, "value": 0.6842}]),
                },
            ),
            (
                "225s",
                {
                    "PdctlTargetDown": ("critical", [tgt(PRE), tgt(DEC)]),
                    "RouterErrorRatioHigh": ("critical", [{**ROUTER, "value": 0.1579}]),
                },
            ),
            ("230s", {"PdctlTargetDown": ("critical", [tgt(DEC)])}),
            ("260s", {"PdctlTargetDown": ("critical", [tgt(DEC)])}),
            ("265s", NOTHING),
            ("310s", NOTHING),
        ],
    ),
]
