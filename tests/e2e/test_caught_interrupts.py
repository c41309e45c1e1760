"""A signal that reaches an op which catches the interrupt itself to judge what it gathered (the inflight sampler,
triage, the storm) is still named: "interrupted by SIGTERM" in the notes, the exit 130, and a playbook's step and
run, as for an op that does not catch it. Real pdctl processes sample real HTTP servers that serve /metrics captured
from SGLang 0.5.23; the signal is sent once they have been read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.helpers import REPO, local_inventory, write_inventory
from tests.e2e.test_record_baseline import _metrics_handler
from tests.fixtures.http_servers import serving
from tests.fixtures.net import closed_port, free_port

pytestmark = [pytest.mark.e2e]


def _sampled_then_signalled(args, tmp_path, servers, sig=signal.SIGTERM):
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": "200", "PDCTL_OPERATOR": "t"}
    p = subprocess.Popen(
        [sys.executable, "-m", "pdctl", *args],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + 60
        while sum(s.accepted for s in servers) < 4:  # each worker read at least twice: sampling is under way
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < end, "never sampled"
            time.sleep(0.05)
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, out, err


@pytest.fixture
def workers(tmp_path):
    with (
        serving(_metrics_handler("sglang-0.5.23-metrics-prefill-idle.prom")) as (pf, _),
        serving(_metrics_handler("sglang-0.5.23-metrics-decode-idle.prom")) as (dc, _),
    ):
        ports = {
            "prefill": pf.server_address[1],
            "decode": dc.server_address[1],
            "router": closed_port(),
            "bootstrap": free_port(),
            "prometheus": free_port(),
        }
        yield write_inventory(tmp_path / "inv.yaml", local_inventory("caught", ports)), (pf, dc)


def test_verify_inflight_stopped_by_sigterm_says_so(workers, tmp_path):
    inv, servers = workers
    code, out, err = _sampled_then_signalled(
        ["verify", "inflight", "--window", "60", "--interval", "0.2", "--json", "-i", str(inv)], tmp_path, servers
    )
    assert code == 130, err
    doc = json.loads(out)
    assert doc["partial"] is True and "interrupted by SIGTERM: the series is partial" in doc["notes"], doc["notes"]
    assert "Traceback" not in err


def test_a_playbook_step_that_caught_sigterm_is_recorded_as_stopped_by_it(workers, tmp_path):
    inv, servers = workers
    pb = tmp_path / "pb.yaml"
    pb.write_text(
        "name: t\nsteps:\n  - name: queues\n    action: inflight\n    args: {window_s: 60, interval_s: 0.2}\n"
    )
    code, out, err = _sampled_then_signalled(["run", str(pb), "-i", str(inv), "--json"], tmp_path, servers)
    assert code == 130, err
    doc = json.loads(out)
    (step,) = doc["steps"]
    assert step["status"] == "interrupted" and step["gate"] == "interrupted (SIGTERM)", step  # it said Ctrl-C
    log = (tmp_path / "state" / "pdctl" / "audit.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["result"] == "interrupted at step 1 'queues' (SIGTERM)", log[-1]


def test_the_screen_of_a_playbook_step_stopped_by_sigterm_names_it(workers, tmp_path):
    inv, servers = workers
    pb = tmp_path / "pb.yaml"
    pb.write_text(
        "name: t\nsteps:\n  - name: queues\n    action: inflight\n    args: {window_s: 60, interval_s: 0.2}\n"
    )
    code, out, err = _sampled_then_signalled(["run", str(pb), "-i", str(inv)], tmp_path, servers)
    assert code == 130, err
    assert "gate: interrupted (SIGTERM)" in " ".join((out + err).split()), out + err  # it said "interrupted"
