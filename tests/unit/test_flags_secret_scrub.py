"""A declared secret's value inside an ordinary env value is masked by the flags check as render masks it (issue 28,
S2b): `HF_TOKEN=hf_SECRETTOKEN123` and `CONTAINS=prefix-hf_SECRETTOKEN123-suffix` on a role showed
`prefix-hf_SECRETTOKEN123-suffix` raw in final-health -v, --json, --report, `run final-health`, `watch --once --json`
and the timeline: the flags judge wrote a non-secret name's value into its CheckResult. The flags layer now scrubs
the inventory's declared secrets (and the live process's own) from every row (`scrub_secrets`). Checked on the
function and end to end with a real process found through the pidfile pdctl would have written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.checks.flags import judge_flags, scrub_secrets
from pdctl.cli.app import app
from pdctl.secrets import MASK
from tests.unit.isolated_local import live_decode, local_inventory

SECRET = "hf_SECRETTOKEN123"
CONTAINS = f"prefix-{SECRET}-suffix"
LIVE = "hf_LIVEONLY9876"  # the variant: a live token that differs from the declared one, inside a drifted value


def test_scrub_secrets_masks_a_secret_inside_an_ordinary_value_and_keeps_the_judges_words():
    rows = judge_flags(
        "decode[0]",
        ["python3", "--api-key", "live-key-value"],
        {"HF_TOKEN": SECRET, "CONTAINS": CONTAINS, "ZZ_" + SECRET: "1"},
        {"--api-key": "declared-key-value"},
        {"HF_TOKEN": SECRET, "CONTAINS": CONTAINS, "ZZ_" + SECRET: "1"},
    )
    assert any(SECRET in r.observed + r.expected + r.name for r in rows)  # the judge alone shows it
    shown = scrub_secrets(rows, {SECRET, "declared-key-value"})
    text = json.dumps([[r.name, r.observed, r.expected, r.detail, r.data] for r in shown])
    assert SECRET not in text and "declared-key-value" not in text and "live-key-value" not in text
    by_name = {r.name: r for r in shown}
    assert by_name["env:CONTAINS"].observed == f"prefix-{MASK}-suffix" and by_name["env:CONTAINS"].status == "pass"
    assert f"env:ZZ_{MASK}" in by_name  # a name holding the secret, as mask_env shows it
    assert "drift: --api-key value differs" in by_name["--api-key"].detail  # not "--api-key *** differs"
    assert scrub_secrets(rows, ()) == rows


# ---- end to end, with the bundled local inventory


@pytest.fixture
def inv(tmp_path, monkeypatch) -> Path:
    data = local_inventory(tmp_path, monkeypatch)
    data["roles"]["decode"][0]["env"].update({"HF_TOKEN": SECRET, "CONTAINS": CONTAINS, "DRIFTED": "declared"})
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_final_health_run_and_watch_mask_a_declared_secret_inside_a_value(inv, tmp_path):
    """The reproduction (CONTAINS, as declared: a passing row) and its variant (DRIFTED holding the live process's
    own token, which the inventory does not declare: a failing row naming what it found), in every output."""
    env = {"HF_TOKEN": LIVE, "CONTAINS": CONTAINS, "DRIFTED": f"x-{LIVE}-y", "PATH": "/usr/bin:/bin"}
    with live_decode(tmp_path, env):
        runner = CliRunner()
        fh = runner.invoke(app, ["verify", "final-health", "-i", str(inv), "--json"])
        rows = {c["name"]: c for c in json.loads(fh.stdout)["layers"]["flags"] if c["target"].startswith("decode")}
        assert rows["env:CONTAINS"]["status"] == "pass", fh.stdout  # judged on the real values
        assert rows["env:CONTAINS"]["observed"] == rows["env:CONTAINS"]["expected"] == f"prefix-{MASK}-suffix"
        assert rows["env:DRIFTED"]["status"] == "fail" and rows["env:DRIFTED"]["observed"] == f"x-{MASK}-y"
        timeline = tmp_path / "timeline.jsonl"
        pb = tmp_path / "flags.yaml"  # final-health's flags step alone (the shipped one stops at its health step here)
        step = {"name": "config", "action": "verify", "args": {"layers": ["flags"]}}
        pb.write_text(yaml.safe_dump({"name": "flags-only", "steps": [step]}))
        outputs = [
            fh.stdout,
            runner.invoke(app, ["verify", "final-health", "-i", str(inv), "-v"]).output,
            runner.invoke(app, ["run", str(pb), "-i", str(inv), "--json"]).output,
            runner.invoke(app, ["watch", "-i", str(inv), "--once", "--json", "--timeline", str(timeline)]).stdout,
        ]
        report = tmp_path / "report.html"
        runner.invoke(app, ["verify", "final-health", "-i", str(inv), "-v", "--report", str(report)])
        outputs += [report.read_text(), timeline.read_text(), (tmp_path / "audit.jsonl").read_text()]
        outputs.append(runner.invoke(app, ["run", "final-health", "-i", str(inv), "--json"]).output)
        assert "env:CONTAINS" in outputs[1] and f"prefix-{MASK}-suffix" in outputs[1]
        assert "env:CONTAINS" in outputs[2] and "env:CONTAINS" in outputs[3] and timeline.stat().st_size
        for out in outputs:
            assert SECRET not in out and LIVE not in out
