"""KV transfer failures (layer "transfer"): the seed's `transfer_failed (must be 0)`, done so that silence is not 0.

The seed's one-liner grepped `sglang:num_transfer_failed_reqs_total{...tp_rank="0"}`. Real SGLang creates a labelled
counter's series at its first increment, so on a server that never failed a transfer the family is absent: that is
0 failures when the server's metrics are on (one of METRICS_ON_WITNESSES is there), and a FAIL with the
`--enable-metrics` hint when no SGLang metric is there at all. Every tp_rank is reported, not only rank 0.
A worker whose host answered but whose /metrics could not be read (refused, hung, an error status) fails: its
failures cannot be seen, and its server is not answering; only a host that does not answer is unknown (the caller
says which). Final-health and the watch judge that with the same `judge_unread`, so they agree.
Pure: `counters_of(metrics)` (a baseline snapshot), `judge_transfer(label, metrics, baseline)`, `judge_unread`.
"""

from __future__ import annotations

import math
from typing import Mapping

from pdctl.checks.metric_names import (
    BOOTSTRAP_FAILED,
    ENABLE_METRICS_HINT,
    FAILURE_COUNTERS,
    METRICS_ON_WITNESSES,
    TRANSFER_FAILED,
    metrics_on,
)
from pdctl.checks.metrics import MetricSet, Sample
from pdctl.checks.result import NEXT_STATUS, NEXT_TRIAGE, CheckResult, Status

LAYER = "transfer"
_WHAT = {TRANSFER_FAILED: "KV transfers failed", BOOTSTRAP_FAILED: "bootstrap handshakes failed"}
_ACTION = (
    "if decode was restarted against a long-running prefill this is the degraded-bootstrap hazard: "
    "run `pdctl restart --pair`; else read the prefill/decode logs for the failing rooms"
)


def counters_of(metrics: MetricSet) -> dict[str, float]:
    """Every failure-counter series -> value, keyed by its Prometheus notation. JSON-safe: store it as a baseline."""
    return {s.series(): s.value for name in FAILURE_COUNTERS for s in metrics.samples(name)}


def _rank_of(s: Sample) -> str:
    parts = [f"tp{s.labels['tp_rank']}" if "tp_rank" in s.labels else "tp?"]
    for key, short in (("dp_rank", "dp"), ("pp_rank", "pp")):
        if s.labels.get(key) not in (None, "0"):
            parts.append(f"{short}{s.labels[key]}")
    return "/".join(parts)


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _judge_counter(label: str, metrics: MetricSet, name: str, baseline: Mapping[str, float] | None) -> CheckResult:
    what = _WHAT.get(name, name)
    expected = "not increased since baseline" if baseline is not None else "0 on every rank"
    samples = metrics.samples(name)
    if not samples and not metrics_on(metrics):
        return CheckResult(
            LAYER,
            label,
            name,
            Status.FAIL,
            observed="no SGLang metrics",
            expected="0",
            detail=f"neither {name} nor {' / '.join(METRICS_ON_WITNESSES)} is exposed, so failures "
            f"cannot be seen: {ENABLE_METRICS_HINT}",
            data={"hint": "--enable-metrics", "reason": "absent"},
        )
    if not samples:  # SGLang creates the series at the first failure
        return CheckResult(
            LAYER,
            label,
            name,
            Status.PASS,
            observed="0 (no series yet)",
            expected=expected,
            detail="no failure since the server started (SGLang creates the series at the first one)",
            data={"per_rank": {}, "baseline_used": baseline is not None, "notes": [], "reason": "no series yet"},
        )
    per_rank: dict[str, float] = {}
    increases: dict[str, float] = {}
    notes: list[str] = []
    for s in samples:
        rank = _rank_of(s)
        per_rank[rank] = per_rank.get(rank, 0.0) + s.value
        if baseline is None:
            increases[rank] = increases.get(rank, 0.0) + s.value
            continue
        key = s.series()
        before = baseline.get(key)
        if before is None:
            inc = s.value
            notes.append(f"{rank}: series not in the baseline, counted from 0")
        elif s.value < before:
            inc = s.value  # counter reset: the process restarted since the baseline
            notes.append(f"{rank}: counter went {_fmt(before)} -> {_fmt(s.value)} (process restarted since baseline)")
        else:
            inc = s.value - before
        increases[rank] = increases.get(rank, 0.0) + inc
    bad = {r: v for r, v in increases.items() if v > 0 or math.isnan(v)}
    observed = " ".join(f"{r}={_fmt(v)}" for r, v in sorted(per_rank.items()))
    data = {"per_rank": per_rank, "baseline_used": baseline is not None, "notes": notes}
    if baseline is not None:
        data["increase"] = increases
    if not bad:
        return CheckResult(
            LAYER, label, name, Status.PASS, observed=observed, expected=expected, detail="; ".join(notes), data=data
        )
    total = sum(v for v in bad.values() if not math.isnan(v))
    since = " since the baseline" if baseline is not None else ""
    ranks = ", ".join(f"{r} +{_fmt(v)}" if baseline is not None else f"{r}={_fmt(v)}" for r, v in sorted(bad.items()))
    return CheckResult(
        LAYER,
        label,
        name,
        Status.FAIL,
        observed=observed,
        expected=expected,
        detail=f"{_fmt(total)} {what}{since} ({ranks}); {_ACTION}",
        data=data,
        next_step=NEXT_TRIAGE,
    )


#: the check a worker gets when its /metrics could not be read (final-health's name for it)
UNREAD_CHECK = "/metrics"


def judge_unread(label: str, why: str, hint: str | None = None) -> CheckResult:
    """The transfer check of a worker whose host answered and whose /metrics could not be read (`why`: the read's
    first line, e.g. "cannot read /metrics of decode[0]@a:30002: connection refused"). A FAIL: a dead or hung server
    on a live host is a finding, not a host that did not answer. Pure."""
    return CheckResult(
        LAYER,
        label,
        UNREAD_CHECK,
        Status.FAIL,
        observed=why,
        expected="its failure counters readable",
        detail="could not read metrics" + (f"; {hint}" if hint else ""),
        data={"reason": "unread"},
        next_step=NEXT_STATUS,
    )


def judge_transfer(label: str, metrics: MetricSet, baseline: Mapping[str, float] | None = None) -> list[CheckResult]:
    """One CheckResult per failure counter (transfer_failed, bootstrap_failed) of one server. Pure.

    Without a baseline every rank must be 0; with one (from `counters_of`), no series may have increased.
    """
    return [_judge_counter(label, metrics, name, baseline) for name in FAILURE_COUNTERS]
