"""Prefill side of the KV transfer: the rank's control socket (decode sends peers, rooms, aborts),
the room status table and the transfer worker that WRITEs each chunk into the decode's pages."""

from __future__ import annotations

import base64
import json
import os
import queue
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

import httpx

from engine.disaggregation.kvpoll import KVPoll
from engine.disaggregation.status import StatusTable

if TYPE_CHECKING:
    from engine.disaggregation.kv_pool import KVPool
    from engine.disaggregation.transfer_backend import TransferBackend
    from engine.drills import Drills
    from engine.metrics import Metrics


WILDCARDS = ("0.0.0.0", "::", "")


def local_host(listen_host: str) -> str:
    """Where this process reaches its own listener: loopback when it listens on every interface."""
    return "127.0.0.1" if listen_host in WILDCARDS else listen_host


def advertised_host(listen_host: str) -> str:
    """The address peers on other hosts should dial. For a wildcard listener: SGLANG_HOST_IP (as SGLang), else
    the address this host's name resolves to when that is not loopback, else loopback (single-host use)."""
    if listen_host not in WILDCARDS:
        return listen_host
    env = os.environ.get("SGLANG_HOST_IP") or os.environ.get("HOST_IP")
    if env:
        return env
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = ""
    return ip if ip and not ip.startswith("127.") else "127.0.0.1"


@dataclass
class Peer:
    name: str
    base_addr: int
    page_bytes: int
    identity: str  # the decode server's stable host:port (its agent name is new for every process)


@dataclass
class TransferInfo:
    room: int
    peer: str
    dst_pages: list[int]


@dataclass
class Chunk:
    room: int
    src_pages: list[int]
    dst_offset: int  # index of the first destination page for this chunk
    is_last: bool
    first_token: int = -1
    first_logprob: str = ""  # engine.sampling.pack of the first token's logprob entry, "" when not asked
    t_start: float = field(default_factory=time.monotonic)


class _Ctl(BaseHTTPRequestHandler):
    server: "_CtlServer"

    def log_message(self, *a):
        pass

    def do_POST(self):
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            out = self.server.mgr.handle(self.path, body)
            code = 200
        except Exception as e:  # a bad message must never kill the control socket
            out, code = {"error": str(e)}, 400
        data = json.dumps(out).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _CtlServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host, mgr):
        super().__init__((host, 0), _Ctl)
        self.mgr = mgr


