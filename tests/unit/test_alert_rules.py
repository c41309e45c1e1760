"""The shipped alert rules (pdctl/alerts/pdctl.rules.yml) under Prometheus's own tools: `promtool check rules`, and
`promtool test rules` on series that reproduce each alert's condition and its non-firing twin, and on the incidents of
issue 27 as whole deployments, each asserting exactly which alerts fire and with which severity (tests/alerts/cases.py,
tests/alerts/scenarios.py).
promtool comes with Debian's prometheus package (scripts/install.sh); without it these tests skip, which
PDCTL_REQUIRE_ALL=1 turns into a failure."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pdctl.alerts import RULES_FILE
from tests.alerts.cases import CASES
from tests.alerts.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]
ALERTS_DOC = ROOT / "docs" / "alerts.md"


def promtool() -> str:
    path = shutil.which("promtool")
    if not path:
        pytest.skip("promtool not installed (Debian's prometheus package: bash scripts/install.sh)")
    return path


def rules() -> dict[str, dict]:
    doc = yaml.safe_load(RULES_FILE.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"]}


def _humanize_duration(v: float) -> str:
    # Prometheus's humanizeDuration for values >= 1 s
    s = int(v)
    d, h, m, sec = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    if d:
        return f"{d}d {h}h {m}m {sec}s"
    if h:
        return f"{h}h {m}m {sec}s"
    if m:
        return f"{m}m {sec}s"
    return f"{v:.4g}s"


def render(template: str, labels: dict, value) -> str:
    """The few template forms the rules use; any other form fails the test rather than passing unseen."""

    def one(m: re.Match) -> str:
        expr = m.group(1).strip()
        if expr.startswith("$labels."):
            name = expr[len("$labels.") :]
            if name not in labels:
                # Prometheus renders a label the alert lacks as "": only `deployment` may be absent (a scrape
                # target the user did not label); any other missing label is a typo in the rule or the case
                assert name == "deployment", f"the alert has no label {name!r} for {template!r}"
                return ""
            return labels[name]
        assert value is not None, f"case must give the value {template!r} prints"
        if expr == "$value":
            return f"{value:g}"
        if expr == "$value | humanizeDuration":
            return _humanize_duration(value)
        if expr == '$value | printf "%.0f"':
            return f"{value:.0f}"
        if expr == "$value | humanizePercentage":
            return f"{value * 100:.4g}%"  # Prometheus's humanize of v*100, for 1 <= v*100 < 1000
        raise AssertionError(f"template form not handled by the test: {expr!r}")

    return re.sub(r"\{\{(.*?)\}\}", one, template)


def expected_alerts(rule: dict, expected: list[dict]) -> list[dict]:
    exp = []
    for e in expected:
        value = e.get("value")
        labels = {k: str(v) for k, v in e.items() if k != "value"}
        exp.append(
            {
                "exp_labels": {**labels, **rule["labels"]},
                "exp_annotations": {k: render(v, labels, value) for k, v in rule["annotations"].items()},
            }
        )
    return exp


def promtool_tests(cases) -> dict:
    by_alert = rules()
    tests = []
    for name, alert, series, at, expected in cases:
        tests.append(
            {
                "name": name,
                "interval": "5s",
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "alert_rule_test": [
                    {"eval_time": at, "alertname": alert, "exp_alerts": expected_alerts(by_alert[alert], expected)}
                ],
            }
        )
    return {"rule_files": [str(RULES_FILE)], "evaluation_interval": "5s", "tests": tests}


def scenario_tests(scenarios) -> dict:
    """At each checkpoint every rule of the file is asked: the alerts a scenario names with their severity (checked
    against the rule's), every other rule with no alert."""
    by_alert = rules()
    tests = []
    for name, series, checkpoints in scenarios:
        asked = []
        for at, firing in checkpoints:
            assert set(firing) <= set(by_alert), f"{name} at {at}: no such rule: {set(firing) - set(by_alert)}"
            for alert, rule in by_alert.items():
                severity, expected = firing.get(alert, (rule["labels"]["severity"], []))
                assert severity == rule["labels"]["severity"], f"{name} at {at}: {alert} is {rule['labels']}"
                asked.append({"eval_time": at, "alertname": alert, "exp_alerts": expected_alerts(rule, expected)})
        tests.append(
            {
                "name": name,
                "interval": "5s",
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "alert_rule_test": asked,
            }
        )
    return {"rule_files": [str(RULES_FILE)], "evaluation_interval": "5s", "tests": tests}


def run_promtool(tmp_path: Path, doc: dict) -> subprocess.CompletedProcess:
    f = tmp_path / "pdctl.rules.test.yml"
    f.write_text(json.dumps(doc, indent=1))  # JSON is YAML: no quoting surprises
    return subprocess.run([promtool(), "test", "rules", str(f)], capture_output=True, text=True, timeout=300)


def run_promtool_tests(tmp_path: Path, cases) -> subprocess.CompletedProcess:
    return run_promtool(tmp_path, promtool_tests(cases))


def test_promtool_check_rules_accepts_the_shipped_file():
    out = subprocess.run([promtool(), "check", "rules", str(RULES_FILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules())} rules found" in out.stdout


def test_every_condition_and_its_twin_under_promtool_test_rules(tmp_path):
    out = run_promtool_tests(tmp_path, CASES)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_every_incident_fires_exactly_its_alerts_with_their_severities(tmp_path):
    out = run_promtool(tmp_path, scenario_tests(SCENARIOS))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_the_incidents_page_as_issue_27_says():
    """What each incident pages (critical) at its checkpoints; after each fix nothing fires."""

    def criticals(name: str) -> list[set[str]]:
        checkpoints = next(c for n, _, c in SCENARIOS if n.startswith(name))
        return [{a for a, (sev, _) in firing.items() if sev == "critical"} for _, firing in checkpoints]

    def last(name: str) -> dict:
        return next(c for n, _, c in SCENARIOS if n.startswith(name))[-1][1]

    soak = next(c for n, _, c in SCENARIOS if n.startswith("healthy soak"))
    assert all(firing == {} for _, firing in soak)
    # the degraded bootstrap: one page, PdctlPairBroken, until the fix
    assert criticals("degraded bootstrap")[:2] == [{"PdctlPairBroken"}] * 2
    assert all(pages <= {"PdctlInflightPinned", "SGLangPrefillInflightStalled"} for pages in criticals("a pin"))
    assert criticals("a pin under load") == [{"PdctlInflightPinned"}] * 2
    assert all("PdctlTargetDown" in pages for pages in criticals("a killed decode")[:3])
    assert "PdctlRouterNotReady" in next(c for n, _, c in SCENARIOS if n.startswith("a killed decode"))[2][1]
    assert all(pages == {"PdctlTargetDown"} for pages in criticals("a hung host")[:2])
    # planned changes (a pdctl deploy holding the deployment lock) fire nothing at all, paused or under load; the
    # same restarts made by hand page the worker that is down
    for name in ("a re-deploy with changed flags", "a re-deploy under load"):
        assert all(firing == {} for _, firing in next(c for n, _, c in SCENARIOS if n.startswith(name))), name
    assert all("PdctlTargetDown" in pages for pages in criticals("the same restarts made by hand")[:-2])
    for name in ("degraded bootstrap", "a killed decode", "a hung host", "a re-deploy", "the same restarts"):
        assert last(name) == {}, name


def test_promtool_fails_a_twin_that_is_expected_to_fire(tmp_path):
    # the harness can fail: a twin (one pinned sample) turned into an expectation that the pin alert fires
    twin = next(c for c in CASES if c[0] == "one pinned sample is a flap")
    out = run_promtool_tests(tmp_path, [(*twin[:4], [{"deployment": "d"}])])
    assert out.returncode != 0
    assert "FAILED" in out.stdout + out.stderr and "PdctlInflightPinned" in out.stdout + out.stderr


def test_every_alert_has_a_firing_case_and_a_non_firing_twin():
    firing = {c[1] for c in CASES if c[4]}
    quiet = {c[1] for c in CASES if not c[4]}
    assert set(rules()) == firing, "alerts without a firing case: " + ", ".join(sorted(set(rules()) - firing))
    assert set(rules()) == quiet, "alerts without a non-firing twin: " + ", ".join(sorted(set(rules()) - quiet))


def test_every_rule_says_what_to_do_and_points_at_its_runbook():
    doc = ALERTS_DOC.read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+)$", doc, re.M)}
    for name, rule in rules().items():
        assert "for" in rule, name
        assert rule["labels"]["severity"] in ("critical", "warning"), name
        ann = rule["annotations"]
        assert ann["summary"] and "\n" not in ann["summary"], name
        command = r"`pdctl (triage|restart --rolling|restart --pair|verify \w+|history|status|watch)"
        assert re.search(command, ann["description"]), name
        assert ann["runbook"] == f"docs/alerts.md#{name.lower()}", name
        assert name.lower() in anchors, f"docs/alerts.md has no section for {name}"


def test_the_rules_ship_as_package_data():
    cfg = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^pdctl = \[.*"alerts/\*\.yml".*\]$', cfg, re.M)
    assert RULES_FILE.is_file() and RULES_FILE.parent.name == "alerts"
