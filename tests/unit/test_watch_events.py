"""The watch's typed core: Status.UNKNOWN, the timeline's typed events written as exactly the JSON lines of
docs/watch.md, the --timeline writer, the --json snapshot and the heal's typed audit evidence."""

from __future__ import annotations

import json
from types import SimpleNamespace

from pdctl.checks.heal import HealDecision
from pdctl.checks.inflight import Point
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.watch_events import HealEvent, RoundError
from pdctl.checks.watch_state import WatchState
from pdctl.serialize import to_data

DECODE = "decode[0]@local:30002"
PREFILL = "prefill[0]@local:30000"


def test_unknown_is_a_status_that_is_never_a_failure_and_reads_as_its_value():
    assert Status("unknown") is Status.UNKNOWN and Status.UNKNOWN == "unknown"
    assert f"{Status.UNKNOWN:<8}|{Status.FAIL}" == "unknown |fail" and str(Status.PASS) == "pass"
    assert json.dumps({"s": Status.UNKNOWN}) == '{"s": "unknown"}' and to_data(Status.UNKNOWN) == "unknown"
    assert not CheckResult("health", DECODE, "/health", Status.UNKNOWN).failed


def test_error_and_heal_lines_keep_their_contract_keys_in_order():
    error = RoundError(5.0, "d", "pairs", "round raised RuntimeError: boom")
    assert list(error.to_line().items()) == [
        ("t", 5.0),
        ("deployment", "d"),
        ("event", "error"),
        ("cadence", "pairs"),
        ("observed", "round raised RuntimeError: boom"),
    ]
    started = HealEvent(6.0, "d", "started", "pair-broken", "restart --pair", "1 pair(s) failed")
    assert list(started.to_line()) == ["t", "deployment", "event", "outcome", "case", "action", "observed"]
    refused = HealEvent(7.0, "d", "refused", "pinned", "restart --pair", "pinned 90s", "not acting: x")
    assert refused.to_line()["detail"] == "not acting: x" and refused.to_line()["event"] == "heal"


def test_the_timeline_writer_writes_one_json_line_per_event_masked(tmp_path):
    from pdctl.render.watch_timeline import TimelineWriter

    st = WatchState("d", started=0.0)
    events = st.apply_checks("health", [CheckResult("health", DECODE, "/health", Status.FAIL, "refused", "200")], 1)
    events += [st.round_done("health", 2.0, 0.1234)]
    path = tmp_path / "t.jsonl"
    writer = TimelineWriter(str(path))
    writer(events)
    writer.close()
    lines = path.read_text().splitlines()
    assert lines[0] == (
        '{"t": 1, "deployment": "d", "cadence": "health", "layer": "health", "target": "decode[0]@local:30002", '
        '"check": "/health", "status": "fail", "observed": "refused", "expected": "200"}'
    )
    assert json.loads(lines[1]) == {
        "t": 2.0,
        "deployment": "d",
        "event": "round",
        "cadence": "health",
        "ok": False,
        "seconds": 0.123,
    }


def test_the_snapshot_is_the_json_document_of_before():
    st = WatchState("d", started=0.0)
    st.apply_checks("health", [CheckResult("health", DECODE, "/health", Status.PASS, "200", "200")], 1)
    st.apply_checks("flags", [], 2, unknown={PREFILL: "ssh timed out"})
    st.apply_pairs([(PREFILL, DECODE, "fail", 0.5)], 3)
    st.apply_hazards({(PREFILL, DECODE): "degraded-bootstrap"}, 3)
    doc = to_data(st.snapshot(10.0))
    assert list(doc) == [
        "deployment",
        "verdict",
        "exit_code",
        "started",
        "checks",
        "targets_up",
        "unknown_targets",
        "round_errors",
        "unknown_why",
        "inflight",
        "pairs",
        "failures_since_start",
        "lineage_hazards",
        "rounds",
        "heals",
        "heal_budget_exhausted",
    ]
    assert doc["verdict"] == "unknown" and doc["exit_code"] == 3 and doc["unknown_why"] == {PREFILL: "ssh timed out"}
    assert doc["inflight"] == {"verdict": "unknown", "summary": "", "pinned": False, "pinned_seconds": 0.0}
    assert doc["pairs"] == [
        {"prefill": PREFILL, "decode": DECODE, "status": "fail", "latency_s": 0.5, "consecutive_failures": 1}
    ]
    assert doc["lineage_hazards"] == [{"prefill": PREFILL, "decode": DECODE, "hazard": "degraded-bootstrap"}]
    assert doc["checks"][0]["status"] == "pass" and doc["checks"][0]["check"] == "/health"