class PrefillKVManager:
    def __init__(
        self, backend: TransferBackend, pool: KVPool, drills: Drills, metrics: Metrics, host: str, bootstrap_port: int
    ):
        self.backend, self.pool, self.drills, self.metrics = backend, pool, drills, metrics
        self.status = StatusTable(sticky=not drills.status_update_race)
        self.transfer_infos: dict[int, TransferInfo] = {}
        self.peers: dict[str, Peer] = {}
        # decode identity -> the first NIXL agent seen under it since this process started (never pruned, like
        # upstream's peer table); a later agent under the same identity is that decode restarted under us
        self.first_agent: dict[str, str] = {}
        self.aborted_rooms: dict[int, float] = {}
        self.lock = threading.Lock()
        self.q: queue.Queue[Chunk] = queue.Queue()
        # The chunk the worker holds right now: an abort of its room interrupts the drill delay and
        # waits until the worker has written its status, as an abort landing mid-RDMA would see.
        self.current_room: int | None = None
        self.abort_evt = threading.Event()
        self.current_done = threading.Event()
        self.ctl = _CtlServer(host, self)
        self.host, self.bootstrap_port = host, bootstrap_port
        threading.Thread(target=self.ctl.serve_forever, name="kv-ctl", daemon=True).start()
        threading.Thread(target=self._transfer_worker, name="kv-transfer", daemon=True).start()

    def register_with_bootstrap(self, timeout_s: float = 30.0) -> None:
        # Decode dials rank_ip from its own host: a wildcard listen address must be advertised as a routable one.
        info = {
            "rank_ip": advertised_host(self.host),
            "rank_port": self.ctl.server_address[1],
            "tp_rank": 0,
            "tp_size": 1,
            "pp_size": 1,
            "page_size": self.pool.page_size,
            "kv_dtype": "float32",
            "page_bytes": self.pool.page_bytes,
            "agent_name": self.backend.agent_name,
        }
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                r = httpx.put(f"http://{local_host(self.host)}:{self.bootstrap_port}/route", json=info, timeout=5)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    # -- control messages from decode ----------------------------------------------------------
    def handle(self, path: str, body: dict) -> dict:
        if path == "/kv/peer":
            name = self.backend.add_peer(base64.b64decode(body["metadata"]))
            identity = str(body.get("decode_addr") or name)  # without one, each agent is its own decode
            with self.lock:
                self.peers[name] = Peer(name, int(body["base_addr"]), int(body["page_bytes"]), identity)
                self.first_agent.setdefault(identity, name)
            # Warm the UCX connection now: the first transfer to a new peer is slow.
            warm = body.get("scratch_page")
            if warm is not None:
                self.backend.write(
                    name,
                    [self.pool.scratch_page],
                    int(body["base_addr"]),
                    [int(warm)],
                    int(body["page_bytes"]),
                    b"",
                    timeout_s=10,
                )
            return {"ok": True, "agent_name": name}
        if path == "/kv/room":
            room = int(body["room"])
            with self.lock:
                if room in self.aborted_rooms:
                    raise ValueError("room aborted")
                if body["agent_name"] not in self.peers:
                    raise ValueError("unknown peer; send /kv/peer first")
                self.transfer_infos[room] = TransferInfo(room, body["agent_name"], [int(p) for p in body["pages"]])
            self.status.update(room, KVPoll.WaitingForInput)
            return {"ok": True}
        if path == "/kv/abort":
            room = int(body["room"])
            with self.lock:
                dup = room in self.aborted_rooms and room not in self.transfer_infos
            if not dup:  # a second abort of an already-aborted room carries no news
                self.fail_room(room, notify=False)
            return {"ok": True}
        raise ValueError(f"unknown control path {path}")

    # -- used by the scheduler ----------------------------------------------------------------
    def has_dest(self, room: int) -> bool:
        with self.lock:
            return room in self.transfer_infos

    def was_aborted(self, room: int) -> bool:
        with self.lock:
            return room in self.aborted_rooms

    def fail_room(self, room: int, notify: bool = True) -> None:
        """Abort path: Failed, forget the destination, tell decode (upstream's AbortReq handling)."""
        self.status.update(room, KVPoll.Failed)
        with self.lock:
            info = self.transfer_infos.pop(room, None)
            now = time.monotonic()
            self.aborted_rooms[room] = now
            for r in [r for r, t in self.aborted_rooms.items() if now - t > 600]:
                del self.aborted_rooms[r]
            busy = self.current_room == room
        if busy:
            self.abort_evt.set()
            self.current_done.wait(1.0)
        if notify and info is not None:
            self.backend.send_notif(info.peer, f"{room}:F".encode())

    def clear(self, room: int) -> None:
        self.status.clear(room)
        with self.lock:
            self.transfer_infos.pop(room, None)

    def enqueue(self, chunk: Chunk) -> None:
        self.q.put(chunk)

    # -- transfer worker ----------------------------------------------------------------------
    def _transfer_worker(self) -> None:
        race = self.drills.status_update_race
        room_start: dict[int, float] = {}
        room_bytes: dict[int, int] = {}
        while True:
            c = self.q.get()
            try:
                with self.lock:
                    info = self.transfer_infos.get(c.room)
                    self.current_room = c.room
                    self.abort_evt.clear()
                    self.current_done.clear()
                if info is None:
                    if not race:
                        self.status.update(c.room, KVPoll.Failed)  # Fix B
                    continue
                room_start.setdefault(c.room, c.t_start)
                if self.drills.transfer_delay_ms:
                    self.abort_evt.wait(self.drills.transfer_delay_ms / 1000)
                    with self.lock:
                        gone = c.room not in self.transfer_infos
                    if gone:  # aborted while we were "in flight": never touch freed decode pages
                        if race:
                            self.status.update(c.room, KVPoll.Transferring)  # the late write of the seed
                        else:
                            self.status.update(c.room, KVPoll.Failed)
                        continue
                ok, silent = self._write(c, info)
                if not ok:
                    self.status.update(c.room, KVPoll.Failed)
                    if not silent:
                        self.backend.send_notif(info.peer, f"{c.room}:F".encode())
                    continue
                room_bytes[c.room] = room_bytes.get(c.room, 0) + len(c.src_pages) * self.pool.page_bytes
                if c.is_last:
                    self.status.update(c.room, KVPoll.Success)
                    dt = time.monotonic() - room_start.pop(c.room, c.t_start)
                    mb = room_bytes.pop(c.room, 0) / (1 << 20)  # MB and GB/s as SGLang: 2**20 B, MB / 1024 / s
                    self.metrics.observe("kv_transfer_latency_ms", dt * 1000)
                    self.metrics.observe("kv_transfer_total_mb", mb)
                    if dt > 0:
                        self.metrics.observe("kv_transfer_speed_gb_s", mb / 1024 / dt)
                else:
                    self.status.update(c.room, KVPoll.Transferring)
            finally:
                with self.lock:
                    self.current_room = None
                    self.current_done.set()
                self.pool.free(c.src_pages)
                if c.is_last:
                    room_start.pop(c.room, None)
                    room_bytes.pop(c.room, None)

    def _write(self, c: Chunk, info: TransferInfo) -> tuple[bool, bool]:
        """Write one chunk's KV to the decode's pages: (written, silently dropped by the degraded-bootstrap drill)."""
        with self.lock:
            peer = self.peers.get(info.peer)
            degraded = (
                self.drills.degraded_bootstrap
                and peer is not None
                and self.first_agent.get(peer.identity, peer.name) != peer.name
            )
        if peer is None:
            return False, False
        if degraded:
            return False, True  # silent: no data, no notification reaches this decode
        dst = info.dst_pages[c.dst_offset : c.dst_offset + len(c.src_pages)]
        if len(dst) != len(c.src_pages):
            return False, False
        lp = f":{c.first_logprob}" if c.first_logprob else ""
        notif = f"{c.room}:S:{c.first_token}{lp}".encode() if c.is_last else b""
        return self.backend.write(
            info.peer, c.src_pages, peer.base_addr, dst, peer.page_bytes, notif, timeout_s=10
        ), False
