"""The degraded-bootstrap drill models a decode restarted under a long-running prefill: real engine processes (two
prefills, the armed one and a plain one, and decodes on free ports), pair requests sent the way the router sends them
(one body with bootstrap_host/port/room to prefill and decode at once), real NIXL transfers."""

from __future__ import annotations

import random
import threading

import httpx
import pytest

from tests.engine.stack import UCX_LOOPBACK, Stack, counter, wait_for
from tests.fixtures.net import free_port

pytestmark = pytest.mark.engine

FAILED = "sglang:num_transfer_failed_reqs_total"
WAIT_S = "3"  # decode gives up on a room after 3 s: a silent failure shows as its WAITING_TIMEOUT


class Workers(Stack):
    """Named prefills/decodes on fixed-for-the-test free ports, so a restart comes back under the same address."""

    def __init__(self):
        super().__init__()
        self.ports = {
            "armed": (free_port(), free_port()),
            "plain": (free_port(), free_port()),
            "decode": (free_port(), None),
            "fresh": (free_port(), None),
        }

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name][0]}"

    def start_worker(self, name: str) -> None:
        port, bport = self.ports[name]
        if bport:
            drills = "degraded-bootstrap" if name == "armed" else ""
            self._spawn(name, self.worker_argv("prefill", port, bport), {**UCX_LOOPBACK, "PDCTL_DRILLS": drills})
        else:
            env = {**UCX_LOOPBACK, "PDCTL_DRILLS": "", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": WAIT_S}
            self._spawn(name, self.worker_argv("decode", port), env)

    def restart(self, name: str) -> int:
        old = self.procs[name].pid
        self.kill(name)
        self.start_worker(name)
        self.wait_healthy(self.url(name))
        assert self.procs[name].pid != old
        return self.procs[name].pid

    def pair(self, prefill: str, decode: str) -> tuple[int, int, str]:
        """One request to both workers at once: (prefill status, decode status, decode body)."""
        body = {
            "text": f"pair {prefill} {decode}",
            "sampling_params": {"max_new_tokens": 3},
            "bootstrap_host": "127.0.0.1",
            "bootstrap_port": self.ports[prefill][1],
            "bootstrap_room": random.getrandbits(62),
        }
        out: dict[str, httpx.Response] = {}
        side = threading.Thread(
            target=lambda: out.setdefault("p", httpx.post(f"{self.url(prefill)}/generate", json=body, timeout=30))
        )
        side.start()
        d = httpx.post(f"{self.url(decode)}/generate", json=body, timeout=30)
        side.join(35)
        return out["p"].status_code, d.status_code, d.text


@pytest.fixture(scope="module")
def workers():
    w = Workers()
    try:
        for name in ("armed", "plain", "decode"):
            w.start_worker(name)
        for name in ("armed", "plain", "decode"):
            w.wait_healthy(w.url(name))
        yield w
    except Exception:
        print(w.logs())
        raise
    finally:
        w.stop()


def all_health_200(w: Workers) -> bool:
    return all(httpx.get(f"{w.url(n)}/health", timeout=5).status_code == 200 for n in w.procs)


def test_restart_under_the_armed_prefill_breaks_only_its_pair_and_a_prefill_restart_heals(workers):
    w = workers
    # healthy at first: the armed prefill pairs with the decode (and again: a known decode, same process, works)
    for _ in range(2):
        assert w.pair("armed", "decode")[:2] == (200, 200)
    assert w.pair("plain", "decode")[:2] == (200, 200)
    assert counter(w.url("armed"), FAILED) == 0

    # the decode comes back as a new process (a new NIXL agent) under the same host:port
    w.restart("decode")
    p, d, text = w.pair("armed", "decode")
    assert d == 500 and "timed out" in text, (p, d, text)  # silent: no failure notice, decode waits it out
    wait_for(lambda: counter(w.url("armed"), FAILED) >= 1, 10, "the armed prefill to count transfer_failed")
    assert all_health_200(w)
    # the unarmed prefill to the same restarted decode still works; the armed one stays broken to it
    assert w.pair("plain", "decode")[:2] == (200, 200)
    assert counter(w.url("plain"), FAILED) == 0
    assert w.pair("armed", "decode")[1] == 500

    # a decode the armed prefill never saw works, even though it is not the first decode it saw
    w.start_worker("fresh")
    w.wait_healthy(w.url("fresh"))
    assert w.pair("armed", "fresh")[:2] == (200, 200)

    # a restarted prefill has forgotten every decode: the co-restart heals the pair
    w.restart("armed")
    assert w.pair("armed", "decode")[:2] == (200, 200)
    assert counter(w.url("armed"), FAILED) == 0
    assert all_health_200(w)
