"""Decode side of the KV transfer: resolve the prefill rank through the bootstrap server, send this
process's NIXL identity (and its server's host:port) once per prefill rank and each room's
destination pages, collect notifications (S = success + first token, F = failed), heartbeat the
bootstrap server."""

from __future__ import annotations

import base64
import http.client
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from engine.disaggregation.kvpoll import KVPoll
from engine.disaggregation.status import StatusTable

if TYPE_CHECKING:
    from engine.disaggregation.kv_pool import KVPool
    from engine.disaggregation.transfer_backend import TransferBackend
    from engine.metrics import Metrics


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class _Resp:
    """What the bootstrap path reads of an answer: status_code, text, json(), raise_for_status()."""

    __slots__ = ("status_code", "text")

    def __init__(self, status_code: int, text: str):
        self.status_code, self.text = status_code, text

    def json(self):
        return json.loads(self.text)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise httpx.HTTPError(f"HTTP {self.status_code}: {self.text[:200]}")


def _call(method: str, url: str, body: dict | None = None, timeout: float = 5.0) -> _Resp:
    """One request on its own connection (the prefill's control server speaks HTTP/1.0 and closes each one; so did
    every httpx call to it). http.client costs the GIL a fraction of httpx's per-request Python work, which at
    tens of rooms a second the scheduler thread waited for. Connection errors raise httpx.TransportError, as
    httpx did, so the callers' handling is unchanged."""
    u = urlsplit(url)
    if not u.hostname:
        raise httpx.TransportError(f"{method} {url}: no host in the URL")
    data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        conn.request(
            method, u.path or "/", body=data, headers={"Content-Type": "application/json"} if data is not None else {}
        )
        r = conn.getresponse()
        return _Resp(r.status, r.read().decode("utf-8", "replace"))
    except (OSError, http.client.HTTPException) as e:
        raise httpx.TransportError(f"{method} {url}: {e!r}") from e
    finally:
        conn.close()


