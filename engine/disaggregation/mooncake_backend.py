"""Mooncake transfer backend (SGLang's default): the real Mooncake TransferEngine, DRAM to DRAM.

Shaped like SGLang's mooncake backend: P2PHANDSHAKE metadata (no etcd), one session id per process
(`host:rpc_port`), synchronous batch writes (0 ok, negative failed). Mooncake has no notifications, so the
success/failure messages travel over ZMQ, as SGLang's do: each process binds a PULL socket on its --host
and peers PUSH to it. Prefill keeps SGLang's session bookkeeping: a write that fails puts the session in
`failed_sessions`, later writes to it fail at once without touching the wire, and the session is cleared
when that decode registers again (`add_peer`, SGLang's KVArgs registration) or, as in SGLang 0.5.23, when
the failed-session probe finds it answering (`send_probe` 0; SGLANG_ENABLE_FAILED_SESSION_PROBE, on by
default, every SGLANG_FAILED_SESSION_PROBE_INTERVAL_S doubling per miss up to ..._MAX_INTERVAL_S; a session
no room has asked for within SGLANG_FAILED_SESSION_IDLE_TIMEOUT_S is dropped), counted in
sglang:failed_session_recoveries_total.

Mooncake's own listeners (the handshake RPC port and the TCP data port) bind every address and take their
ports from MC_MIN_RPC_PORT..MC_MAX_RPC_PORT (default 15000..17000; a range reaching 32768 or more is ignored)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass

import zmq
from prometheus_client import CollectorRegistry, Counter

from engine.disaggregation.kv_pool import KVPool, runs
from engine.disaggregation.prefill_kv import WILDCARDS
from engine.disaggregation.transfer_backend import BackendContext, TransferBackend

log = logging.getLogger("engine.mooncake")


def _zmq_addr(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _env_bool(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    return default if v is None else v.strip().lower() in ("1", "true", "yes", "on")


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise OSError(f"{name} must be a number") from None


@dataclass
class _Probe:
    """Probe schedule of one failed session (time.monotonic())."""

    last_requested: float
    next_probe_at: float
    interval: float


def create(ctx: BackendContext) -> TransferBackend:
    """Its own session id stands for the agent name (what peers key it by), as SGLang keys by it."""
    return MooncakeBackend(ctx.pool, ctx.listen_host, ctx.advertised_host, ctx.ib_device, ctx.metrics_registry)


class MooncakeBackend:
    def __init__(
        self,
        pool: KVPool,
        listen_host: str,
        advertised: str,
        ib_device: str | None = None,
        registry: CollectorRegistry | None = None,
    ):
        """Start a TransferEngine and register the pool; bind the notification socket. registry (the prefill's
        metrics registry) makes this the sending side: it gets the failed-session probe and its counter.
        Raises OSError when the engine cannot start or the probe's env is invalid (launch_server: exit 1)."""
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
        # prefill side: SGLang's failed_sessions, under session_lock
        self.failed_sessions: set[str] = set()
        self.session_lock = threading.Lock()
        self._probes: dict[str, _Probe] = {}
        self.recoveries: Counter | None = None
        if registry is not None and _env_bool("SGLANG_ENABLE_FAILED_SESSION_PROBE", True):
            self._start_probe(registry)
        # notifications: one PULL socket here, one PUSH socket per peer (zmq sockets are not thread-safe)
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._pull = self._ctx.socket(zmq.PULL)
        ipv6 = ":" in listen_host
        self._pull.setsockopt(zmq.IPV6, int(ipv6))
        bind = "*" if listen_host in WILDCARDS else _zmq_addr(listen_host)
        port = self._pull.bind_to_random_port(f"tcp://{bind}")
        self.notify_endpoint = f"tcp://{_zmq_addr(advertised)}:{port}"
        self._pull_lock = threading.Lock()
        self._push: dict[str, zmq.Socket[bytes]] = {}
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
            self._clear(sid)
        with self._push_lock:
            if self._peer_endpoint.get(sid) != endpoint:
                old = self._push.pop(sid, None)
                if old is not None:
                    old.close(linger=0)
            self._peer_endpoint[sid] = endpoint
        return sid

    def write(
        self,
        peer: str,
        src_pages: list[int],
        dst_base: int,
        dst_pages: list[int],
        page_bytes: int,
        notif: bytes = b"",
        timeout_s: float = 30.0,
    ) -> bool:
        """WRITE src pages into the peer's pages, then send notif (if any). Blocks. timeout_s is not Mooncake's
        to take: a frozen peer holds the write for MC_TRANSFER_TIMEOUT."""
        pb = self.pool.page_bytes
        if pb != page_bytes:
            return False
        with self.session_lock:
            if peer in self.failed_sessions:
                probe = self._probes.get(peer)
                if probe is not None:
                    probe.last_requested = time.monotonic()
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
                # a live session never fails a write: once is enough to mark it (SGLang's threshold is 1)
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
        out: list[tuple[str, bytes]] = []
        with self._pull_lock:
            while True:
                try:
                    parts = self._pull.recv_multipart(flags=zmq.NOBLOCK)
                except zmq.Again:
                    break
                if len(parts) == 2:
                    out.append((parts[0].decode(errors="replace"), parts[1]))
        return out

    # -- the failed-session probe (prefill) ------------------------------------------------------
    def _clear(self, sid: str) -> None:
        """Caller holds session_lock."""
        self.failed_sessions.discard(sid)
        self._probes.pop(sid, None)

    def _start_probe(self, registry: CollectorRegistry) -> None:
        self.probe_interval = _env_float("SGLANG_FAILED_SESSION_PROBE_INTERVAL_S", 30.0)
        self.probe_max_interval = _env_float("SGLANG_FAILED_SESSION_PROBE_MAX_INTERVAL_S", 300.0)
        self.idle_timeout = _env_float("SGLANG_FAILED_SESSION_IDLE_TIMEOUT_S", 600.0)
        if not 0 < self.probe_interval <= self.probe_max_interval:
            raise OSError(
                "Need 0 < SGLANG_FAILED_SESSION_PROBE_INTERVAL_S <= SGLANG_FAILED_SESSION_PROBE_MAX_INTERVAL_S"
            )
        if self.idle_timeout <= 0:
            raise OSError("SGLANG_FAILED_SESSION_IDLE_TIMEOUT_S must be positive")
        self.recoveries = Counter(
            "sglang:failed_session_recoveries",
            "Number of mooncake_session_ids un-blacklisted via probe.",
            registry=registry,
        )
        threading.Thread(target=self._probe_loop, name="mooncake-probe", daemon=True).start()

    def _probe_loop(self) -> None:
        while True:
            time.sleep(self.probe_interval)
            try:
                self.probe_pass()
            except Exception:  # noqa: BLE001  (the probe must outlive a bad pass)
                log.exception("failed-session probe pass")

    def probe_pass(self) -> None:
        """Probe the failed sessions that are due (a miss doubles that session's interval up to the maximum);
        drop those no room asked for within the idle timeout (a restarted decode comes back under a new id)."""
        now = time.monotonic()
        due = []
        with self.session_lock:
            for sid in [s for s in self._probes if s not in self.failed_sessions]:
                del self._probes[sid]
            for sid in list(self.failed_sessions):
                p = self._probes.setdefault(sid, _Probe(now, now, self.probe_interval))
                if now - p.last_requested >= self.idle_timeout:
                    self._clear(sid)
                    log.info("Dropped blacklisted session %s: no request for %.0fs", sid, now - p.last_requested)
                elif now >= p.next_probe_at:
                    due.append(sid)
        for sid in due:
            try:
                rc = self.engine.send_probe(sid)
            except Exception:  # noqa: BLE001
                rc = -1
            with self.session_lock:
                recovered = rc == 0 and sid in self.failed_sessions
                if rc == 0:
                    self._clear(sid)
                elif sid in self._probes:
                    p = self._probes[sid]
                    p.interval = min(2 * p.interval, self.probe_max_interval)
                    p.next_probe_at = time.monotonic() + p.interval
            if recovered:
                log.info("Session %s recovered via probe; un-blacklisted", sid)
                if self.recoveries is not None:  # (set whenever the probe runs)
                    self.recoveries.inc()
