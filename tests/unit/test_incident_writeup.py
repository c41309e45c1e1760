"""The incident write-up composed from given records (no deployment): the timeline's entries and window, the cause
judged from the records, every section in the markdown and the HTML, secrets masked everywhere, the charts drawn by
matplotlib from the given samples (inline SVG, text as paths), nothing the HTML would fetch."""

from __future__ import annotations

import re
import pytest

from pdctl.checks.incident_cause import CAUSE, DEGRADED, RACE, RULED_OUT, judge_causes
from pdctl.checks.incident_signals import signals
from pdctl.checks.incident_timeline import (
    Window,
    alert_entries,
    alert_spans,
    audit_entries,
    default_window,
    merged,
    parse_timeline,
    timeline_entries,
)
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.triage import Observation
from pdctl.checks.triage_finding import Finding
from pdctl.inventory import load_inventory
from pdctl.ops.incident import IncidentReport, Versions, check_prometheus_url
from pdctl.ops.render_plan import render_plan
from pdctl.ops.triage import TriageReport
from pdctl.ops.verify import HealthReport
from pdctl.render.incident_charts import incident_charts
from pdctl.render.incident_document import SECTIONS, compose
from pdctl.render.incident_html import html
from pdctl.render.incident_markdown import markdown

T0 = 1_700_000_000.0
P, D = "prefill[0]@local:30000", "decode[0]@local:30002"
SECRET = "hf_verysecret9876"


def _check(t, layer, target, check, status, observed="", expected=""):
    return {
        "t": t,
        "deployment": "local",
        "cadence": layer,
        "layer": layer,
        "target": target,
        "check": check,
        "status": status,
        "observed": observed,
        "expected": expected,
    }


def _sample(t, target, queued=0, failed=0):
    return {
        "t": t,
        "deployment": "local",
        "event": "sample",
        "target": target,
        "queued": queued,
        "running": 0,
        "transfer_failed": failed,
        "bootstrap_failed": 0,
    }


def _round(t, ok):
    return {"t": t, "deployment": "local", "event": "round", "cadence": "pairs", "ok": ok, "seconds": 0.1}


def _pair(t, status, latency):
    return {"t": t, "deployment": "local", "event": "pair", "prefill": P, "decode": D, "status": status,
            "latency_s": latency}  # fmt: skip


LINES = [
    _check(T0, "health", P, "/health", "pass"),
    _check(T0, "pairs", f"{P} -> {D}", "canary", "pass"),
    _sample(T0, P),
    _sample(T0, D),
    _pair(T0 + 1, "pass", 0.02),
    _round(T0 + 1, True),
    {"t": T0 + 20, "deployment": "local", "event": "restart", "target": D, "observed": "pid 1 -> 2"},
    {
        "t": T0 + 22,
        "deployment": "local",
        "event": "lineage",
        "prefill": P,
        "decode": D,
        "hazard": "degraded-bootstrap",
        "status": "hazard",
    },  # fmt: skip
    _sample(T0 + 25, P, queued=2, failed=3),
    _pair(T0 + 26, "fail", None),
    _check(T0 + 26, "pairs", f"{P} -> {D}", "canary", "fail", "KV transfer failed", "pass"),
    _round(T0 + 26, False),
    {
        "t": T0 + 35,
        "deployment": "local",
        "event": "heal",
        "outcome": "started",
        "case": "degraded-bootstrap",
        "action": "restart --pair",
        "observed": "3 canaries failed",
    },  # fmt: skip
    {
        "t": T0 + 50,
        "deployment": "local",
        "event": "heal",
        "outcome": "done",
        "case": "degraded-bootstrap",
        "action": "restart --pair",
        "observed": "final-health passed",
    },  # fmt: skip
    _sample(T0 + 52, P, queued=0, failed=0),
    _pair(T0 + 55, "pass", 0.03),
    _check(T0 + 55, "pairs", f"{P} -> {D}", "canary", "pass"),
    _round(T0 + 55, True),
]
RESTART = {
    "time": "x",
    "operator": "alice",
    "action": "restart --role decode",
    "args": {"roles": ["decode"], "override_hazard": True, "verify": False},
    "result": "ok",
    "exit_code": 0,
}


def test_parse_timeline_skips_what_is_no_line():
    text = "\n".join(['{"t": 2, "event": "round"}', "not json", '{"t": 1}', "[1]", ""])
    lines, bad = parse_timeline(text)
    assert [x["t"] for x in lines] == [1, 2] and bad == 2


def test_default_window_starts_before_the_first_failing_event():
    w = default_window(LINES, [(T0 + 19, RESTART)], now=T0 + 100)
    assert w.since == T0 + 19 - 60 and w.until == T0 + 100  # the override is the first failing event
    quiet = default_window(LINES[:4], [], now=T0 + 100)
    assert quiet.since == T0 + 100 - 3600 and "last hour" in quiet.why


