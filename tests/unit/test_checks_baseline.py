from __future__ import annotations

from pathlib import Path

from pdctl.checks.baseline import BaselineRecord, baseline_snapshot
from pdctl.checks.metrics import parse_metrics
from pdctl.errors import UnreachableError

FIX = Path(__file__).parent / "fixtures"
PREFILL = parse_metrics((FIX / "sglang-0.5.23-metrics-prefill-idle.prom").read_text())
NO_COUNTERS = parse_metrics('# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{tp_rank="0"} 0.0\n')
NO_SGLANG = parse_metrics("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.0\n")


def test_every_worker_read_is_a_snapshot_with_nothing_unread():
    snap, unread = baseline_snapshot({"prefill[0]": PREFILL})
    assert unread == {} and list(snap) == ["prefill[0]"] and snap["prefill[0]"]


def test_an_error_or_no_sglang_metrics_is_unread_with_why():
    e = UnreachableError("cannot read /metrics of decode[0]: connection refused\nmore", target="decode[0]")
    snap, unread = baseline_snapshot({"prefill[0]": NO_SGLANG, "decode[0]": e})
    assert snap == {}
    assert unread["decode[0]"] == "cannot read /metrics of decode[0]: connection refused"
    assert "num_running_reqs" in unread["prefill[0]"] and "--enable-metrics" in unread["prefill[0]"]


def test_counters_with_no_series_yet_are_recorded_as_none_failed():
    # real SGLang: no failure yet, no series; the baseline holds no series, so a later one counts from 0
    snap, unread = baseline_snapshot({"prefill[0]": NO_COUNTERS})
    assert unread == {} and snap == {"prefill[0]": {}}


def test_not_recorded_is_one_failed_check_per_unread_worker_and_recorded_none():
    rec = BaselineRecord(
        "/s/baseline-x.json",
        recorded=False,
        workers=["prefill[0]"],
        unread={"decode[0]": "connection refused"},
        kept=True,
    )
    (c,) = rec.checks()
    assert c.failed and c.target == "decode[0]" and c.observed == "connection refused"
    assert "/s/baseline-x.json kept as it was" in c.detail and "NOT recorded" in rec.summary
    done = BaselineRecord("/s/baseline-x.json", recorded=True, workers=["prefill[0]", "decode[0]"])
    assert done.checks() == []
    assert done.summary == "transfer baseline recorded: /s/baseline-x.json (counters of 2 worker(s))"
