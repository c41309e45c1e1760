"""parse_metrics on the real SGLang 0.5.23 expositions (copied from ../shared/reference/captures) and on edge cases."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from pdctl.checks import metric_names as N
from pdctl.checks.metrics import AmbiguousSelection, MetricsParseError, parse_metrics

FIX = Path(__file__).parent / "fixtures"
PREFILL = (FIX / "sglang-0.5.23-metrics-prefill-idle.prom").read_text()
DECODE = (FIX / "sglang-0.5.23-metrics-decode-idle.prom").read_text()


@pytest.mark.parametrize("text,engine", [(PREFILL, "prefill"), (DECODE, "decode")])
def test_captures_parse_every_sample_line(text, engine):
    m = parse_metrics(text)
    sample_lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert len(m) == len(sample_lines) == 580
    assert {s.labels["engine_type"] for s in m} == {engine}
    fams = m.families()
    typed = {n for n in fams if fams[n].type != "untyped"}
    assert typed == set(fams)  # every family of the capture has a TYPE
    for name in N.PD_QUEUE_GAUGES + (N.NUM_RUNNING_REQS,):
        assert fams[name].type == "gauge"
        assert m.select(name, tp_rank="0") == 0.0
    for name in N.FAILURE_COUNTERS + (N.GENERATION_TOKENS, N.NUM_ABORTED_REQUESTS):
        assert fams[name].type == "counter", name
    assert fams[N.TRANSFER_FAILED].label_names == ("engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank")


def test_seed_grep_equivalent_on_prefill_capture():
    """The seed's `grep '^sglang:num_transfer_failed_reqs_total{.*tp_rank="0"' | grep -oE '[0-9.]+$'`."""
    seed = [ln for ln in PREFILL.splitlines() if re.match(r'^sglang:num_transfer_failed_reqs_total\{.*tp_rank="0"', ln)]
    assert len(seed) == 1
    seed_value = float(re.search(r"[0-9.]+$", seed[0]).group(0))
    m = parse_metrics(PREFILL)
    assert m.select(N.TRANSFER_FAILED, tp_rank="0") == seed_value == 0.0
    assert m.select(N.TRANSFER_FAILED, tp_rank=0) == 0.0  # label values compared as text
    assert m.select(N.TRANSFER_FAILED, tp_rank="1") is None


def test_histogram_family_groups_bucket_sum_count_and_created_is_own_family():
    m = parse_metrics(PREFILL)
    fams = m.families()
    h = fams[N.KV_TRANSFER_LATENCY_MS]
    assert h.type == "histogram" and "le" in h.label_names and h.sample_count == 15
    inf = m.samples(N.KV_TRANSFER_LATENCY_MS + "_bucket", le="+Inf")
    assert len(inf) == 1 and inf[0].value == 0.0
    assert m.value(N.KV_TRANSFER_LATENCY_MS + "_count") == 0.0
    created = fams[N.KV_TRANSFER_LATENCY_MS + "_created"]
    assert created.type == "gauge"
    assert m.select(N.KV_TRANSFER_LATENCY_MS + "_created") == pytest.approx(1.7959551369724612e09)
    assert m.family(N.KV_TRANSFER_LATENCY_MS + "_bucket").name == N.KV_TRANSFER_LATENCY_MS


def test_declared_family_without_series_is_distinguished_from_absent():
    m = parse_metrics(PREFILL)
    # tokenizer counters are declared at rest but have no series until the first request
    assert m.has(N.GENERATION_TOKENS) and m.families()[N.GENERATION_TOKENS].sample_count == 0
    assert m.value(N.GENERATION_TOKENS) is None
    assert not m.has("sglang:num_prefill_prealloc_queue_reqs")  # does not exist upstream


def test_tokenizer_metrics_have_no_tp_rank():
    m = parse_metrics(PREFILL)
    assert m.value(N.NUM_ABORTED_REQUESTS) == 0.0
    assert m.select(N.NUM_ABORTED_REQUESTS, tp_rank="0") is None


EDGE = r"""# HELP demo_total A counter with a \\ backslash and a \n newline in its help.
# TYPE demo_total counter
demo_total{path="/a\"b",note="line1\nline2",win="C:\\x",} 3 1700000000000
demo_total{path="/c"} 4.5e+00
# TYPE lat histogram
lat_bucket{le="0.1"} 1
lat_bucket{le="+Inf"} 2
lat_sum 0.3
lat_count 2
lat_created 1.7e9
# TYPE weird gauge
weird{k="v"} NaN
weird{k="w"} -Inf
weird{k="x"} +Inf
no_type_metric 7
  spaced { a = "1" , b="2" }   8
# TYPE om counter
om_total 5 # {trace_id="abc"} 1.0 1700000000.1
# EOF
"""


def test_edge_cases_escapes_specials_timestamps():
    m = parse_metrics(EDGE)
    fams = m.families()
    assert fams["demo_total"].help == "A counter with a \\ backslash and a \n newline in its help."
    s = m.samples("demo_total", path='/a"b')
    assert len(s) == 1
    assert s[0].labels == {"path": '/a"b', "note": "line1\nline2", "win": "C:\\x"}
    assert s[0].timestamp_ms == 1700000000000
    assert m.value("demo_total") == 7.5
    with pytest.raises(AmbiguousSelection):
        m.select("demo_total")
    assert fams["lat"].type == "histogram" and fams["lat"].sample_count == 5  # bucket, sum, count, created
    assert m.select("lat_bucket", le="+Inf") == 2
    assert math.isnan(m.select("weird", k="v"))
    assert m.select("weird", k="w") == -math.inf and m.select("weird", k="x") == math.inf
    assert fams["no_type_metric"].type == "untyped" and m.value("no_type_metric") == 7
    assert m.samples("spaced")[0].labels == {"a": "1", "b": "2"} and m.value("spaced") == 8
    assert m.value("om_total") == 5 and fams["om"].type == "counter"  # an exemplar does not stop the line


@pytest.mark.parametrize(
    "bad",
    [
        'x{a="1"',  # unterminated
        "x{a=1} 2",  # unquoted
        'x{a="1"} notanumber',
        '{a="1"} 2',
        'x{a="1" b="2"} 3',
        "x",  # no value
        "x 1_000",  # Python's float() would take it; the exposition format does not
        "# TYPE y nosuchtype",  # the library only notices when it closes the family, after reading further
        "# TYPE y",
    ],
)
def test_malformed_lines_raise_naming_the_line(bad):
    with pytest.raises(MetricsParseError, match="line 2") as ei:
        parse_metrics("# TYPE x gauge\n" + bad + "\nx 1\n")
    assert repr(bad) in str(ei.value)


def test_parse_error_in_a_real_capture_names_its_line_number_and_text():
    lines = PREFILL.split("\n")
    assert lines[204].startswith(N.TRANSFER_FAILED + "{")
    bad = lines[204].replace('tp_rank="0"', "tp_rank=0")
    lines[204] = bad
    with pytest.raises(MetricsParseError) as ei:
        parse_metrics("\n".join(lines))
    msg = str(ei.value)
    assert msg.startswith("line 205: ") and repr(bad) in msg
    assert isinstance(ei.value, ValueError) and ei.value.exit_code == 1


def test_extra_fields_read_as_the_library_reads_them():
    """prometheus_client is laxer than the format: `x 1 2 3` is value 1 at the last field as timestamp (ms).
    The old hand-written parser refused it; pinned so that a library upgrade changing it is noticed."""
    s = parse_metrics("x 1 2 3\n").samples("x")
    assert [(v.value, v.timestamp_ms) for v in s] == [(1.0, 3)]


def test_histogram_and_counter_samples_keep_their_family_on_the_capture():
    m = parse_metrics(PREFILL)
    for suffix in ("_bucket", "_sum", "_count"):
        fam = m.family(N.KV_TRANSFER_LATENCY_MS + suffix)
        assert fam is not None and fam.name == N.KV_TRANSFER_LATENCY_MS and fam.type == "histogram", suffix
    fam = m.family(N.TRANSFER_FAILED)  # declared `..._total`: the library would call the family `..._reqs`
    assert fam.name == N.TRANSFER_FAILED and fam.type == "counter"
    assert {s.name for s in fam.samples} == {N.TRANSFER_FAILED}
    assert not m.has(N.TRANSFER_FAILED[: -len("_total")])
    created = m.family(N.TRANSFER_FAILED[: -len("_total")] + "_created")
    assert created.type == "gauge" and len(created.samples) == 1 and created.samples[0].value > 1.7e9


COUNTERS = """# HELP plain Declared without _total (other exporters do that).
# TYPE plain counter
plain{a="1"} 3
plain_total 4
plain_created 1.5
# TYPE demo_total counter
demo_total 2
demo_total_created 1.7e9
other 9
plain 5
"""


def test_counter_samples_keep_their_names_and_family_as_written():
    m = parse_metrics(COUNTERS)
    fams = m.families()
    assert list(fams) == ["plain", "demo_total", "other"]
    assert fams["plain"].type == "counter"
    assert fams["plain"].help == "Declared without _total (other exporters do that)."
    # the library renames `plain` samples to `plain_total`; they keep the name they have in the text
    assert [s.name for s in m.family("plain").samples] == ["plain", "plain_total", "plain_created", "plain"]
    assert m.value("plain") == 8 and m.value("plain_total") == 4
    assert [s.name for s in m.family("demo_total").samples] == ["demo_total", "demo_total_created"]
    assert m.family("demo_total_created").name == "demo_total"
    assert fams["other"].type == "untyped" and m.value("other") == 9


def test_empty_text_is_an_empty_set():
    m = parse_metrics("")
    assert len(m) == 0 and m.families() == {} and not m.has(N.TRANSFER_FAILED)


@pytest.mark.parametrize("text", [PREFILL, DECODE], ids=["prefill", "decode"])
def test_parsing_only_some_families_gives_the_same_samples_and_types(text):
    full = parse_metrics(text)
    wanted = (N.TRANSFER_FAILED, N.BOOTSTRAP_FAILED, N.NUM_RUNNING_REQS)
    part = parse_metrics(text, families=wanted)
    assert {n for n in wanted if full.has(n)} <= set(part.families())
    assert all(n in wanted or n.endswith("_created") for n in part.families())  # a counter's _created comes along
    for name in set(wanted) | set(part.families()):
        assert part.samples(name) == full.samples(name)
        if full.has(name):
            assert part.families()[name].type == full.families()[name].type
    assert len(part) < len(full) / 10  # the rest was never handed to the parser


def test_only_families_keeps_suffixed_series_of_a_histogram_and_a_counters_created():
    text = (
        '# HELP h a histogram\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\n'
        "h_count 2\n# HELP c_total a counter\n# TYPE c_total counter\nc_total 5\nc_created 1.7e9\n"
        '# HELP other x\n# TYPE other gauge\nother 1\nhh_bucket{le="1"} 9\n'
    )
    m = parse_metrics(text, families=("h", "c_total"))
    assert set(m.families()) == {"h", "c_total", "c_created"}
    assert m.value("h_count") == 2 and m.value("c_total") == 5 and not m.has("other")