class DecodeKVManager:
    def __init__(self, backend: TransferBackend, pool: KVPool, metrics: Metrics, identity: str = ""):
        self.backend, self.pool, self.metrics = backend, pool, metrics
        self.identity = identity  # this server's stable host:port, sent with /kv/peer (the agent name is per process)
        self.status = StatusTable(sticky=True)
        self.first_token: dict[int, int] = {}
        self.first_logprob: dict[int, str] = {}
        self.room_addr: dict[int, str] = {}  # room -> bootstrap "host:port"
        self.room_rank: dict[int, str] = {}  # room -> prefill rank url
        self.prefill_info: dict[str, dict] = {}  # bootstrap addr -> /route answer
        self.registered: set[str] = set()  # prefill rank urls that know our NIXL identity
        self.hb_fail: dict[str, int] = {}
        self.lock = threading.Lock()
        self.pool_exec = ThreadPoolExecutor(4, thread_name_prefix="kv-recv")
        self.bootstrap_timeout = env_float("SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT", 300)
        self.hb_interval = env_float("SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL", 5)
        self.hb_max = int(env_float("SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE", 2))
        threading.Thread(target=self._heartbeat, name="kv-heartbeat", daemon=True).start()

    # -- per room -----------------------------------------------------------------------------
    def start_room(self, room: int, host: str, port: int, pages: list[int]) -> None:
        """Bootstrapping -> WaitingForInput (destination sent) or Failed; runs in a worker thread."""
        self.status.update(room, KVPoll.Bootstrapping)
        addr = f"{host}:{port}"
        with self.lock:
            self.room_addr[room] = addr
        self.pool_exec.submit(self._bootstrap_room, room, addr, pages)

    def _bootstrap_room(self, room: int, addr: str, pages: list[int]) -> None:
        t0 = time.monotonic()
        deadline = t0 + self.bootstrap_timeout
        while True:
            if self.status.get(room) in (None, KVPoll.Failed):
                return  # aborted meanwhile
            try:
                rank = self._rank_url(addr)
                if rank not in self.registered:
                    r = _call(
                        "POST",
                        f"{rank}/kv/peer",
                        {
                            "metadata": base64.b64encode(self.backend.metadata()).decode(),
                            "base_addr": self.pool.base_addr,
                            "page_bytes": self.pool.page_bytes,
                            "scratch_page": self.pool.scratch_page,
                            "decode_addr": self.identity,
                        },
                    )
                    r.raise_for_status()
                    with self.lock:
                        self.registered.add(rank)
                r = _call(
                    "POST", f"{rank}/kv/room", {"room": room, "agent_name": self.backend.agent_name, "pages": pages}
                )
                if r.status_code == 400 and "room aborted" in r.text:
                    self.status.update(room, KVPoll.Failed)
                    return
                if r.status_code == 400 and "unknown peer" in r.text:
                    with self.lock:  # prefill restarted: register again
                        self.registered.discard(rank)
                    raise httpx.HTTPError("peer unknown at prefill")
                r.raise_for_status()
                with self.lock:
                    self.room_rank[room] = rank
                self.status.update(room, KVPoll.WaitingForInput)
                self.metrics.observe("kv_transfer_bootstrap_ms", (time.monotonic() - t0) * 1000)
                return
            except (httpx.HTTPError, KeyError, ValueError):
                with self.lock:  # the prefill may have restarted on a new rank port: resolve again
                    info = self.prefill_info.pop(addr, None)
                    if info:
                        self.registered.discard(f"http://{info['rank_ip']}:{info['rank_port']}")
                if time.monotonic() > deadline:
                    if self.status.update(room, KVPoll.Failed) is not None:
                        self.metrics.inc("num_bootstrap_failed_reqs")
                    return
                time.sleep(0.2)

    def _rank_url(self, addr: str) -> str:
        with self.lock:
            info = self.prefill_info.get(addr)
        if info is None:
            r = _call("GET", f"http://{addr}/route")
            if r.status_code != 200:
                raise httpx.HTTPError(f"bootstrap {addr}: {r.status_code} {r.text}")
            info = r.json()
            with self.lock:
                self.prefill_info[addr] = info
        return f"http://{info['rank_ip']}:{info['rank_port']}"

    def abort_room(self, room: int) -> None:
        """Fail locally and tell prefill (upstream's decode-side ABORT)."""
        self.status.update(room, KVPoll.Failed)
        with self.lock:
            rank = self.room_rank.get(room)
        if rank:
            self.pool_exec.submit(self._send_abort, rank, room)

    def _send_abort(self, rank: str, room: int) -> None:
        try:
            _call("POST", f"{rank}/kv/abort", {"room": room}, timeout=2)
        except httpx.HTTPError:
            pass

    def poll(self) -> None:
        """Apply notifications from prefill: '<room>:S:<first_token>[:<packed logprob>]' or '<room>:F'."""
        for _peer, msg in self.backend.poll_notifs():
            try:
                parts = msg.decode().split(":")
                room = int(parts[0])
            except (ValueError, UnicodeDecodeError):
                continue
            if parts[1] == "S":
                if self.status.get(room) not in (None, KVPoll.Failed):
                    self.first_token[room] = int(parts[2])
                    self.first_logprob[room] = parts[3] if len(parts) > 3 else ""
                    self.status.update(room, KVPoll.Success)
            elif parts[1] == "F":
                self.status.update(room, KVPoll.Failed)

    def clear(self, room: int) -> None:
        self.status.clear(room)
        with self.lock:
            self.first_token.pop(room, None)
            self.first_logprob.pop(room, None)
            self.room_addr.pop(room, None)
            self.room_rank.pop(room, None)

    # -- heartbeat ----------------------------------------------------------------------------
    def _heartbeat(self) -> None:
        while True:
            time.sleep(self.hb_interval)
            with self.lock:
                addrs = set(self.room_addr.values()) | set(self.prefill_info)
            for addr in addrs:
                try:
                    ok = _call("GET", f"http://{addr}/health", timeout=2).status_code == 200
                except httpx.HTTPError:
                    ok = False
                n = 0 if ok else self.hb_fail.get(addr, 0) + 1
                self.hb_fail[addr] = n
                if n >= self.hb_max:
                    self._drop(addr)

    def _drop(self, addr: str) -> None:
        """Prefill unreachable: forget its info and fail every room of it not yet Success."""
        with self.lock:
            info = self.prefill_info.pop(addr, None)
            if info:
                self.registered.discard(f"http://{info['rank_ip']}:{info['rank_port']}")
            rooms = [r for r, a in self.room_addr.items() if a == addr]
        for r in rooms:
            st = self.status.get(r)
            if st != KVPoll.Success:
                self.status.update(r, KVPoll.Failed)
                if st == KVPoll.Bootstrapping:
                    # the handshake never completed: SGLang's decode counts a Failed poll in its prealloc
                    # queue as a bootstrap failure (and final-health reads that counter)
                    self.metrics.inc("num_bootstrap_failed_reqs")
