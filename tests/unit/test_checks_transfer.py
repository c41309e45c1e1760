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


def test_missing_family_is_fail_with_enable_metrics_hint():
    # the seed's grep printed nothing and that read as fine: here it cannot
    res = judge_transfer("prefill[0]", parse_metrics("# TYPE sglang:num_running_reqs gauge\n"))
    assert all(r.status is Status.FAIL and "--enable-metrics" in r.detail for r in res)
    assert judge_transfer("x", parse_metrics(""))[0].data["hint"] == "--enable-metrics"


def test_declared_without_series_is_not_a_pass():
    r = judge_transfer("x", parse_metrics(f"# TYPE {N.TRANSFER_FAILED} counter\n# TYPE {N.BOOTSTRAP_FAILED} counter\n"))
    assert all(x.status is Status.FAIL and x.observed == "no series" for x in r)


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