def test_entries_tell_what_happened_in_order():
    w = Window(T0 - 10, T0 + 100, "test")
    entries = merged(timeline_entries(LINES, w), audit_entries([(T0 + 19, RESTART)], w))
    said = [(e.kind, e.what) for e in entries]
    assert said[0] == ("action", "pdctl restart --role decode --override-hazard --no-verify")
    assert entries[0].who == "alice" and entries[0].detail == "ok, exit 0"
    assert ("verdict", "watch verdict pass -> fail") in said and ("verdict", "watch verdict fail -> pass") in said
    assert ("heal", "heal done: restart --pair (degraded-bootstrap)") in said
    assert ("lineage", "lineage hazard: degraded-bootstrap") in said
    assert not any(k == "check" and "new -> pass" in w for k, w in said)  # first seen passing is no news
    assert [e.t for e in entries] == sorted(e.t for e in entries)


def test_alerts_become_pages_that_fire_and_resolve():
    result = [
        {
            "metric": {"alertname": "PdctlPairBroken", "severity": "critical", "prefill": P, "alertstate": "firing"},
            "values": [[T0 + 30, "1"], [T0 + 31, "1"], [T0 + 32, "1"]],
        },  # fmt: skip
        {
            "metric": {"alertname": "PdctlKvFailuresRising", "severity": "warning"},
            "values": [[T0 + 30, "1"], [T0 + 99, "1"]],
        },  # fmt: skip
    ]
    spans = alert_spans(result, 1.0, until=T0 + 100)
    assert [(s.name, s.start, s.end) for s in spans] == [
        ("PdctlPairBroken", T0 + 30, T0 + 32),
        ("PdctlKvFailuresRising", T0 + 30, T0 + 30),
        ("PdctlKvFailuresRising", T0 + 99, None),  # still firing at the window's end
    ]
    entries = alert_entries(spans, Window(T0, T0 + 100, "test"))
    assert ("page firing: PdctlPairBroken", f"prefill={P}") in [(e.what, e.who) for e in entries]
    assert "page resolved: PdctlPairBroken" in [e.what for e in entries]


def test_the_cause_is_judged_from_the_records():
    sig = signals(LINES, T0 - 10, T0 + 100)
    causes = judge_causes(LINES, [RESTART], sig)
    by = {h.name: h for h in causes}
    assert by[DEGRADED].verdict == CAUSE and causes[0].name == DEGRADED
    assert any("alice with the hazard guard overridden" in e for e in by[DEGRADED].evidence)
    assert by[RACE].verdict == RULED_OUT
    assert any("a pinned room never fails" in e for e in by[RACE].evidence)
    assert judge_causes([], [RESTART], sig) == []  # no timeline: nothing judged


def test_a_hazard_said_again_by_a_second_watch_is_one_piece_of_evidence():
    again = [x for x in LINES if x.get("event") == "lineage"]
    lines = sorted(LINES + [{**x, "t": x["t"] + 5} for x in again], key=lambda x: x["t"])
    degraded = judge_causes(lines, [RESTART], signals(lines, T0 - 10, T0 + 100))[0]
    assert degraded.name == DEGRADED
    assert [e for e in degraded.evidence if e.startswith("lineage hazard")] == [
        f"lineage hazard degraded-bootstrap on {P} -> {D}"
    ]


def test_signals_open_at_the_window_start_with_the_value_before_it():
    sig = signals(LINES, T0 + 30, T0 + 100)
    assert sig.transfer_failed[P][0] == (T0 + 30, 3.0)  # the sample of T0+25 holds at the start
    assert [c.status for c in sig.canaries[f"{P} -> {D}"]] == ["pass"]


def _inventory():
    inv = load_inventory(None)
    inv.roles.prefill[0].env["HF_TOKEN"] = SECRET  # a declared secret, as an inventory gives one
    return inv


def _report() -> IncidentReport:
    inv = _inventory()
    w = Window(T0 - 10, T0 + 100, "test")
    records = [(T0 + 19, RESTART)]
    sig = signals(LINES, w.since, w.until)
    sig.marks = [(T0 + 50, "heal done")]
    health = HealthReport("local", {"health": [CheckResult("health", P, "/health", Status.PASS, "200", "200")]})
    tri = TriageReport(
        "local",
        [Observation("health", P, Status.PASS, f"/health: 200 token={SECRET}")],
        [Finding("a finding", "warn", ["seen"], ["thought"], "do it")],
    )
    return IncidentReport(
        deployment="local",
        inventory=inv.source,
        operator="bob",
        written_at=T0 + 100,
        window=w,
        timeline="/tmp/tl.jsonl",
        entries=merged(timeline_entries(LINES, w), audit_entries(records, w)),
        signals=sig,
        causes=judge_causes(LINES, [RESTART], sig),
        triage=tri,
        health=health,
        plan=render_plan(inv),
        versions=Versions("9.9", {P: "bundled 0.5.23"}, {"router[0]": "smg 1.13.0"}),
        notes=["a gap"],
    )


