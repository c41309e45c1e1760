"""Start/stop a real prefill + decode + sglang-router on loopback for engine tests.
Every process gets its own process group; stop() kills the groups even if a test failed."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


from tests.fixtures.net import free_port  # noqa: E402  (one helper for every test)


UCX_LOOPBACK = {"UCX_NET_DEVICES": "lo"}


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    m = re.search(rf"^{re.escape(name)}{{[^}}]*}} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


def counter(url: str, name: str) -> float:
    """A counter's value, 0 while it has no series: as in SGLang's multiprocess metrics, a labelled counter's series
    appears at its first increment, so an absent failure counter means no failure yet."""
    v = metric(url, name)
    return 0.0 if v != v else v


def metric_sum(url: str, name: str) -> float:
    """The sum over every series of `name` (e.g. generation_tokens_total's is_streaming="true" and "false")."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M))


def server_pids(pid: int) -> list[int]:
    """A bundled-engine server's processes: the launched (HTTP) process, then the scheduler process it forked
    (engine/scheduler_process.py), which holds the model, the bootstrap and KV transfer sockets."""
    kids = []
    for q in os.listdir("/proc"):
        if not q.isdigit():
            continue
        try:
            with open(f"/proc/{q}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] == str(pid):
                    kids.append(int(q))
        except OSError:  # gone meanwhile
            pass
    return [pid, *sorted(kids)]


def wait_for(pred, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except httpx.HTTPError:
            pass
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def mc_port_range(n: int = 6) -> dict[str, str]:
    """MC_MIN_RPC_PORT..MC_MAX_RPC_PORT for one Mooncake process: n consecutive ports free on every address now
    (Mooncake binds its handshake and data listeners on all of them), below 32768 (Mooncake ignores a range
    reaching further and falls back to 15000..17000, shared by every test)."""
    for _ in range(50):
        base = free_port()
        ports = range(base, base + n)
        if ports[-1] >= 32768:
            continue
        ok = True
        for port in ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return {"MC_MIN_RPC_PORT": str(ports[0]), "MC_MAX_RPC_PORT": str(ports[-1])}
    raise RuntimeError(f"no {n} consecutive free ports below 32768 for Mooncake")


class Stack:
    def __init__(self, prefill_env=None, decode_env=None, drills: str = "", backend: str | None = "nixl"):
        """backend: the --disaggregation-transfer-backend of both workers; None leaves the flag out (the engine's
        default, mooncake, as SGLang's). A Mooncake worker gets its own MC rpc port range at each start."""
        self.backend = backend
        self.pp, self.dp, self.rp, self.bp, self.mp = (free_port() for _ in range(5))
        # UCX_NET_DEVICES=lo as pdctl's single-host launch env sets it: NIXL/UCX sockets stay on loopback
        self.prefill_env = {"PDCTL_DRILLS": drills, **UCX_LOOPBACK, **(prefill_env or {})}
        self.decode_env = {"PDCTL_DRILLS": "", **UCX_LOOPBACK, **(decode_env or {})}
        self.procs: dict[str, subprocess.Popen] = {}
        self.logdir = tempfile.mkdtemp(prefix="engine-test-")
        self.prefill = f"http://127.0.0.1:{self.pp}"
        self.decode = f"http://127.0.0.1:{self.dp}"
        self.router = f"http://127.0.0.1:{self.rp}"

    def _spawn(self, name, argv, env):
        log = open(os.path.join(self.logdir, f"{name}.log"), "ab")
        e = {**os.environ, "PYTHONPATH": ROOT, **env}
        self.procs[name] = subprocess.Popen(
            argv, cwd=ROOT, env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def worker_argv(self, mode, port, bootstrap_port=None):
        return [
            sys.executable,
            "-m",
            "engine.launch_server",
            "--disaggregation-mode",
            mode,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--disaggregation-bootstrap-port",
            str(bootstrap_port or self.bp),
            *(["--disaggregation-transfer-backend", self.backend] if self.backend else []),
            "--enable-metrics",
            "--served-model-name",
            "tiny",
        ]

    def worker_env(self, env: dict) -> dict:
        if self.backend in (None, "mooncake"):
            return {**mc_port_range(), **env}
        return env

    def start_prefill(self):
        self._spawn("prefill", self.worker_argv("prefill", self.pp), self.worker_env(self.prefill_env))

    def start_decode(self):
        self._spawn("decode", self.worker_argv("decode", self.dp), self.worker_env(self.decode_env))

    def start_router(self):
        self._spawn(
            "router",
            [
                sys.executable,
                "-m",
                "sglang_router.launch_router",
                "--pd-disaggregation",
                "--prefill",
                self.prefill,
                str(self.bp),
                "--decode",
                self.decode,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.rp),
                "--prometheus-port",
                str(self.mp),
                "--health-check-interval-secs",
                "1",
                "--health-failure-threshold",
                "1",
                "--health-success-threshold",
                "1",
            ],
            {},
        )

    def wait_healthy(self, url, timeout=60):
        wait_for(lambda: httpx.get(f"{url}/health", timeout=2).status_code == 200, timeout, f"{url}/health")

    def start(self):
        self.start_prefill()
        self.start_decode()
        self.wait_healthy(self.prefill)
        self.wait_healthy(self.decode)
        self.start_router()
        self.wait_ready()
        return self

    def wait_ready(self, timeout=60):
        wait_for(
            lambda: httpx.get(f"{self.router}/readiness", timeout=2).status_code == 200, timeout, "router /readiness"
        )

    def kill(self, name, sig=signal.SIGKILL):
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            p.wait(10)

    def stop(self):
        for name in list(self.procs):
            self.kill(name)

    @contextmanager
    def running(self):
        """Start the stack; on a failure print its logs; always stop it (for `with` and fixtures alike)."""
        try:
            self.start()
            yield self
        except Exception:
            print(self.logs())
            raise
        finally:
            self.stop()

    def logs(self) -> str:
        out = []
        for f in sorted(os.listdir(self.logdir)):
            with open(os.path.join(self.logdir, f), errors="replace") as fh:
                out.append(f"--- {f}\n" + fh.read()[-3000:])
        return "\n".join(out)
