"""The mooncake transfer backend (SGLang's default): real prefill + decode launched WITHOUT a transfer-backend flag,
the real Mooncake TransferEngine moving the KV over loopback, the real sglang-router in front."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading

import httpx
import pytest

from engine.model import TinyLM
from engine.tokenizer import ByteTokenizer
from tests.engine.stack import ROOT, Stack, counter, mc_port_range, metric, wait_for

pytestmark = pytest.mark.engine

FAILED = "sglang:num_transfer_failed_reqs_total"
INFLIGHT = "sglang:num_prefill_inflight_queue_reqs"
LONG = "the quick brown fox " * 100  # ~2000 tokens: 4 chunks of 512, each chunk a Mooncake batch write


def greedy(text: str, n: int) -> str:
    tok = ByteTokenizer()
    return tok.decode(TinyLM().generate_greedy(tok.encode(text), n))


def generate(url: str, text: str, n: int, timeout: float = 60) -> httpx.Response:
    return httpx.post(
        f"{url}/generate",
        timeout=timeout,
        json={"text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0}},
    )


def log_of(s: Stack, name: str) -> str:
    with open(os.path.join(s.logdir, f"{name}.log"), errors="replace") as f:
        return f.read()


BOOKKEEPING = r"""
import json
import logging
logging.basicConfig(level=logging.INFO)
from engine.disaggregation.kv_pool import KVPool
from engine.disaggregation.mooncake_backend import MooncakeBackend
a, b = KVPool(2, 16, 4, 8), KVPool(2, 16, 4, 8)
a.pool.fill_(3.0)
me, peer = MooncakeBackend(a, "127.0.0.1", "127.0.0.1"), MooncakeBackend(b, "127.0.0.1", "127.0.0.1")
sid = me.add_peer(peer.metadata())
out = {"sid": sid, "peer_sid": peer.session_id, "me_sid": me.session_id}
out["ok"] = me.write(sid, [0], b.base_addr, [1], b.page_bytes, b"7:S:42")
out["page1"] = float(b.pool[1].mean())
out["bad"] = me.write(sid, [0], b.base_addr + (1 << 40), [1], b.page_bytes)  # outside the peer's registered pool
out["failed_after_bad"] = sorted(me.failed_sessions)
out["good_while_failed"] = me.write(sid, [2], b.base_addr, [2], b.page_bytes)
out["page2_while_failed"] = float(b.pool[2].mean())
me.add_peer(peer.metadata())  # the decode registers again
out["failed_after_register"] = sorted(me.failed_sessions)
out["good"] = me.write(sid, [2], b.base_addr, [2], b.page_bytes)
out["page2"] = float(b.pool[2].mean())
import time
for _ in range(100):
    n = peer.poll_notifs()
    if n:
        break
    time.sleep(0.01)
out["notifs"] = [[p, m.decode()] for p, m in n]
# the prefill side with SGLang's failed-session probe (0.2 s here): a session that answers send_probe is lifted
from prometheus_client import CollectorRegistry
reg = CollectorRegistry()
probing = MooncakeBackend(a, "127.0.0.1", "127.0.0.1", registry=reg)
probing.add_peer(peer.metadata())
out["probing_bad"] = probing.write(sid, [0], b.base_addr + (1 << 40), [1], b.page_bytes)
out["probing_failed"] = sorted(probing.failed_sessions)
for _ in range(100):
    if not probing.failed_sessions:
        break
    time.sleep(0.05)
