"""What a killed pytest run leaves running is stopped by the next run's sweep (tests/fixtures/leftovers.py), and
nothing else is: a stand-in run is killed (SIGKILL) while it holds a marked process, a service started with a
cleared environment that logs under its base temporary directory, and a network namespace with a process inside."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest

from tests.e2e.helpers import REPO
from tests.fixtures.leftovers import OWNER_ENV, LeftoverSwept, sweep
from tests.fixtures.netns import owned_netns_name, teardown
from tests.fixtures.owner import owner_tag, process_alive

pytestmark = [pytest.mark.e2e]

# The stand-in for a pytest run: marks itself as leftovers.mark_run does, starts what a run's tests would, says
# what, then waits to be killed.
KILLED_RUN = r"""
import json, subprocess, sys
from pathlib import Path
from tests.fixtures.leftovers import mark_run
from tests.fixtures.netns import owned_netns_name
basetemp = Path(sys.argv[1])
tag = mark_run(basetemp)
log = basetemp / "test_x0" / "remote" / "svc.log"
log.parent.mkdir(parents=True)
marked = subprocess.Popen(["sleep", "600"], start_new_session=True)
service = subprocess.Popen(["env", "-i", "sleep", "600"], stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                           start_new_session=True)
ns = owned_netns_name()
subprocess.run(["ip", "netns", "add", ns], check=True)
inside = subprocess.Popen(["ip", "netns", "exec", ns, "env", "-i", "sleep", "600"], start_new_session=True)
print(json.dumps({"tag": tag, "marked": marked.pid, "service": service.pid, "ns": ns, "inside": inside.pid}),
      flush=True)
sys.stdin.read()
"""


def test_what_a_killed_run_left_is_swept_and_nothing_else(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    basetemp = tmp_path / "killed-run"
    basetemp.mkdir()
    run = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(basetemp)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    kept: list[int] = []
    ours = owned_netns_name()
    try:
        left = json.loads(run.stdout.readline())
        run.send_signal(signal.SIGKILL)  # no finally of it runs
        run.wait(30)
        stale = [left["marked"], left["service"], left["inside"]]
        assert all(process_alive(p) for p in stale)
        # not to be touched: this run's own, a mark that does not parse, and an unmarked process
        subprocess.run(["ip", "netns", "add", ours], check=True)
        for env in (
            {**os.environ, OWNER_ENV: owner_tag()},
            {**os.environ, OWNER_ENV: "not-an-owner"},
            {k: v for k, v in os.environ.items() if k != OWNER_ENV},
        ):
            kept.append(subprocess.Popen(["sleep", "600"], env=env, start_new_session=True).pid)
        with pytest.warns(LeftoverSwept, match=f"network namespace {left['ns']}"):
            swept = sweep()
        assert f"network namespace {left['ns']}" in swept
        assert {int(s.split()[1]) for s in swept if s.startswith("process ")} == {left["marked"], left["service"]}
        deadline = time.monotonic() + 10
        while any(process_alive(p) for p in stale) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(process_alive(p) for p in stale)
        assert left["ns"] not in os.listdir("/run/netns") and ours in os.listdir("/run/netns")
        assert all(process_alive(p) for p in kept)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert sweep() == []  # once only
    finally:
        run.kill()
        for pid in kept:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        teardown([ours] + ([left["ns"]] if "left" in locals() else []))
