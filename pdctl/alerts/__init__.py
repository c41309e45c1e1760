"""The alerting shipped with pdctl, installed as package data so every install carries it: a Prometheus rule file
for pdctl watch's exporter and for SGLang's own metrics (docs/alerts.md), and the Alertmanager configuration that
routes and inhibits those alerts (docs/alert-routing.md)."""

from __future__ import annotations

from pathlib import Path

#: the rule file to load into Prometheus (`rule_files:`); tests/unit/test_alert_rules.py runs promtool on it
RULES_FILE = Path(__file__).with_name("pdctl.rules.yml")

#: the Alertmanager configuration (`--config.file`, its webhook URLs replaced); tests/unit/test_alertmanager_config.py
#: runs amtool on it
ALERTMANAGER_FILE = Path(__file__).with_name("alertmanager.yml")

#: the Grafana dashboard (import it, or provision it: its Prometheus is the `datasource` variable, its deployment the
#: `deployment` variable); tests/alerts/test_dashboard.py evaluates every panel's query in a real Prometheus
DASHBOARD_FILE = Path(__file__).with_name("pdctl.dashboard.json")
