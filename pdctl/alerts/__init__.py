"""The alert rules shipped with pdctl (docs/alerts.md): a Prometheus rule file for pdctl watch's exporter and for
SGLang's own metrics, installed as package data so every install carries it."""

from __future__ import annotations

from pathlib import Path

#: the rule file to load into Prometheus (`rule_files:`); tests/unit/test_alert_rules.py runs promtool on it
RULES_FILE = Path(__file__).with_name("pdctl.rules.yml")
