"""Every metric family the engine exposes matches real SGLang 0.5.23's capture: name, type, labels."""
import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.metrics import Metrics

# Copies of ../shared/reference/captures kept in the repo, so the test never depends on where shared/ lives.
CAPTURES = Path(os.environ.get("PDCTL_CAPTURES", Path(__file__).parent / "fixtures"))


def families(text):
    out = {}
    for f in text_string_to_metric_families(text):
        labels = {frozenset(k for k in s.labels if k != "le") for s in f.samples if not s.name.endswith("_created")}
        out[f.name] = (f.type, labels)
    return out


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_families_match_capture(mode):
    path = CAPTURES / f"sglang-0.5.23-metrics-{mode}-idle.prom"
    cap = families(path.read_text())
    m = Metrics("tiny", mode)
    for c in ("num_requests_total", "prompt_tokens_total", "generation_tokens_total"):
        m.inc(c, 0, is_streaming="false")
    mine = families(m.render().decode())
    assert len(mine) >= 20
    for name, (typ, labels) in mine.items():
        if name.endswith("_created"):
            continue  # prometheus_client bookkeeping; absent upstream for families with no series yet
        assert name in cap, f"{name} not in SGLang's {mode} capture"
        ctyp, clabels = cap[name]
        assert typ == ctyp, (name, typ, ctyp)
        if clabels:  # families with no series at rest in the capture only pin name and type
            assert labels == clabels, (name, labels, clabels)
    text = m.render().decode()
    assert f'engine_type="{mode}"' in text


def test_seed_grep_matches_engine_prefill_metrics():
    import re
    text = Metrics("m", "prefill").render().decode()
    assert re.search(r'^sglang:num_transfer_failed_reqs_total\{.*tp_rank="0"', text, re.M)
