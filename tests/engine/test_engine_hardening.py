"""The bundled engine under bad input and faults (issue 9): impossible bootstrap ports are 400s, a bootstrap to an
unreachable prefill is counted in num_bootstrap_failed_reqs_total, clients that go away stop their work, and the
NIXL/UCX sockets stay on loopback. Real prefill + decode + sglang-router processes on free loopback ports."""

from __future__ import annotations

import concurrent.futures as cf
import ipaddress
import os
import random
import time

import httpx
import pytest

from tests.engine.stack import Stack, counter, free_port, metric, server_pids, wait_for

pytestmark = pytest.mark.engine

RUNNING = "sglang:num_running_reqs"
BOOT_FAILED = "sglang:num_bootstrap_failed_reqs_total"


@pytest.fixture(scope="module")
def stack():
    # a fast heartbeat so that an unreachable prefill fails a room in about a second, not 10 s
    with Stack(decode_env={"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "0.3"}).running() as s:
        yield s


def gen_body(stack, **kw):
    return {
        "text": "hello",
        "sampling_params": {"max_new_tokens": 4},
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": stack.bp,
        "bootstrap_room": random.randrange(1 << 62),
        **kw,
    }


@pytest.mark.parametrize("port", [70000, 0, -1, "8998", 1.5, True])
def test_impossible_bootstrap_port_is_400_naming_the_field(stack, port):
    for url in (stack.decode, stack.prefill):
        r = httpx.post(f"{url}/generate", json=gen_body(stack, bootstrap_port=port), timeout=10)
        assert r.status_code == 400, r.text
        assert "bootstrap_port" in r.json()["error"]["message"]  # /generate's error shape, as SGLang's
    r = httpx.post(
        f"{stack.decode}/v1/completions",
        timeout=10,
        json={
            "prompt": "x",
            "max_tokens": 2,
            "bootstrap_host": "127.0.0.1",
            "bootstrap_room": 1,
            "bootstrap_port": 70000,
        },
    )
    assert r.status_code == 400 and "bootstrap_port" in r.json()["message"]
    assert httpx.get(f"{stack.decode}/health", timeout=5).status_code == 200


def test_bootstrap_to_unreachable_prefill_is_counted(stack):
    before = counter(stack.decode, BOOT_FAILED)
    dead = free_port()  # nothing listens there
    t0 = time.monotonic()
    r = httpx.post(f"{stack.decode}/generate", json=gen_body(stack, bootstrap_port=dead), timeout=30)
    assert r.status_code == 500, r.text
    assert "bootstrap" in r.text
    assert time.monotonic() - t0 < 15
    wait_for(lambda: counter(stack.decode, BOOT_FAILED) == before + 1, 5, "bootstrap_failed counted once")
    assert metric(stack.decode, RUNNING) == 0


def _timed_out(url, body, stream: bool, timeout: float) -> bool:
    try:
        if stream:  # a streaming client's read timeout never fires while tokens flow: it gives up by the clock
            deadline = time.monotonic() + timeout
            with httpx.stream("POST", url, json={**body, "stream": True}, timeout=timeout) as r:
                for line in r.iter_lines():
                    if time.monotonic() > deadline:
                        return True  # leaving the block closes the connection, as a client that gave up
                    if line == "data: [DONE]":
                        return False
        else:
            httpx.post(url, json=body, timeout=timeout)
    except httpx.TimeoutException:
        return True
    return False


def test_clients_that_time_out_stop_their_work(stack):
    """N clients through the router give up after 1.5 s (half streaming): decode must drop their requests within a
    few seconds, not finish generating 4000 tokens each for nobody."""
    n = 16
    body = {"model": "tiny", "messages": [{"role": "user", "content": "go on"}], "max_tokens": 4000}
    url = f"{stack.router}/v1/chat/completions"
    peak = [0.0]

    def watch():
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            peak[0] = max(peak[0], metric(stack.decode, RUNNING))
            time.sleep(0.1)

    with cf.ThreadPoolExecutor(n + 1) as ex:
        w = ex.submit(watch)
        outs = list(ex.map(lambda i: _timed_out(url, body, i % 2 == 0, 1.5), range(n)))
        w.result()
    assert all(outs), "every client should have timed out (the requests are long)"
    assert peak[0] >= 2, f"decode never ran the requests (peak num_running_reqs {peak[0]})"
    t0 = time.monotonic()
    wait_for(
        lambda: metric(stack.decode, RUNNING) == 0 and metric(stack.decode, "sglang:num_queue_reqs") == 0,
        6,
        "decode num_running_reqs back to 0 after the clients left",
        interval=0.2,
    )
    gone_after = time.monotonic() - t0
    assert metric(stack.prefill, "sglang:num_prefill_inflight_queue_reqs") == 0
    assert metric(stack.decode, "sglang:num_aborted_requests_total") >= n
    # the engine still serves
    r = httpx.post(url, json={**body, "max_tokens": 4}, timeout=30)
    assert r.status_code == 200, r.text
    assert gone_after < 6


def _tcp_sockets(pid: int) -> list[tuple[str, int]]:
    """(local address, port) of every TCP socket open in process `pid`, read from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table, v6 in (("tcp", False), ("tcp6", True)):
        with open(f"/proc/{pid}/net/{table}") as fh:
            for line in fh.readlines()[1:]:
                f = line.split()
                if f[9] not in inodes:
                    continue
                hexaddr, hexport = f[1].split(":")
                raw = bytes.fromhex(hexaddr)
                # /proc prints each 32-bit word in host (little-endian) order
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                addr = ipaddress.IPv6Address(raw) if v6 else ipaddress.IPv4Address(raw)
                out.append((str(addr), int(hexport, 16)))
    return out


def test_nixl_ucx_sockets_stay_on_loopback(stack):
    r = httpx.post(
        f"{stack.router}/generate", json={"text": "over the wire", "sampling_params": {"max_new_tokens": 4}}, timeout=30
    )
    assert r.status_code == 200, r.text
    assert metric(stack.prefill, "sglang:kv_transfer_latency_ms_count") >= 1  # a real NIXL transfer happened
    for name in ("prefill", "decode"):
        pids = server_pids(stack.procs[name].pid)
        assert len(pids) == 2, pids
        http, sched = (_tcp_sockets(p) for p in pids)
        assert any(port == (stack.pp if name == "prefill" else stack.dp) for _, port in http), http
        # the scheduler process holds the UCX listener and its connections (and the prefill's bootstrap port)
        assert len(sched) >= 2, sched
        socks = http + sched
        outside = [
            (a, p)
            for a, p in socks
            if not (ip := ipaddress.ip_address(a)).is_loopback
            and not (isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped and ip.ipv4_mapped.is_loopback)
        ]
        assert not outside, f"{name} has TCP sockets off loopback: {outside}"
