"""The engine's metric families against real SGLang 0.5.23: the captures of a live PD pair on a CPU
(sglang-0.5.23-cpu-pd-*-metrics.prom, after requests) are the fidelity target; the older collector captures
(sglang-0.5.23-metrics-*-idle.prom) still give the name, type and labels of the families no live run fed, but they are
wrong about what exists at rest: SGLang serves its metrics in prometheus_client's multiprocess mode, where a series
exists only once fed and a family without series is not rendered at all."""

import os
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.metric_families import STAGES
from engine.metrics import Metrics

# Copies of ../shared/reference kept in the repo, so the test never depends on where shared/ lives.
CAPTURES = Path(os.environ.get("PDCTL_CAPTURES", Path(__file__).parent / "fixtures"))
# What a live SGLang shows before any request: the series its collector creates at start-up.
AT_REST = {"sglang:scheduler_idle_seconds", "sglang:scheduler_process_cpu_seconds"}
# Families the engine feeds that the live capture does not show, and why: that run had no failure, no abort, only
# non-streaming requests answered in one output batch (no inter-token latency, and on the decode no TPOT: its
# decode period is zero), no device timer; and a prefill never observes TTFT or TPOT at all.
NOT_IN_LIVE_RUN = {
    "sglang:num_transfer_failed_reqs",
    "sglang:num_bootstrap_failed_reqs",
    "sglang:num_aborted_requests",
    "sglang:forward_execution_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:request_time_per_output_token_seconds",
    "sglang:time_to_first_token_seconds",
}


def families(text):
    out = {}
    for f in text_string_to_metric_families(text):
        labels = {frozenset(k for k in s.labels if k != "le") for s in f.samples}
        buckets = tuple(sorted({float(s.labels["le"]) for s in f.samples if "le" in s.labels}))
        out[f.name] = (f.type, labels, buckets)
    return out


def capture(kind, mode):
    return families(
        (CAPTURES / f"sglang-0.5.23-{kind}-{mode}{'-metrics' if kind == 'cpu-pd' else '-idle'}.prom").read_text()
    )


def fed(mode: str) -> Metrics:
    """A Metrics with every declared family fed once, with label values SGLang uses."""
    m = Metrics("tiny", mode)
    extra = {"stage": STAGES[mode][0], "category": "decode", "phase": "load_weight", "is_streaming": "false"}
    for name, f in m.fams.items():
        labels = {
            k: ("input" if name.startswith("prefill_effective") else "decode") if k == "mode" else extra[k]
            for k in f.extra
        }
        {"gauge": m.set, "counter": m.inc, "histogram": m.observe}[f.kind](name, 1, **labels)
    return m


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_at_rest_only_the_series_sglang_creates_at_start(mode):
    text = Metrics("tiny", mode).render().decode()
    mine = set(families(text)) - {"sglang:prefill_effective_tokens"}  # seeded at 0, as SGLang's (prefill only here)
    assert mine == AT_REST
    assert "_created" not in text
    for name in ("num_transfer_failed_reqs_total", "num_bootstrap_failed_reqs_total", "num_aborted_requests_total"):
        assert name not in text  # no series, and no HELP/TYPE lines either


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_fed_families_match_the_live_capture(mode):
    live, idle = capture("cpu-pd", mode), capture("metrics", mode)
    mine = families(fed(mode).render().decode())
    assert len(mine) >= 30
    for name, (typ, labels, buckets) in mine.items():
        ref = live.get(name)
        if ref is None:
            assert name in NOT_IN_LIVE_RUN, f"{name}: the engine's {mode} shows it, SGLang's live {mode} did not"
            ref = idle[name]
        assert typ == ref[0], (name, typ, ref[0])
        if ref[1]:
            assert labels == ref[1], (name, labels, ref[1])
        if typ == "histogram" and ref[2]:
            assert buckets == ref[2], name
    assert "_created" not in fed(mode).render().decode()


def test_seed_grep_matches_only_after_a_failure():
    """The seed's grep found num_transfer_failed_reqs_total because its deployment had failed transfers: a server
    that never failed one has no such series, as SGLang's."""
    m = Metrics("m", "prefill")
    pattern = re.compile(r'^sglang:num_transfer_failed_reqs_total\{.*tp_rank="0".*\} 1\.0$', re.M)
    assert "num_transfer_failed" not in m.render().decode()
    m.inc("num_transfer_failed_reqs")
    assert pattern.search(m.render().decode())


def test_value_of_a_gauge_without_series_is_the_default_and_creates_none():
    m = Metrics("m", "decode")
    assert m.value("token_usage", -1.0) == -1.0
    assert "token_usage" not in m.render().decode()
    m.set("token_usage", 0.25)
    assert m.value("token_usage") == 0.25


def test_a_feed_of_the_wrong_kind_is_refused_by_name():
    m = Metrics("m", "decode")
    with pytest.raises(TypeError, match="sglang:token_usage is a gauge, not a counter"):
        m.counter("token_usage")
    with pytest.raises(TypeError, match="not a gauge"):
        m.set("num_transfer_failed_reqs_total", 1.0)
    with pytest.raises(TypeError, match="is a histogram, not a counter"):
        m.inc("time_to_first_token_seconds", is_streaming="false")
    assert "time_to_first_token" not in m.render().decode()  # a refused feed creates no series
