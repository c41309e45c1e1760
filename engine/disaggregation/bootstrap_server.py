"""Bootstrap server on the prefill host (--disaggregation-bootstrap-port): prefill ranks register
with PUT /route; decode looks them up with GET /route (503 until registered); GET /health -> OK."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    server: "BootstrapServer"

    def log_message(self, *a):  # keep stderr quiet
        pass

    def _send(self, code: int, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else (json.dumps(body) if ctype == "application/json" else body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/health":
            return self._send(200, "OK", "text/plain")
        if path == "/route":
            with self.server.lock:
                ranks = dict(self.server.ranks)
            if not ranks:
                return self._send(503, "not fully registered yet", "text/plain")
            return self._send(200, {"ranks": ranks, **next(iter(ranks.values()))})
        self._send(404, {"error": "not found"})

    def do_PUT(self):
        if self.path.split("?", 1)[0] != "/route":
            return self._send(404, {"error": "not found"})
        try:
            info = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            key = str(info.get("tp_rank", 0))
        except Exception as e:
            return self._send(400, {"error": f"bad registration: {e}"})
        with self.server.lock:
            self.server.ranks[key] = info
        self._send(200, "OK", "text/plain")


class BootstrapServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int):
        super().__init__((host, port), _Handler)
        self.lock = threading.Lock()
        self.ranks: dict[str, dict] = {}

    def start(self) -> "BootstrapServer":
        threading.Thread(target=self.serve_forever, name="bootstrap-server", daemon=True).start()
        return self