out["probing_failed_later"] = sorted(probing.failed_sessions)
out["recoveries"] = reg.get_sample_value("sglang:failed_session_recoveries_total")
out["probing_good"] = probing.write(sid, [3], b.base_addr, [3], b.page_bytes)
print("RESULT " + json.dumps(out), flush=True)
"""


def test_failed_session_fails_fast_until_it_registers_again_or_the_probe_lifts_it():
    """SGLang's failed_sessions on real TransferEngines (one process, loopback): one failed write marks the
    session; a correct write to it then fails without moving a byte; a new registration clears it; on the
    prefill side the failed-session probe lifts a session that answers send_probe."""
    env = {**os.environ, "PYTHONPATH": ROOT, **mc_port_range(6), "SGLANG_FAILED_SESSION_PROBE_INTERVAL_S": "0.2"}
    p = subprocess.run(
        [sys.executable, "-c", BOOKKEEPING], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, p.stdout + p.stderr[-3000:]
    out = json.loads(line[7:])
    assert out["sid"] == out["peer_sid"] and re.fullmatch(r"127\.0\.0\.1:\d+", out["sid"])
    assert out["ok"] is True and out["page1"] == 3.0
    assert out["notifs"] == [[out["me_sid"], "7:S:42"]]  # after the data, over ZMQ, from the writer's session
    assert out["bad"] is False and out["failed_after_bad"] == [out["sid"]]
    assert out["good_while_failed"] is False and out["page2_while_failed"] == 0.0
    assert out["failed_after_register"] == []
    assert out["good"] is True and out["page2"] == 3.0
    # SGLang 0.5.23's probe: the session answers send_probe, so it is lifted and counted as a recovery
    assert out["probing_bad"] is False and out["probing_failed"] == [out["sid"]]
    assert out["probing_failed_later"] == [] and out["recoveries"] == 1.0 and out["probing_good"] is True
    assert f"Session {out['sid']} recovered via probe; un-blacklisted" in p.stderr
    assert f"Session {out['sid']} failed." in p.stderr
    assert f"remote mooncake session {out['sid']} is not alive" in p.stderr


@pytest.fixture(scope="module")
def mc():
    # backend=None: SGLang's own minimal PD launch line, no --disaggregation-transfer-backend at all
    with Stack(backend=None, drills="transfer-delay-ms=300").running() as s:
        yield s


def test_minimal_launch_line_runs_mooncake(mc):
    for name, url in (("prefill", mc.prefill), ("decode", mc.decode)):
        with open(f"/proc/{mc.procs[name].pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        assert b"--disaggregation-transfer-backend" not in argv
        assert httpx.get(f"{url}/server_info").json()["disaggregation_transfer_backend"] == "mooncake"
        # a P2PHANDSHAKE session id host:rpc_port, the rpc port from this process's MC range
        m = re.search(r"Mooncake session 127\.0\.0\.1:(\d+), notifications on tcp://127\.0\.0\.1:\d+", log_of(mc, name))
        assert m, log_of(mc, name)[-2000:]
    # SGLang's failed-session probe counter, on the sending side only
    assert re.search(r"^sglang:failed_session_recoveries_total 0\.0$", httpx.get(f"{mc.prefill}/metrics").text, re.M)
    assert "failed_session_recoveries" not in httpx.get(f"{mc.decode}/metrics").text


def test_multi_chunk_prompt_through_router_matches_reference(mc):
    count0 = counter(mc.prefill, "sglang:kv_transfer_total_mb_count")
    mb0 = counter(mc.prefill, "sglang:kv_transfer_total_mb_sum")
    r = generate(mc.router, LONG, 8)
    assert r.status_code == 200, r.text
    # decode continues from the KV it received (a mooncake decode never recomputes the prompt)
    assert r.json()["text"] == greedy(LONG, 8)
    r = httpx.post(
        f"{mc.router}/v1/chat/completions",
        timeout=60,
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "hello, mooncake"}],
            "max_tokens": 12,
            "temperature": 0,
        },
    )
    assert r.status_code == 200, r.text
    tok = ByteTokenizer()
    prompt = tok.apply_chat_template([{"role": "user", "content": "hello, mooncake"}])
    assert r.json()["choices"][0]["message"]["content"] == greedy(prompt, 12)
    wait_for(lambda: metric(mc.prefill, "sglang:kv_transfer_total_mb_count") >= count0 + 2, 5, "transfer histograms")
    # the bytes really crossed: at least the long prompt's KV (2000 tokens of every layer's K and V)
    info = httpx.get(f"{mc.prefill}/server_info").json()
    assert info["disaggregation_transfer_backend"] == "mooncake"
    cfg = TinyLM().cfg
    prompt_kv_mb = len(ByteTokenizer().encode(LONG)) * cfg.n_layers * 2 * cfg.kv_dim * 4 / 2**20
    assert metric(mc.prefill, "sglang:kv_transfer_total_mb_sum") - mb0 >= prompt_kv_mb
    assert counter(mc.prefill, FAILED) == 0


def pair(s: Stack, text: str, n: int, out: list) -> None:
    """One request to prefill and decode at once, as the router sends it; appends (prefill, decode) outcomes."""
    body = {
        "text": text,
        "sampling_params": {"max_new_tokens": n},
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": s.bp,
        "bootstrap_room": random.getrandbits(62),
    }
    res: dict = {}

    def send(role, url):
        try:
            res[role] = httpx.post(f"{url}/generate", json=body, timeout=30).status_code
        except httpx.HTTPError as e:  # the decode dies under its request
            res[role] = type(e).__name__

    side = threading.Thread(target=send, args=("prefill", s.prefill))
    side.start()
    send("decode", s.decode)
    side.join(35)
    out.append((res.get("prefill"), res.get("decode")))


def test_killed_decode_fails_writes_and_marks_its_session(mc):
    """Last in the module: kills the decode under two rooms in their transfer window. The next write to the dead
    session fails, its room is Failed and counted (num_transfer_failed_reqs); the session goes into
    failed_sessions, so the other room's writes fail without a transfer; a decode that registers serves again."""
    before = counter(mc.prefill, FAILED)
    results: list = []
    ths = [threading.Thread(target=pair, args=(mc, LONG + str(i), 4, results)) for i in range(2)]
    for t in ths:
        t.start()
    wait_for(lambda: metric(mc.prefill, INFLIGHT) >= 1, 20, "a room in the transfer window", 0.02)
    mc.kill("decode")
    for t in ths:
        t.join(40)
    assert not any(t.is_alive() for t in ths), "a client hung"
    assert sorted(p for p, _ in results) == [500, 500], results  # prefill answers each failed room at once
    assert counter(mc.prefill, FAILED) == before + 2
    assert metric(mc.prefill, INFLIGHT) == 0
    log = log_of(mc, "prefill")
    sid = re.search(r"Session (127\.0\.0\.1:\d+) failed\.", log)
    assert sid, log[-3000:]
    assert len(re.findall(r"Session \S+ failed\.", log)) == 1  # one real failure marks the session ...
    # ... and later writes to it fail at once, as SGLang's transfer worker does
    assert f"remote mooncake session {sid.group(1)} is not alive" in log
    assert httpx.get(f"{mc.prefill}/health").status_code == 200
    # a new decode registers (add_peer clears a failed session of its id): the pair serves again
    mc.start_decode()
    mc.wait_healthy(mc.decode)
    mc.wait_ready()
    r = wait_for(
        lambda: (lambda r: r if r.status_code == 200 else None)(generate(mc.router, "again", 6, 30)),
        20,
        "the pair to serve after the decode came back",
    )
    assert r.json()["text"] == greedy("again", 6)
