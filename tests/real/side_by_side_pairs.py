"""Two PD pairs on free loopback ports for tests/real/test_engine_side_by_side.py: the real SGLang 0.5.23 (prefill +
decode, mooncake over loopback; tests/fixtures/real_sglang.py) and the bundled engine (the same, launched as
tests/engine/stack.py launches it). No router: a PD request goes to the prefill and the decode at once with the same
bootstrap_host/port/room, as sglang-router sends it. Each process has its own process group, stopped in a finally."""

from __future__ import annotations

import concurrent.futures as cf
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

import httpx

from tests.engine.stack import Stack, mc_port_range, wait_for
from tests.fixtures.net import free_port
from tests.fixtures.real_sglang import require_real_lane, run_env, server_argv

SERVED = "tiny"  # --served-model-name of all four workers, so model_name labels and `model` fields agree


class RealPair:
    """Real SGLang prefill + decode (mooncake), each in its own process group."""

    kind = "real"

    def __init__(self):
        require_real_lane()
        self.pp, self.dp, self.bp = free_port(), free_port(), free_port()
        self.prefill, self.decode = f"http://127.0.0.1:{self.pp}", f"http://127.0.0.1:{self.dp}"
        self.logdir = tempfile.mkdtemp(prefix="side-by-side-real-")
        self.procs: dict[str, subprocess.Popen] = {}

    def _spawn(self, role: str, port: int) -> None:
        argv = server_argv(
            role,
            port=port,
            nccl_port=free_port(),
            bootstrap_port=self.bp if role == "prefill" else None,
            extra=("--served-model-name", SERVED),
        )
        # its own multiprocess metrics directory (removed with the logs) and its own Mooncake rpc port range
        mp = os.path.join(self.logdir, f"prom-{role}")
        os.mkdir(mp)
        env = run_env({**os.environ, **mc_port_range(), "PROMETHEUS_MULTIPROC_DIR": mp})
        with open(os.path.join(self.logdir, f"{role}.log"), "ab") as log:
            self.procs[role] = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def start(self) -> None:
        self._spawn("prefill", self.pp)
        self._spawn("decode", self.dp)

    def wait(self, timeout: float) -> None:
        for url in (self.prefill, self.decode):
            wait_for(
                lambda u=url: self._alive() and httpx.get(f"{u}/health", timeout=5).status_code == 200,
                timeout,
                f"real {url}/health",
            )

    def _alive(self) -> bool:
        dead = {r: p.returncode for r, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"real SGLang exited early {dead}:\n{self.logs()}")
        return True

    def stop(self) -> None:
        for p in self.procs.values():  # SIGTERM first: SGLang's launcher ends its scheduler and detokenizer
            _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(p, signal.SIGKILL)  # whatever of the group is left (a child outliving its parent)
            p.wait(10)
        self.procs.clear()

    def cleanup(self) -> None:
        shutil.rmtree(self.logdir, ignore_errors=True)

    def logs(self) -> str:
        return _tails(self.logdir)


class EnginePair:
    """The bundled engine's prefill + decode (mooncake, as the real pair), started as tests/engine/stack.py does."""

    kind = "engine"

    def __init__(self):
        self.stack = Stack(backend="mooncake")
        self.bp = self.stack.bp
        self.prefill, self.decode = self.stack.prefill, self.stack.decode

    def start(self) -> None:
        self.stack.start_prefill()
        self.stack.start_decode()

    def wait(self, timeout: float) -> None:
        for url in (self.prefill, self.decode):
            self.stack.wait_healthy(url, timeout)

    def stop(self) -> None:
        self.stack.stop()

    def cleanup(self) -> None:
        shutil.rmtree(self.stack.logdir, ignore_errors=True)

    def logs(self) -> str:
        return self.stack.logs()


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def _tails(logdir: str) -> str:
    out = []
    for f in sorted(os.listdir(logdir)):
        if f.endswith(".log"):
            with open(os.path.join(logdir, f), errors="replace") as fh:
                out.append(f"--- {f}\n" + fh.read()[-4000:])
    return "\n".join(out)


def started(timeout: float = 240):
    """Start both pairs at once (the real one takes about a minute); yield {"real": ..., "engine": ...}; always stop
    every process. For a module fixture: `yield from started()`."""
    pairs = {}
    try:
        pairs["real"] = RealPair()
        pairs["engine"] = EnginePair()
        for p in pairs.values():
            p.start()
        try:
            for p in pairs.values():
                p.wait(timeout)
        except Exception:
            for p in pairs.values():
                print(p.logs())
            raise
        yield pairs
    finally:
        for p in pairs.values():
            p.stop()
            p.cleanup()


# -- requests ---------------------------------------------------------------------------------------------------------


def pd_body(pair, body: dict, n: int = 1) -> dict:
    """body with the bootstrap fields the router adds: one room, or one per choice (a list, as sglang-router 0.3.2
    sends a chat `n`)."""
    rooms = [random.getrandbits(63) for _ in range(n)]
    if n == 1:
        return {**body, "bootstrap_host": "127.0.0.1", "bootstrap_port": pair.bp, "bootstrap_room": rooms[0]}
    return {**body, "bootstrap_host": ["127.0.0.1"] * n, "bootstrap_port": [pair.bp] * n, "bootstrap_room": rooms}


def pd_post(pair, path: str, body: dict, n: int = 1, timeout: float = 60) -> tuple[httpx.Response, httpx.Response]:
    """POST the same PD body to the prefill and the decode at once; (prefill's answer, decode's answer)."""
    b = pd_body(pair, body, n)
    with cf.ThreadPoolExecutor(2) as ex:
        fp = ex.submit(httpx.post, f"{pair.prefill}{path}", json=b, timeout=timeout)
        fd = ex.submit(httpx.post, f"{pair.decode}{path}", json=b, timeout=timeout)
        return fp.result(), fd.result()


def pd_stream(pair, path: str, body: dict, timeout: float = 60) -> tuple[httpx.Response, list[str]]:
    """A streamed PD request: the prefill's (non-streamed) answer, and the decode's SSE `data:` payloads in order."""
    b = pd_body(pair, {**body, "stream": True})

    def decode_events() -> list[str]:
        with httpx.stream("POST", f"{pair.decode}{path}", json=b, timeout=timeout) as r:
            assert r.status_code == 200, r.read()
            return [line[len("data:") :].strip() for line in r.iter_lines() if line.startswith("data:")]

    with cf.ThreadPoolExecutor(2) as ex:
        fp = ex.submit(httpx.post, f"{pair.prefill}{path}", json=b, timeout=timeout)
        fd = ex.submit(decode_events)
        return fp.result(), fd.result()
