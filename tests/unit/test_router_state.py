"""The router's own verdicts on its workers, judged on smg 1.13's real answers (captures of smg in front of the
bundled engine after the degraded-bootstrap drill, and in front of the real SGLang)."""

from __future__ import annotations

import json
from pathlib import Path

from pdctl.checks.metrics import parse_metrics
from pdctl.checks.result import Status
from pdctl.checks.router import judge_router_env
from pdctl.checks.router_state import RETRIES_EXHAUSTED, judge_breakers, judge_retries_exhausted, judge_worker_states

FIX = Path(__file__).parent / "fixtures"
NAMES = {"http://127.0.0.1:51000": "prefill[0]", "http://127.0.0.1:51002": "decode[0]"}


def test_open_breakers_fail_naming_each_worker_while_readiness_would_say_ready():
    m = parse_metrics((FIX / "smg-1.13.0-metrics-after-degraded-bootstrap.prom").read_text())
    res = judge_breakers("router[0]", m, "smg_worker_cb_state", NAMES)
    assert {r.name: r.status for r in res} == {
        "breaker prefill[0] (http://127.0.0.1:51000)": Status.FAIL,
        "breaker decode[0] (http://127.0.0.1:51002)": Status.FAIL,
    }
    assert all(r.observed == "open" and r.next_step for r in res)
    (ex,) = judge_retries_exhausted("router[0]", m)
    assert ex.status is Status.WARN and ex.observed == "decode 2, prefill 2"


def test_closed_breakers_and_no_retries_exhausted_pass_in_front_of_the_real_sglang():
    m = parse_metrics(
        (FIX / "smg-1.13.0-metrics-in-front-of-real-sglang.prom").read_text(),
        ["smg_worker_cb_state", RETRIES_EXHAUSTED],
    )
    res = judge_breakers("router[0]", m, "smg_worker_cb_state", {}) + judge_retries_exhausted("router[0]", m)
    assert res and all(r.status is Status.PASS for r in res), res


def test_a_half_open_breaker_warns_and_no_series_is_one_pass():
    m = parse_metrics('# TYPE smg_worker_cb_state gauge\nsmg_worker_cb_state{worker="http://127.0.0.1:51002"} 2\n')
    (r,) = judge_breakers("router[0]", m, "smg_worker_cb_state", NAMES)
    assert r.status is Status.WARN and r.observed == "half-open" and "decode[0]" in r.name
    (none,) = judge_breakers("router[0]", parse_metrics(""), "smg_worker_cb_state", NAMES)
    assert none.status is Status.PASS and none.observed == "none tripped"


def test_each_listed_worker_passes_only_when_the_router_routes_to_it():
    body = json.loads((FIX / "smg-1.13.0-workers.json").read_text())
    res = judge_worker_states("router[0]", body, NAMES)
    assert [r.status for r in res] == [Status.PASS, Status.PASS] and {r.observed for r in res} == {"ready"}
    body["workers"][1].update(status="draining", is_healthy=False)
    bad = judge_worker_states("router[0]", body, NAMES)[1]
    assert bad.status is Status.FAIL and "draining" in bad.detail and bad.name.startswith("worker ")
    # sglang-router 0.3.2 lists no status: is_healthy decides
    old = {"workers": [{"url": "http://127.0.0.1:51000", "worker_type": "prefill", "is_healthy": False}]}
    (r,) = judge_worker_states("router[0]", old, NAMES)
    assert (
        r.status is Status.FAIL and r.observed == "unhealthy" and r.name == "worker prefill[0] (http://127.0.0.1:51000)"
    )
    assert judge_worker_states("router[0]", {"detail": "x"}, NAMES)[0].status is Status.FAIL


def test_a_router_environ_zeroed_by_its_title_is_not_verified_never_unset():
    (r,) = judge_router_env("router[0]", {}, {"RUST_LOG": "info"})
    assert r.status is Status.WARN and r.observed == "unreadable"
    (r,) = judge_router_env("router[0]", {"RUST_LOG": "debug"}, {"RUST_LOG": "info"})
    assert r.status is Status.FAIL