@pytest.fixture(scope="module")
def drawn():
    rep = _report()
    charts = incident_charts(rep.signals, rep.window.since, rep.window.until)
    from pdctl.secrets import inventory_secrets

    doc = compose(rep, charts, inventory_secrets(_inventory()))
    return rep, charts, doc


def test_charts_are_drawn_from_the_given_samples(drawn):
    _rep, charts, _doc = drawn
    assert [c.name for c in charts] == ["queues", "failures", "canaries"]
    for c in charts:
        assert c.svg.startswith("<svg") and "<text" not in c.svg  # text as paths: no font to load
        assert len(re.findall(r"<path ", c.svg)) > 20
        assert "http://" not in c.svg.replace("http://www.w3.org/", "")  # namespaces only


def test_no_charts_without_samples_and_the_gap_is_said():
    rep = _report()
    empty = signals([], rep.window.since, rep.window.until)
    assert incident_charts(empty, rep.window.since, rep.window.until) == []
    assert any("no queue or KV failure samples" in g for g in empty.gaps())


def test_markdown_and_html_have_every_section_and_mask_secrets(drawn):
    rep, charts, doc = drawn
    md = markdown(doc, {c.name: f"x-{c.name}.svg" for c in charts})
    page = html(doc)
    for s in SECTIONS:
        assert f"\n## {s}\n" in md and f"<h2>{s}</h2>" in page
    assert "![Inflight queues](x-queues.svg)" in md
    assert page.count("<svg") == 3 and "<script" not in page and "<link" not in page and "@import" not in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "white-space: pre-wrap" in page
    for text in (md, page):
        assert SECRET not in text and "HF_TOKEN=***" in text
        assert "alice" in text and "bob" in text and "9.9" in text and "smg 1.13.0" in text
        assert "degraded bootstrap" in text and "update_status race" in text


def test_prometheus_url_is_checked():
    assert check_prometheus_url("http://127.0.0.1:9090/") == "http://127.0.0.1:9090"
    from pdctl.errors import UsageError

    with pytest.raises(UsageError, match="--prometheus"):
        check_prometheus_url("127.0.0.1:9090")


def test_a_pin_is_a_cause_only_when_it_lasts_and_a_change_s_own_failures_are_none():
    sig = signals([], T0, T0 + 500)
    brief = [
        _check(T0, "inflight", "prefill+decode", "inflight", "fail", "pinned"),
        _check(T0 + 3, "inflight", "prefill+decode", "inflight", "warn", "busy"),
    ]
    by = {h.name: h for h in judge_causes(brief, [], sig)}
    assert by[RACE].verdict == RULED_OUT and "only briefly" in by[RACE].evidence[0]
    held = [brief[0], _check(T0 + 300, "inflight", "prefill+decode", "inflight", "pass", "drained")]
    assert {h.name: h for h in judge_causes(held, [], sig)}[RACE].verdict == CAUSE
    change = [
        {"t": T0, "deployment": "local", "event": "change", "status": "started", "observed": "alice (restart)"},
        _check(T0 + 1, "health", D, "/health", "fail", "connection refused"),
        {"t": T0 + 5, "deployment": "local", "event": "change", "status": "ended", "observed": "alice (restart)"},
    ]
    assert {h.name: h for h in judge_causes(change, [], sig)}["a role down"].verdict == RULED_OUT
    assert {h.name: h for h in judge_causes(change[1:2], [], sig)}["a role down"].verdict == CAUSE


def test_the_screen_says_the_verdict_first_and_fits_80x24(monkeypatch, capsys, tmp_path):
    from pdctl.render.incident_files import Written
    from pdctl.render.incident_screen import incident_json, incident_screen

    monkeypatch.setenv("COLUMNS", "80")
    rep = _report()
    rep.notes = ["gap one " * 8, "gap two", "gap three"]
    long = tmp_path / ("a-rather-long-directory-name-" * 3) / "incident-local-20260101-000000"
    written = Written(long.with_suffix(".md"), long.with_suffix(".html"), [long.with_name("x-queues.svg")])
    incident_screen(rep, written)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("incident write-up written; local is HEALTHY now")
    assert len(lines) <= 24 and all(len(x) <= 80 for x in lines), lines
    assert "next: open" in "\n".join(lines[-4:])  # last, the file to open (a long path wraps after it)
    assert "1 more in the write-up's Gaps section" in "\n".join(lines)
    doc = incident_json(rep, written)
    assert doc["ok"] and doc["healthy_now"] and doc["sections"][0] == "Summary" and doc["entries"]["heal"] == 2
