"""The shipped alert rules (pdctl/alerts/pdctl.rules.yml) under Prometheus's own tools: `promtool check rules`, and
`promtool test rules` on series that reproduce each alert's condition and its non-firing twin (tests/alerts/cases.py).
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
            return labels[expr[len("$labels.") :]]
        assert value is not None, f"case must give the value {template!r} prints"
        if expr == "$value":
            return f"{value:g}"
        if expr == "$value | humanizeDuration":
            return _humanize_duration(value)
        if expr == '$value | printf "%.0f"':
            return f"{value:.0f}"
        raise AssertionError(f"template form not handled by the test: {expr!r}")

    return re.sub(r"\{\{(.*?)\}\}", one, template)


def promtool_tests(cases) -> dict:
    by_alert = rules()
    tests = []
    for name, alert, series, at, expected in cases:
        rule = by_alert[alert]
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
        tests.append(
            {
                "name": name,
                "interval": "5s",
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": exp}],
            }
        )
    return {"rule_files": [str(RULES_FILE)], "evaluation_interval": "5s", "tests": tests}


def run_promtool_tests(tmp_path: Path, cases) -> subprocess.CompletedProcess:
    f = tmp_path / "pdctl.rules.test.yml"
    f.write_text(json.dumps(promtool_tests(cases), indent=1))  # JSON is YAML: no quoting surprises
    return subprocess.run([promtool(), "test", "rules", str(f)], capture_output=True, text=True, timeout=120)


def test_promtool_check_rules_accepts_the_shipped_file():
    out = subprocess.run([promtool(), "check", "rules", str(RULES_FILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules())} rules found" in out.stdout


def test_every_condition_and_its_twin_under_promtool_test_rules(tmp_path):
    out = run_promtool_tests(tmp_path, CASES)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


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
