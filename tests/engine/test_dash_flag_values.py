"""A real bundled-engine decode worker started from pdctl's rendered command with flag values that start with "-"
(`--served-model-name=-x`, `--api-key=--scalardash99`) starts, serves under that name, and its live command line
read from /proc passes the flags judge. Free ports; the process group is killed at the end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import yaml

from pdctl import launch
from pdctl.checks.flags import judge_flags
from pdctl.services.proc_read import read_process
from pdctl.checks.result import Status
from pdctl.inventory import load_inventory
from pdctl.transport.local import LocalTransport
from tests.fixtures.net import free_port


def test_an_engine_started_with_dash_values_runs_and_its_live_flags_pass(tmp_path):
    port = free_port()
    inv = {
        "name": "dash",
        "transfer_backend": "fake",
        "served_model_name": "-x",
        "hosts": {"local": {"python": sys.executable}},
        "roles": {
            "prefill": [{"port": free_port(), "bootstrap_port": free_port()}],
            "decode": [{"port": port, "args": {"--api-key": "--scalardash99"}}],
            "router": [{"port": free_port()}],
        },
    }
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv))
    i = load_inventory(tmp_path / "inv.yaml")
    argv = launch.role_argv(i, "decode", 0)
    log = open(tmp_path / "decode.log", "wb")
    p = subprocess.Popen(
        argv,
        env={**os.environ, **launch.role_env(i, "decode", 0)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    try:
        deadline, info = time.monotonic() + 60, None
        while time.monotonic() < deadline and p.poll() is None:
            try:
                info = httpx.get(
                    f"http://127.0.0.1:{port}/server_info",
                    timeout=1,
                    headers={"Authorization": "Bearer --scalardash99"},
                ).json()
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert info is not None, (p.poll(), (tmp_path / "decode.log").read_text()[-2000:])
        assert info["served_model_name"] == "-x"
        live = read_process(LocalTransport(), p.pid, timeout=10)
        results = judge_flags("decode[0]", live.argv, live.env, launch.declared_flags(i, "decode", 0), {})
        assert [(r.name, r.detail) for r in results if r.status is not Status.PASS] == []
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        log.close()
