"""Mooncake transfer backend (SGLang's default): the real Mooncake TransferEngine, DRAM to DRAM.

Shaped like SGLang's mooncake backend: P2PHANDSHAKE metadata (no etcd), one session id per process
(`host:rpc_port`), synchronous batch writes (0 ok, negative failed). Mooncake has no notifications, so the
success/failure messages travel over ZMQ, as SGLang's do: each process binds a PULL socket on its --host
and peers PUSH to it. Prefill keeps SGLang's session bookkeeping: a write that fails puts the session in
`failed_sessions`, later writes to it fail at once without touching the wire, and the session is cleared
only when that decode registers again (`add_peer`, SGLang's KVArgs registration).

Mooncake's own listeners (the handshake RPC port and the TCP data port) bind every address and take their
ports from MC_MIN_RPC_PORT..MC_MAX_RPC_PORT (default 15000..17000; a range reaching 32768 or more is ignored)."""
from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict

import zmq

from engine.disaggregation.kv_pool import KVPool, runs

log = logging.getLogger("engine.mooncake")

WILDCARDS = ("0.0.0.0", "::", "")


def _zmq_addr(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class MooncakeBackend:
    name = "mooncake"

    def __init__(self, pool: KVPool, listen_host: str, advertised: str, ib_device: str | None = None):
        """Start a TransferEngine and register the pool; bind the notification socket. Raises OSError when the
        engine cannot start (launch_server turns that into exit 1)."""
        try:
            from mooncake.engine import TransferEngine
        except ImportError as e:  # the wheel or its libibverbs1 is missing
            raise OSError(f"mooncake transfer engine unavailable: {e}") from None
        self.pool = pool
        self.engine = TransferEngine()
        # "rdma" as SGLang asks; with no RDMA device Mooncake moves the bytes over TCP.
        if self.engine.initialize(advertised, "P2PHANDSHAKE", "rdma", ib_device or "") != 0:
            raise OSError("Mooncake Transfer Engine initialization failed")
        self.session_id = f"{advertised}:{self.engine.get_rpc_port()}"
        self.agent_name = self.session_id  # what prefill keys its peers by, as SGLang keys by mooncake_session_id
        if self.engine.register_memory(pool.base_addr, pool.pool.numel() * pool.pool.element_size()) != 0:
            raise OSError("Mooncake memory registration of the KV pool failed")
        # prefill side: SGLang's session_failures / failed_sessions, under session_lock
        self.session_failures: dict[str, int] = defaultdict(int)
        self.failed_sessions: set[str] = set()
        self.session_lock = threading.Lock()
        # notifications: one PULL socket here, one PUSH socket per peer (zmq sockets are not thread-safe)
        self._ctx = zmq.Context.instance()
        self._pull = self._ctx.socket(zmq.PULL)
        ipv6 = ":" in listen_host
        self._pull.setsockopt(zmq.IPV6, int(ipv6))
        bind = "*" if listen_host in WILDCARDS else _zmq_addr(listen_host)
        port = self._pull.bind_to_random_port(f"tcp://{bind}")
        self.notify_endpoint = f"tcp://{_zmq_addr(advertised)}:{port}"
        self._pull_lock = threading.Lock()
        self._push: dict[str, zmq.Socket] = {}
        self._peer_endpoint: dict[str, str] = {}
        self._push_lock = threading.Lock()
        log.info("Mooncake session %s, notifications on %s", self.session_id, self.notify_endpoint)

    def metadata(self) -> bytes:
        return json.dumps({"session_id": self.session_id, "notify": self.notify_endpoint}).encode()

    def add_peer(self, metadata: bytes) -> str:
        """A decode registers (again): remember where its notifications go; clear its failed state as SGLang
        does on a KVArgs registration. Returns the peer's session id."""
        meta = json.loads(metadata)
        sid, endpoint = str(meta["session_id"]), str(meta["notify"])
        with self.session_lock:
            self.failed_sessions.discard(sid)
            self.session_failures.pop(sid, None)
        with self._push_lock:
            if self._peer_endpoint.get(sid) != endpoint:
                old = self._push.pop(sid, None)
                if old is not None:
                    old.close(linger=0)
            self._peer_endpoint[sid] = endpoint
        return sid

    def write(self, peer: str, src_pages: list[int], dst_base: int, dst_pages: list[int], page_bytes: int,
              notif: bytes = b"", timeout_s: float = 30.0) -> bool:
        """WRITE src pages into the peer's pages, then send notif (if any). Blocks. timeout_s is not Mooncake's
        to take: a frozen peer holds the write for MC_TRANSFER_TIMEOUT."""
        pb = self.pool.page_bytes
        if pb != page_bytes:
            return False
        with self.session_lock:
            if peer in self.failed_sessions:
                log.error("Decode instance could be dead, remote mooncake session %s is not alive", peer)
                return False
        rs = runs(src_pages, dst_pages)
        src = [self.pool.addr(s) for s, _, _ in rs]
        dst = [dst_base + d * pb for _, d, _ in rs]
        lens = [n * pb for _, _, n in rs]
        try:
            ret = self.engine.batch_transfer_sync_write(peer, src, dst, lens)
        except Exception:  # noqa: BLE001  (a failed transfer is an answer, never a dead worker thread)
            ret = -1
        if ret != 0:
            with self.session_lock:
                self.session_failures[peer] += 1
                # a live session never fails a write: once is enough to mark it (SGLang's threshold is 1)
                if self.session_failures[peer] >= 1:
                    self.failed_sessions.add(peer)
            log.error("Session %s failed.", peer)
            return False
        if notif:
            self.send_notif(peer, notif)
        return True

    def send_notif(self, peer: str, msg: bytes) -> None:
        with self._push_lock:
            endpoint = self._peer_endpoint.get(peer)
            if endpoint is None:
                return
            sock = self._push.get(peer)
            if sock is None:
                sock = self._ctx.socket(zmq.PUSH)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.IPV6, int(endpoint.startswith("tcp://[")))
                sock.connect(endpoint)
                self._push[peer] = sock
            try:
                sock.send_multipart([self.session_id.encode(), msg], flags=zmq.NOBLOCK)
            except zmq.ZMQError:
                pass  # peer gone and its queue full: the room's failure reaches it some other way

    def poll_notifs(self) -> list[tuple[str, bytes]]:
        out = []
        with self._pull_lock:
            while True:
                try:
                    parts = self._pull.recv_multipart(flags=zmq.NOBLOCK)
                except zmq.Again:
                    break
                if len(parts) == 2:
                    out.append((parts[0].decode(errors="replace"), parts[1]))
        return out
