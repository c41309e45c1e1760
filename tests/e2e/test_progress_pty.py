"""Progress in a real terminal: `pdctl verify inflight --json` with stderr on a pty draws its live line there
(redrawn with \\r + clear-line, a bar of samples read) while stdout, a pipe, holds one JSON document; with stderr
piped too, --json is silent. The workers are two small HTTP servers serving captured SGLang /metrics."""

from __future__ import annotations

import http.server
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, write_inventory
from tests.fixtures.net import free_port

FIXTURES = REPO / "tests" / "unit" / "fixtures"
CLEAR_LINE = "\r\x1b[2K"


def _metrics_server(body: str) -> http.server.ThreadingHTTPServer:
    data = body.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def idle_workers(tmp_path):
    servers = [
        _metrics_server((FIXTURES / f"sglang-0.5.23-metrics-{r}-idle.prom").read_text()) for r in ("prefill", "decode")
    ]
    ports = {
        "prefill": servers[0].server_address[1],
        "decode": servers[1].server_address[1],
        "router": free_port(),
        "bootstrap": free_port(),
        "prometheus": free_port(),
    }
    inv = write_inventory(tmp_path / "inv.yaml", local_inventory("pty", ports))
    try:
        yield tmp_path, inv
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


def _env(tmp: Path) -> dict:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), COLUMNS="100", TERM="xterm")
    env.pop("PDCTL_INVENTORY", None)
    return env


def _run_with_pty_stderr(args: list[str], env: dict) -> tuple[int, str, str]:
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "pdctl", *args],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
        )
        os.close(slave)
        slave = -1
        chunks: list[bytes] = []

        def drain() -> None:
            while True:
                try:
                    b = os.read(master, 4096)
                except OSError:  # EIO: the child closed its end of the pty
                    return
                if not b:
                    return
                chunks.append(b)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        out, _ = p.communicate(timeout=60)
        reader.join(timeout=10)
        return p.returncode, out.decode(), b"".join(chunks).decode(errors="replace")
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


def test_json_with_a_terminal_stderr_shows_live_progress_there_and_one_document_on_stdout(idle_workers):
    tmp, inv = idle_workers
    code, out, err = _run_with_pty_stderr(
        ["verify", "inflight", "--window", "2", "--interval", "1", "-i", str(inv), "--json"], _env(tmp)
    )
    assert code == 0, (out, err)
    doc = json.loads(out)  # stdout: exactly one document
    assert doc["verdict"] == "drained" and len(doc["samples"]) >= 3
    # stderr (the pty): the live line, redrawn in place with a bar of samples read, then cleared
    assert err.count(CLEAR_LINE + "waiting for inflight samples") >= 2, repr(err)
    assert "1/3" in err and "3/3" in err and "/2s" in err
    assert "█" in err  # the pty speaks utf-8: the unicode bar
    assert err.rstrip("\r\n").endswith(CLEAR_LINE), repr(err[-200:])  # nothing left on the line
    assert "\n" not in err  # no scrolling log: no line was kept


def test_json_with_stderr_piped_is_silent(idle_workers):
    tmp, inv = idle_workers
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pdctl",
            "verify",
            "inflight",
            "--window",
            "2",
            "--interval",
            "1",
            "-i",
            str(inv),
            "--json",
        ],
        cwd=REPO,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["verdict"] == "drained"
    assert p.stderr == ""
