from __future__ import annotations

from pathlib import Path

from pdctl.checks import metric_names as N
from pdctl.checks.metrics import parse_metrics
from pdctl.checks.result import Status
from pdctl.checks.transfer import counters_of, judge_transfer

FIX = Path(__file__).parent / "fixtures"
PREFILL = (FIX / "sglang-0.5.23-metrics-prefill-idle.prom").read_text()
DECODE = (FIX / "sglang-0.5.23-metrics-decode-idle.prom").read_text()
LABELS = 'engine_type="prefill",model_name="m",moe_ep_rank="0",pp_rank="0"'


def prom(tf: dict[int, float], bf: dict[int, float]) -> str:
    lines = [f"# TYPE {N.TRANSFER_FAILED} counter"]
    lines += [f'{N.TRANSFER_FAILED}{{{LABELS},tp_rank="{r}"}} {v}' for r, v in tf.items()]
    lines += [f"# TYPE {N.BOOTSTRAP_FAILED} counter"]
    lines += [f'{N.BOOTSTRAP_FAILED}{{{LABELS},tp_rank="{r}"}} {v}' for r, v in bf.items()]
    return "\n".join(lines) + "\n"


def test_captures_at_rest_pass():
    for text in (PREFILL, DECODE):
        res = judge_transfer("prefill[0]", parse_metrics(text))
        assert [r.name for r in res] == [N.TRANSFER_FAILED, N.BOOTSTRAP_FAILED]
        assert all(r.status is Status.PASS and r.layer == "transfer" and r.observed == "tp0=0" for r in res)


def test_seed_storm_value_fails_per_rank():
    m = parse_metrics(prom({0: 10.0, 1: 10.0}, {0: 0, 1: 0}))
    tf, bf = judge_transfer("prefill[0]", m)
    assert tf.status is Status.FAIL and bf.status is Status.PASS
    assert tf.observed == "tp0=10 tp1=10" and "tp0=10" in tf.detail and "restart --pair" in tf.detail
    assert tf.data["per_rank"] == {"tp0": 10.0, "tp1": 10.0}


def test_no_sglang_metrics_at_all_is_fail_with_enable_metrics_hint():
    # the seed's grep printed nothing and that read as fine: here it cannot
    res = judge_transfer("prefill[0]", parse_metrics("# TYPE process_cpu_seconds_total counter\n"))
    assert all(r.status is Status.FAIL and "--enable-metrics" in r.detail for r in res)
    assert judge_transfer("x", parse_metrics(""))[0].data["hint"] == "--enable-metrics"


def test_real_sglang_without_a_failure_has_no_series_and_passes():
    # a live real SGLang 0.5.23 PD pair that never failed a transfer: the failure families are absent (multiprocess
    # mode creates a labelled series at its first increment), its scheduler gauges are there
    for side in ("prefill", "decode"):
        text = (FIX / f"sglang-0.5.23-cpu-pd-{side}-metrics.prom").read_text()
        m = parse_metrics(text)
        assert not m.has(N.TRANSFER_FAILED) and N.metrics_on(m)
        res = judge_transfer(f"{side}[0]", m)
        assert all(r.status is Status.PASS and r.observed == "0 (no series yet)" for r in res)
        # at rest, before its first stats log, only the scheduler's idle counter witnesses the metrics
        idle = parse_metrics(
            '# TYPE sglang:scheduler_idle_seconds_total counter\nsglang:scheduler_idle_seconds_total{tp_rank="0"} 3.5\n'
        )
        assert all(r.status is Status.PASS for r in judge_transfer(f"{side}[0]", idle))
        # a baseline read then does not make the series' later birth pass: counted from 0
        tf, _ = judge_transfer(f"{side}[0]", parse_metrics(text + prom({0: 2}, {})), counters_of(m))
        assert tf.status is Status.FAIL and "tp0 +2" in tf.detail


def test_baseline_not_increased_passes_increase_fails_reset_counts():
    before = parse_metrics(prom({0: 10, 1: 10}, {0: 2, 1: 0}))
    base = counters_of(before)
    assert len(base) == 4 and all(isinstance(k, str) for k in base)
    tf, bf = judge_transfer("p", parse_metrics(prom({0: 10, 1: 10}, {0: 2, 1: 0})), base)
    assert tf.status is Status.PASS and bf.status is Status.PASS and tf.expected == "not increased since baseline"
    tf, bf = judge_transfer("p", parse_metrics(prom({0: 10, 1: 13}, {0: 2, 1: 0})), base)
    assert tf.status is Status.FAIL and "tp1 +3" in tf.detail and tf.data["increase"] == {"tp0": 0, "tp1": 3}
    # counter reset (process restarted): the new value is the increase
    tf, _ = judge_transfer("p", parse_metrics(prom({0: 1, 1: 0}, {0: 0, 1: 0})), base)
    assert tf.status is Status.FAIL and any("restarted" in n for n in tf.data["notes"])
    tf, _ = judge_transfer("p", parse_metrics(prom({0: 0, 1: 0}, {0: 0, 1: 0})), base)
    assert tf.status is Status.PASS
