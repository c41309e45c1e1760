"""An interrupt during final-health stops it at once, even while the end-to-end request is in flight (issue 9,
item 2): the probe runs in a worker thread with its own timeout, and the main thread must not wait for it, neither
in the layer loop nor at interpreter exit (where concurrent.futures joins its threads)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.e2e.helpers import REPO, local_inventory, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def slow_router():
    """A router whose completions take 15 s (a hung pair behind it); `posted` is set when a request arrives."""
    posted, release = threading.Event(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            posted.set()
            release.wait(15)
            self.send_response(503)
            self.end_headers()

        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield srv.server_address[1], posted
    finally:
        release.set()
        srv.shutdown()
        srv.server_close()
        th.join(timeout=5)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupt_while_the_e2e_probe_is_in_flight_exits_130_at_once(slow_router, tmp_path, sig):
    port, posted = slow_router
    ports = {k: free_port() for k in ("prefill", "decode", "bootstrap", "prometheus")}
    inv = write_inventory(tmp_path / "inv.yaml", local_inventory("slowpair", {**ports, "router": port}))
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": "100"}
    env.pop("PDCTL_AUDIT_LOG", None)
    p = subprocess.Popen(
        [sys.executable, "-m", "pdctl", "verify", "final-health", "--layer", "e2e", "-i", str(inv)],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert posted.wait(30), "the end-to-end probe never reached the router"
        time.sleep(1)
        t0 = time.monotonic()
        p.send_signal(sig)
        out, err = p.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=10)
    assert p.returncode == 130, err
    assert took < 3, took
    name = "SIGTERM" if sig == signal.SIGTERM else "SIGINT"
    assert f"interrupted by {name}" in err and "Traceback" not in out + err
    # the error is the last thing printed: a read-only command gets no hint about a lock it never took
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("error: interrupted by") and "lock" not in err, err
