"""README's hand-launch commands wait for readiness and match what pdctl deploys (issue 10, item 9)."""

from __future__ import annotations

import re
import shlex
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pdctl.inventory import embedded_default, load_inventory

REPO = Path(__file__).resolve().parents[2]
ROUTER = embedded_default().router_kind(0).module  # the router pdctl deploys by default
INTERVAL = "--health-check-interval-secs"


def _block() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Launching the bundled engine by hand", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def _commands() -> list[str]:
    """The block's commands, continuation lines joined, comments dropped."""
    joined = _block().replace("\\\n", " ")
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def _index(cmds: list[str], needle: str) -> int:
    (i,) = [k for k, c in enumerate(cmds) if needle in c]
    return i


def test_the_router_line_passes_prometheus_port_and_the_deployed_health_interval():
    router = shlex.split(_commands()[_index(_commands(), ROUTER)].rstrip("&"))
    assert "--prometheus-port" in router and router[router.index("--prometheus-port") + 1].isdigit()
    deployed = embedded_default().roles.router[0].args[INTERVAL]
    assert router[router.index(INTERVAL) + 1] == str(deployed)


def test_the_router_starts_after_both_workers_are_healthy_and_the_curl_after_its_readiness():
    cmds = _commands()
    router, chat = _index(cmds, ROUTER), _index(cmds, "/v1/chat/completions")
    waits = [k for k, c in enumerate(cmds) if c.startswith("wait_ok ")]
    assert any(k < router and ":30000/health" in cmds[k] and ":30002/health" in cmds[k] for k in waits)
    assert any(router < k < chat and cmds[k] == "wait_ok http://127.0.0.1:30001/readiness" for k in waits)


class _NotReadyTwice(BaseHTTPRequestHandler):
    seen = 0

    def do_GET(self):
        type(self).seen += 1
        self.send_response(503 if type(self).seen <= 2 else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def test_the_readiness_wait_really_waits_for_a_200():
    """The README's wait_ok, run by bash against a real server that answers 503 twice, then 200."""
    (define,) = [line for line in _block().splitlines() if line.startswith("wait_ok()")]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _NotReadyTwice)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/readiness"
        p = subprocess.run(
            ["bash", "-c", f"{define}\nwait_ok {url} && echo READY"], capture_output=True, text=True, timeout=20
        )
    finally:
        srv.shutdown()
        srv.server_close()
    assert p.returncode == 0 and p.stdout.strip() == "READY", p.stderr
    assert _NotReadyTwice.seen == 3


def test_the_block_is_valid_bash():
    p = subprocess.run(["bash", "-n"], input=_block(), capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr


def test_the_seed_example_sets_the_health_interval_the_docs_recommend():
    recommended = embedded_default().roles.router[0].args[INTERVAL]
    assert f"args: {{{INTERVAL}: {recommended}}}" in (REPO / "docs" / "inventory.md").read_text()
    example = load_inventory(REPO / "examples" / "seed-production.yaml")
    assert example.roles.router[0].args[INTERVAL] == recommended