def test_the_heal_evidence_holds_failing_and_unknown_checks_and_the_last_sample():
    from pdctl.checks.heal import MetricsSeen
    from pdctl.errors import PdctlError
    from pdctl.ops.heal import evidence

    st = WatchState("d", started=0.0)
    st.apply_checks(
        "health",
        [
            CheckResult("health", DECODE, "/health", Status.FAIL, "refused", "200"),
            CheckResult("health", PREFILL, "/health", Status.PASS, "200", "200"),
        ],
        1,
    )
    st.apply_checks("flags", [CheckResult("flags", PREFILL, "--port", Status.PASS, "1", "1")], 1)
    st.apply_checks("flags", [], 2, unknown={PREFILL: "ssh timed out"})
    point = Point(1, {}, 1.0, {PREFILL: {"g": 1.0}}, {DECODE: {"transfer_failed": 2.0}}, {})
    st.apply_point(point, 2)

    class Services:
        def __init__(self, host):
            self.host = host

        def log_tail(self, name, lines):
            if self.host == "b":
                raise PdctlError("ssh b: timed out")
            return f"last {lines} lines of {name}"

    instances = [("prefill", 0, SimpleNamespace(host="a")), ("decode", 0, SimpleNamespace(host="b"))]
    labels = {("prefill", 0): PREFILL, ("decode", 0): DECODE}
    inv = SimpleNamespace(
        instances=lambda: instances, label=lambda r, k: labels[(r, k)], service_name=lambda r, k: f"sglang-{r}-{k}"
    )
    dep = SimpleNamespace(inv=inv, services=Services)
    d = HealDecision("pair-broken", "restart --pair", "why", evidence=["prefill[0] -> decode[0]: 3 in a row"])
    metrics = MetricsSeen(dict(point.per_worker), dict(point.counters))
    doc = to_data(evidence(dep, d, st.snapshot(3.0), metrics))
    assert list(doc) == [
        "case",
        "details",
        "failing_checks",
        "inflight",
        "pairs",
        "failures_since_start",
        "metrics",
        "log_tails",
    ]
    assert {(c["target"], c["check"], c["status"]) for c in doc["failing_checks"]} == {
        (DECODE, "/health", "fail"),
        (PREFILL, "/health", "unknown"),
        (PREFILL, "--port", "unknown"),
    }
    assert doc["metrics"] == {
        "per_worker_gauges": {PREFILL: {"g": 1.0}},
        "counters": {DECODE: {"transfer_failed": 2.0}},
    }
    assert doc["log_tails"] == {PREFILL: "last 30 lines of sglang-prefill-0", DECODE: "unreadable: ssh b: timed out"}
    assert doc["case"] == "pair-broken" and doc["details"] == ["prefill[0] -> decode[0]: 3 in a row"]


def test_a_change_under_way_is_said_when_it_starts_and_ends_and_exported():
    from pdctl.checks.watch_events import ChangeUnderWay

    st = WatchState("d", started=0.0)
    assert st.apply_change("", 1) == []  # nothing held: nothing to say
    started = st.apply_change("alice (restart --pair, pid 7 on h1, for 0s)", 2)
    assert started == [ChangeUnderWay(2, "d", "started", "alice (restart --pair, pid 7 on h1, for 0s)")]
    assert st.apply_change("alice (restart --pair, pid 7 on h1, for 5s)", 3) == []  # the same change goes on
    ended = st.apply_change("", 4)
    assert [e.to_line() for e in ended] == [
        {
            "t": 4,
            "deployment": "d",
            "event": "change",
            "status": "ended",
            "observed": "alice (restart --pair, pid 7 on h1, for 5s)",
        }
    ]
