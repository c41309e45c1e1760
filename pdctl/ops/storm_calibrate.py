"""`pdctl storm --target transfer-window`'s calibration: lone requests of the storm's size through the router, timed
at the client, with the prefill's transfer-latency and time-to-first-token histograms read around each of them.

Under background traffic the histograms also gain the other requests' observations; a short look before the first
request measures that background (rate, mean per observation) and storm_plan.own_mean takes it out, so that the
launch spacing and the window's lower edge follow the storm's own requests. Read-only apart from those requests.
"""

from __future__ import annotations

import asyncio
import random
import time

from pdctl.checks.metric_names import KV_TRANSFER_LATENCY_MS
from pdctl.ops.context import Deployment
from pdctl.ops.storm_client import generate_body, run_requests
from pdctl.ops.storm_plan import Calibration, StormConfig, histogram_mean_delta, own_mean, prompt_ids

PREFILL_TTFT = "sglang:time_to_first_token_seconds"


def _hist(dep: Deployment, name: str) -> tuple[float, float] | None:
    """(sum, count) of a histogram summed over every prefill, None when no prefill exposes it."""
    from pdctl.checks.sampling import fetch_metrics

    total_s = total_c = 0.0
    seen = False
    for _r, i, _ in dep.inv.instances("prefill"):
        try:
            m = fetch_metrics(dep.base_url("prefill", i), timeout=dep.inv.final_health.metrics_timeout)
        except Exception:
            continue
        s, c = m.value(name + "_sum"), m.value(name + "_count")
        if s is not None and c is not None:
            seen = True
            total_s += s
            total_c += c
    return (total_s, total_c) if seen else None


BACKGROUND_PROBE_S = 3.0  # how long the calibration watches the prefill histograms before its first request


def calibrate(
    dep: Deployment, base: str, cfg: StormConfig, rng: random.Random, *, probe_s: float = BACKGROUND_PROBE_S
) -> Calibration:
    """Lone, un-aborted requests of the storm's prompt size, one after another; TTFT from the client, transfer
    latency and prefill TTFT from the prefill histograms around each request, with the background traffic seen in
    a `probe_s` look before the first one taken out (storm_plan.own_mean). Bounded: probe_s + calib_requests x
    request_timeout."""
    lat_b, pre_b = _hist(dep, KV_TRANSFER_LATENCY_MS), _hist(dep, PREFILL_TTFT)
    started = time.monotonic()
    time.sleep(probe_s)
    lat0, pre0 = _hist(dep, KV_TRANSFER_LATENCY_MS), _hist(dep, PREFILL_TTFT)
    probed = time.monotonic() - started
    bg_lat, bg_pre = histogram_mean_delta(lat_b, lat0), histogram_mean_delta(pre_b, pre0)
    # every request ends in a transfer; not every server observes a prefill-side TTFT: the larger count is the rate
    bg_n = max((a[1] - b[1] for a, b in ((lat0, lat_b), (pre0, pre_b)) if a and b and a[1] >= b[1]), default=0.0)
    ttfts, failures, lats, pres = [], [], [], []
    with dep.progress.step(f"calibrate: {cfg.calib_requests} lone request(s) of {cfg.prompt_tokens} tokens"):
        for k in range(cfg.calib_requests):
            dep.progress.waiting(
                "calibration requests",
                time.monotonic() - started,
                probe_s + cfg.calib_requests * cfg.request_timeout_s,
                done=k,
                total=cfg.calib_requests,
            )
            body = generate_body(prompt_ids(cfg.prompt_tokens, rng), 4, cfg.path)
            (o,) = asyncio.run(
                run_requests(base, cfg.path, [(0.0, None)], lambda _k: body, timeout_s=cfg.request_timeout_s)
            )
            lat1, pre1 = _hist(dep, KV_TRANSFER_LATENCY_MS), _hist(dep, PREFILL_TTFT)
            if o.first_token_s is not None and o.error is None:
                ttfts.append(o.first_token_s)
                lats.append(own_mean(lat0, lat1, 1, bg_lat))
                pres.append(own_mean(pre0, pre1, 1, bg_pre))
            else:
                failures.append(o.error or "no token")
            lat0, pre0 = lat1, pre1
            dep.progress.info(
                f"calibration {k + 1}/{cfg.calib_requests}",
                f"first token after {o.first_token_s:.2f}s" if o.first_token_s else (o.error or "?"),
            )
    lat = _mean([x for x in lats if x is not None])
    pre = _mean([x for x in pres if x is not None])
    cal = Calibration(
        ttfts,
        None if lat is None else lat / 1000.0,
        pre,
        failures,
        background_per_s=round(bg_n / probed, 3) if probed > 0 else 0.0,
    )
    if bg_n:
        cal.notes.append(
            f"background traffic: {cal.background_per_s:g} prefill requests/s before calibrating; "
            "their share of the histograms was taken out, and the first-token time was measured "
            "under it"
        )
    return cal


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None
