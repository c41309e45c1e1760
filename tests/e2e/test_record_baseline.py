"""`verify final-health --record-baseline` records only a baseline of every worker's counters, through the real CLI.

The workers are real HTTP servers on 127.0.0.1 serving /metrics captured from SGLang 0.5.23 (no engine started);
a worker that is "stopped" is a closed port, a host that does not answer an SSH port where nothing listens.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.http_servers import serving
from tests.fixtures.net import closed_port, free_port

pytestmark = [pytest.mark.e2e]

FIX = Path(__file__).resolve().parents[1] / "unit" / "fixtures"
OLD = {"prefill[0]@local:1": {'sglang:num_transfer_failed_reqs_total{tp_rank="0"}': 5.0}}


def _metrics_handler(fixture: str):
    body = (FIX / fixture).read_bytes()

    class Metrics(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Metrics


def _inventory(tmp_path: Path, name: str, prefill: int, decode: int) -> Path:
    ports = {
        "prefill": prefill,
        "decode": decode,
        "router": closed_port(),
        "bootstrap": free_port(),
        "prometheus": free_port(),
    }
    data = local_inventory(name, ports)
    return write_inventory(tmp_path / f"{name}.yaml", data)


def _old_baseline(state: Path, name: str) -> Path:
    path = state / "pdctl" / f"baseline-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(OLD))
    return path


def test_every_worker_read_is_recorded_and_said_with_its_path(tmp_path):
    state = tmp_path / "state"
    with (
        serving(_metrics_handler("sglang-0.5.23-metrics-prefill-idle.prom")) as (p, _),
        serving(_metrics_handler("sglang-0.5.23-metrics-decode-idle.prom")) as (d, _),
    ):
        pp, dp = p.server_address[1], d.server_address[1]
        inv = _inventory(tmp_path, "bl-all", pp, dp)
        path = _old_baseline(state, "bl-all")
        r = pdctl(
            ["verify", "final-health", "-i", str(inv), "--layer", "transfer", "--record-baseline", "--json"],
            state=state,
            timeout=120,
        )
        assert r.code == 0, r.output
        doc = r.json()
        assert doc["ok"] is True and doc["baseline"]["recorded"] is True and doc["baseline"]["path"] == str(path)
        saved = json.loads(path.read_text())
        assert sorted(saved) == sorted([f"prefill[0]@local:{pp}", f"decode[0]@local:{dp}"])
        assert all(saved.values()), saved  # each worker's counters, not an empty entry
        screen = pdctl(
            ["verify", "final-health", "-i", str(inv), "--layer", "transfer", "--record-baseline"],
            state=state,
            timeout=120,
        )
        assert screen.code == 0, screen.output
        assert f"transfer baseline recorded: {path}" in " ".join(screen.stdout.split())


def test_stopped_workers_keep_the_old_baseline_and_fail_naming_them(tmp_path):
    state = tmp_path / "state"
    pp, dp = closed_port(), closed_port()
    inv = _inventory(tmp_path, "bl-stopped", pp, dp)
    path = _old_baseline(state, "bl-stopped")
    r = pdctl(
        ["verify", "final-health", "-i", str(inv), "--layer", "health", "--record-baseline", "--json"],
        state=state,
        timeout=120,
    )
    assert r.code == 1, r.output
    doc = r.json()
    assert doc["ok"] is False and doc["baseline"]["recorded"] is False and doc["baseline"]["kept"] is True
    assert sorted(doc["baseline"]["unread"]) == sorted([f"prefill[0]@local:{pp}", f"decode[0]@local:{dp}"])
    assert all("connection refused" in why for why in doc["baseline"]["unread"].values())
    assert json.loads(path.read_text()) == OLD
    screen = pdctl(
        ["verify", "final-health", "-i", str(inv), "--layer", "health", "--record-baseline"], state=state, timeout=120
    )
    flat = " ".join(screen.stdout.split())
    assert screen.code == 1 and "Traceback" not in screen.output
    assert f"transfer baseline NOT recorded: {path} kept as it was" in flat, screen.stdout
    assert f"prefill[0]@local:{pp}" in flat and "transfer baseline" in flat
    # the progress line counts what the screen counts: the unrecorded baseline's checks too (it said 4 of 6)
    said = re.search(r"(\d+) check\(s\) failed$", screen.stderr.strip()).group(1)
    assert f"FAIL ({said} check(s) failed in: health, baseline)" in flat, (screen.stderr, flat)


def test_one_worker_unread_records_nothing(tmp_path):
    """A partial baseline would make every later --since-baseline judge the missing worker's raw counters."""
    state = tmp_path / "state"
    with serving(_metrics_handler("sglang-0.5.23-metrics-prefill-idle.prom")) as (p, _):
        pp, dp = p.server_address[1], closed_port()
        inv = _inventory(tmp_path, "bl-part", pp, dp)
        path = _old_baseline(state, "bl-part")
        r = pdctl(
            ["verify", "final-health", "-i", str(inv), "--layer", "transfer", "--record-baseline", "--json"],
            state=state,
            timeout=120,
        )
    assert r.code == 1, r.output
    doc = r.json()
    assert list(doc["baseline"]["unread"]) == [f"decode[0]@local:{dp}"]
    assert doc["baseline"]["workers"] == [f"prefill[0]@local:{pp}"] and doc["baseline"]["recorded"] is False
    assert json.loads(path.read_text()) == OLD


def test_unreachable_host_is_exit_3_and_keeps_the_old_baseline(tmp_path):
    state = tmp_path / "state"
    data = {
        "name": "bl-ssh",
        "hosts": {
            "gpu1": {
                "transport": "ssh",
                "address": "127.0.0.1",
                "port": closed_port(),
                "service_manager": "systemd",
                "python": "/usr/bin/python3",
                "http": "tunnel",
                "connect_timeout": 3,
            }
        },
        "roles": {
            "prefill": [{"host": "gpu1", "port": 41000}],
            "decode": [{"host": "gpu1", "port": 41002}],
            "router": [{"host": "gpu1", "port": 41003}],
        },
    }
    inv = write_inventory(tmp_path / "ssh.yaml", data)
    path = _old_baseline(state, "bl-ssh")
    r = pdctl(["verify", "final-health", "-i", str(inv), "--record-baseline", "--json"], state=state, timeout=120)
    assert r.code == 3, r.output
    doc = r.json()
    assert doc["error"]["kind"] == "unreachable" and "gpu1" in doc["error"]["message"]
    assert any(
        "baseline NOT recorded" in w and str(path) in w and "prefill[0]@gpu1:41000" in w for w in doc["warnings"]
    ), doc
    assert json.loads(path.read_text()) == OLD
    assert "baseline NOT recorded" in r.stderr and "Traceback" not in r.output
