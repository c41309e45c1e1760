"""`pdctl incident` on a deployment that does not answer (its one host's SSH port refuses connections: a real
connect): the write-up is still written, from the audit log, and says the deployment is UNKNOWN now and why,
with no fresh triage or final-health; the next command asks which hosts answer. No engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.helpers import pdctl, silent_ssh_host, write_inventory
from tests.fixtures.net import closed_port

pytestmark = [pytest.mark.e2e]


def _silent(tmp_path: Path) -> Path:
    roles = {
        "prefill": [{"host": "gone", "port": closed_port(), "bootstrap_port": closed_port()}],
        "decode": [{"host": "gone", "port": closed_port()}],
        "router": [{"host": "gone", "port": closed_port()}],
    }
    data = {"name": "silent", "hosts": {"gone": silent_ssh_host()}, "roles": roles}
    return write_inventory(tmp_path / "inv.yaml", data)


def test_a_deployment_that_does_not_answer_still_gets_its_write_up(tmp_path):
    inv = _silent(tmp_path)
    state = tmp_path / "state"
    tried = pdctl(["restart", "--pair", "-i", str(inv), "--json"], state=state, timeout=120)
    assert tried.code == 3, tried.output  # the operator's try, in the audit log
    r = pdctl(["incident", "-i", str(inv), "--out", str(tmp_path / "w"), "--json"], state=state, timeout=120)
    assert r.code == 0, r.output
    doc = r.json()
    assert doc["healthy_now"] is False and "unreachable" in doc["unasked"], doc
    assert doc["verdict"].startswith("UNKNOWN now: the deployment could not be asked"), doc["verdict"]
    md = Path(doc["written"]["markdown"]).read_text()
    assert "No fresh triage: the deployment could not be asked" in md, md
    assert "restart --pair" in md and "Configuration" in md, md  # the records and the config still are there
    screen = pdctl(["incident", "-i", str(inv), "--out", str(tmp_path / "w2")], state=state, env={"COLUMNS": "80"})
    assert screen.code == 0, screen.output
    lines = screen.stdout.splitlines()
    assert lines[0] == "incident write-up written; silent is UNKNOWN now", screen.stdout
    assert lines[-1].startswith("next: pdctl status (which hosts answer?)"), screen.stdout
    assert len(lines) <= 23 and all(len(x) <= 80 for x in lines), screen.stdout
