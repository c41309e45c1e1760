"""The shipped alert rules in a real Prometheus (tests/fixtures/prometheus.py) scraping real bundled engines: every
rule evaluates without error on SGLang's real label sets, and a transfer failure caused for real (the
degraded-bootstrap drill + a decode-only restart, as in test_drill_restart.py) raises SGLangTransferFailuresRising
for the armed prefill only; the plain prefill, on the same restarted decode, raises nothing."""

from __future__ import annotations

import pytest

from tests.engine.stack import counter, wait_for
from tests.engine.test_drill_restart import FAILED, Workers
from tests.fixtures.prometheus import Prometheus, prometheus_binary

pytestmark = pytest.mark.engine


def hostport(url: str) -> str:
    return url.removeprefix("http://")


def test_rules_evaluate_on_real_engines_and_a_real_transfer_failure_fires_only_where_it_happened():
    prometheus_binary()  # skip (a failure under PDCTL_REQUIRE_ALL) before starting
    w = Workers()
    try:
        for name in ("armed", "plain", "decode"):
            w.start_worker(name)
        for name in ("armed", "plain", "decode"):
            w.wait_healthy(w.url(name))
        armed, plain, decode = (hostport(w.url(n)) for n in ("armed", "plain", "decode"))
        with Prometheus({"sglang": [armed, plain, decode]}) as prom:
            prom.wait(
                lambda: set(prom.targets_up().values()) == {"up"} and len(prom.targets_up()) == 3,
                30,
                "all three engines scraped",
            )
            # as SGLang's multiprocess metrics: a worker that never failed a transfer has no failure series at all
            prom.wait(
                lambda: prom.query("up") and all(float(r["value"][1]) == 1 for r in prom.query("up")),
                15,
                "every engine scraped",
            )
            assert prom.query(FAILED) == []
            for name in ("armed", "plain"):
                assert w.pair(name, "decode")[:2] == (200, 200)
            rules = prom.wait_evaluated()
            bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
            assert not bad, bad
            assert {r["name"] for r in rules if r["group"] == "sglang-pd"} == {
                "SGLangPrefillInflightStalled",
                "SGLangTransferFailuresRising",
                "SGLangBootstrapFailuresRising",
            }
            assert prom.alerts("SGLangTransferFailuresRising") == []

            # the decode comes back as a new process under the same address: the armed prefill's pair breaks
            w.restart("decode")
            assert w.pair("armed", "decode")[1] == 500
            wait_for(lambda: counter(w.url("armed"), FAILED) >= 1, 10, "the armed prefill to count transfer_failed")
            assert w.pair("plain", "decode")[:2] == (200, 200)

            # The counter's series is born at 1 (as SGLang's), so the rule must count a series that first appears
            # within its window; pdctl/alerts/pdctl.rules.yml's increase() alone sees no increase there.
            alert = prom.wait_alert("SGLangTransferFailuresRising", states=("firing",), timeout=90, instance=armed)
            assert alert["labels"]["engine_type"] == "prefill" and alert["labels"]["severity"] == "warning"
            assert alert["annotations"]["summary"] == f"{armed} (prefill): KV transfer failures rising"
            assert "`pdctl restart --pair`" in alert["annotations"]["description"]
            # its twin: the plain prefill paired with the same restarted decode and failed nothing
            assert not [a for a in prom.alerts("SGLangTransferFailuresRising") if a["labels"]["instance"] == plain]
            assert prom.value(f'sglang:num_transfer_failed_reqs_total{{instance="{plain}"}}') is None  # none failed
            assert all(r["health"] == "ok" for r in prom.rule_list())
            # a failed room leaves the inflight queue: no stall, pending or firing
            assert prom.value("max(sglang:num_prefill_inflight_queue_reqs)") == 0
            assert prom.alerts("SGLangPrefillInflightStalled") == []
        assert prom.proc.poll() is not None  # killed by pid on exit
    except Exception:
        print(w.logs())
        raise
    finally:
        w.stop()
