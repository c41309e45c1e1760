"""The shipped Alertmanager configuration (pdctl/alerts/alertmanager.yml) under Alertmanager's own tool: `amtool
check-config`, `amtool config routes test` for where each severity goes, and its inhibit rules read against the
shipped alert rules, so that a renamed alert cannot leave an inhibition matching nothing. amtool comes with Debian's
prometheus-alertmanager package (scripts/install.sh); without it the amtool tests skip, which PDCTL_REQUIRE_ALL=1
turns into a failure. The incidents themselves, through a real Prometheus and Alertmanager:
tests/alerts/test_alertmanager_routing.py; each inhibit rule on its own, its source and target posted straight to a
real Alertmanager: below."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
import yaml

from pdctl.alerts import ALERTMANAGER_FILE, RULES_FILE
from tests.fixtures.alertmanager import Alertmanager, WebhookReceiver, alertmanager_binary

MATCHER = re.compile(r'^\s*(\w+)\s*(=~|!~|!=|=)\s*"(.*)"\s*$')


def amtool() -> str:
    path = shutil.which("amtool")
    if not path:
        pytest.skip("amtool not installed (Debian's prometheus-alertmanager package: bash scripts/install.sh)")
    return path


def config() -> dict:
    return yaml.safe_load(ALERTMANAGER_FILE.read_text())


def rules() -> dict[str, dict]:
    doc = yaml.safe_load(RULES_FILE.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"]}


def matched_values(matchers: list[str], label: str) -> set[str]:
    """The values of `label` the matchers select: an equality's value, or each name of a regex that is a plain
    alternation (anything fancier is refused: the test could not say which alerts it matches)."""
    out: set[str] = set()
    for m in matchers:
        parsed = MATCHER.match(m)
        assert parsed, f"matcher not understood by the test: {m!r}"
        name, op, value = parsed.groups()
        if name != label:
            continue
        assert op in ("=", "=~"), f"{m!r}: a negative matcher on {label} matches alerts nobody listed"
        if op == "=~":
            assert re.fullmatch(r"\w+(\|\w+)*", value), f"{m!r}: only an alternation of names is allowed"
        out |= set(value.split("|"))
    return out


def routes_test(*labels: str) -> str:
    out = subprocess.run(
        [amtool(), "config", "routes", "test", f"--config.file={ALERTMANAGER_FILE}", *labels],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


def test_amtool_check_config_accepts_the_shipped_file():
    out = subprocess.run([amtool(), "check-config", str(ALERTMANAGER_FILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    assert "4 inhibit rules" in out.stdout and "2 receivers" in out.stdout, out.stdout


@pytest.mark.parametrize(
    ("severity", "receiver"),
    [("critical", "pager"), ("warning", "ticket")],
)
def test_each_severity_routes_to_its_receiver(severity, receiver):
    labels = ["alertname=PdctlPairBroken", "deployment=prod", f"severity={severity}"]
    assert routes_test(*labels) == receiver
    # amtool's own check, and that it can fail
    assert routes_test(f"--verify.receivers={receiver}", *labels) == receiver
    other = {"pager": "ticket", "ticket": "pager"}[receiver]
    wrong = subprocess.run(
        [amtool(), "config", "routes", "test", f"--config.file={ALERTMANAGER_FILE}", f"--verify.receivers={other}"]
        + labels,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode != 0


def test_an_alert_without_severity_is_a_ticket_not_a_page():
    assert routes_test("alertname=SomethingElse", "deployment=prod") == "ticket"


def test_every_severity_of_the_rules_has_a_route():
    cfg = config()
    routed = set()
    for route in cfg["route"]["routes"]:
        routed |= matched_values(route["matchers"], "severity")
    assert {r["labels"]["severity"] for r in rules().values()} <= routed


def test_every_webhook_sends_resolved_and_ships_a_placeholder_url():
    for r in config()["receivers"]:
        assert set(r) == {"name", "webhook_configs"}, r["name"]
        for hook in r["webhook_configs"]:
            assert hook["send_resolved"] is True, r["name"]
            assert ".invalid/" in hook["url"], f"{r['name']}: the shipped URL must be a placeholder"


def test_inhibit_rules_name_only_alerts_of_the_shipped_rules():
    known = rules()
    severities = {r["labels"]["severity"] for r in known.values()}
    referenced: set[str] = set()
    for rule in config()["inhibit_rules"]:
        assert "deployment" in rule["equal"], f"{rule}: an incident may mute its own deployment only"
        for side in ("source_matchers", "target_matchers"):
            referenced |= matched_values(rule[side], "alertname")
            assert matched_values(rule[side], "severity") <= severities, rule
    # the plan's names; if one is renamed in the rules, this says which inhibition went dead
    assert referenced == {
        "PdctlInflightPinned",
        "PdctlPairBroken",
        "PdctlTargetDown",
        "RouterErrorRatioHigh",
        "SGLangPrefillInflightStalled",
    }
    missing = sorted(referenced - set(known))
    assert not missing, f"inhibit rules name alerts that pdctl.rules.yml does not define: {missing}"


def test_inhibition_sources_page_and_their_targets_keep_deployment():
    # a source that did not page would mute a page with a ticket; a target without `deployment` (an SGLang or router
    # rule aggregating it away) never equals its source, so it would never be muted
    known = rules()
    for rule in config()["inhibit_rules"]:
        for name in matched_values(rule["source_matchers"], "alertname") & set(known):
            assert known[name]["labels"]["severity"] == "critical", name
        for name in matched_values(rule["target_matchers"], "alertname") & set(known):
            expr = known[name]["expr"]
            for by in re.findall(r"\bby\s*\(([^)]*)\)", expr):
                assert "deployment" in by, f"{name}: `by ({by})` drops the deployment label"


def test_the_config_ships_as_package_data():
    from pathlib import Path

    cfg = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert re.search(r'^pdctl = \[.*"alerts/\*\.yml".*\]$', cfg, re.M)
    assert ALERTMANAGER_FILE.is_file() and ALERTMANAGER_FILE.parent == RULES_FILE.parent


# (source, target) of each inhibit rule, in the file's order; the source regex's names one by one
INHIBITIONS = [
    ("PdctlTargetDown", "PdctlCheckFailing"),  # any critical mutes every warning
    ("PdctlInflightPinned", "SGLangPrefillInflightStalled"),
    ("PdctlTargetDown", "RouterErrorRatioHigh"),
    ("PdctlPairBroken", "RouterErrorRatioHigh"),
    ("PdctlInflightPinned", "RouterErrorRatioHigh"),
    ("PdctlTargetDown", "PdctlPairBroken"),
]


def test_each_inhibition_in_a_real_alertmanager():
    # each pair in a deployment of its own, and its target alone in another (where nothing may mute it)
    alertmanager_binary()
    severity = {name: r["labels"]["severity"] for name, r in rules().items()}
    now = datetime.now(timezone.utc)
    expected: dict[str, list[str]] = {}
    alerts = []
    for i, (source, target) in enumerate(INHIBITIONS):
        expected[f"muted-{i}"], expected[f"alone-{i}"] = [source], [target]
        for dep, names in ((f"muted-{i}", (source, target)), (f"alone-{i}", (target,))):
            for name in names:
                labels = {"alertname": name, "severity": severity[name], "deployment": dep}
                alerts.append(
                    {
                        "labels": labels,
                        "startsAt": now.isoformat(),
                        "endsAt": (now + timedelta(minutes=5)).isoformat(),
                    }
                )
    with WebhookReceiver() as hook, Alertmanager(hook, group_wait="1s", group_interval="2s") as am:
        httpx.post(f"{am.url}/api/v2/alerts", json=alerts, timeout=10).raise_for_status()
        posted = time.monotonic()

        def notified() -> dict[str, list[str]]:
            got: dict[str, list[str]] = {}
            for n in hook.received():
                got.setdefault(n.body["groupLabels"]["deployment"], []).extend(n.alertnames("firing"))
            return got

        hook.wait(lambda _: set(notified()) >= set(expected), 30, "a notification for every deployment")
        while time.monotonic() < posted + 1 + 2 + 2:  # group_wait, a group_interval: any later flush has come
            time.sleep(0.2)
        assert {dep: sorted(names) for dep, names in notified().items()} == expected
        for i, (source, target) in enumerate(INHIBITIONS):
            (muted,) = am.alerts(deployment=f"muted-{i}", alertname=target)
            assert muted["status"]["state"] == "suppressed", (source, target, muted["status"])
            (alone,) = am.alerts(deployment=f"alone-{i}", alertname=target)
            assert alone["status"]["state"] == "active", (target, alone["status"])
