"""NIXL (UCX, DRAM to DRAM) transfer backend: one agent per process, the KV pool registered once.

Peers are keyed by agent name; each decode start uses a fresh name, so a long-running prefill
accumulates peers (the seed's degraded-bootstrap story)."""

from __future__ import annotations

import threading
import time

from nixl_cu12._api import nixl_agent, nixl_agent_config

from engine.disaggregation.kv_pool import KVPool, runs
from engine.disaggregation.transfer_backend import BackendContext, TransferBackend


def create(ctx: BackendContext) -> TransferBackend:
    return NixlBackend(ctx.agent_name, ctx.pool)


class NixlBackend:
    def __init__(self, agent_name: str, pool: KVPool):
        self.agent_name = agent_name
        self.pool = pool
        self.agent = nixl_agent(agent_name, nixl_agent_config(enable_prog_thread=False, backends=["UCX"]))
        # (no progress thread: a busy-polling one would eat a core; check_xfer_state drives progress)
        self.reg = self.agent.register_memory(pool.pool)
        self._lock = threading.Lock()  # the python agent is not documented thread-safe

    def metadata(self) -> bytes:
        return self.agent.get_agent_metadata()

    def add_peer(self, metadata: bytes) -> str:
        with self._lock:
            peer = self.agent.add_remote_agent(metadata)
        return peer.decode() if isinstance(peer, bytes) else str(peer)

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
        """WRITE src pages into the peer's pages; notif (if any) is delivered after the data. Blocks."""
        pb = self.pool.page_bytes
        if pb != page_bytes:
            return False
        rs = runs(src_pages, dst_pages)
        local = [(self.pool.addr(s), n * pb, 0) for s, _, n in rs]
        remote = [(dst_base + d * pb, n * pb, 0) for _, d, n in rs]
        with self._lock:
            try:
                ld = self.agent.get_xfer_descs(local, "DRAM")
                rd = self.agent.get_xfer_descs(remote, "DRAM")
                h = self.agent.initialize_xfer("WRITE", ld, rd, peer, notif)
                st = self.agent.transfer(h)
            except Exception:
                return False
        deadline = time.monotonic() + timeout_s
        while st not in ("DONE", "ERR"):
            if time.monotonic() > deadline:
                st = "ERR"
                break
            time.sleep(0.0001)
            with self._lock:
                try:
                    st = self.agent.check_xfer_state(h)
                except Exception:
                    st = "ERR"
        with self._lock:
            try:
                self.agent.release_xfer_handle(h)
            except Exception:
                pass
        return st == "DONE"

    def send_notif(self, peer: str, msg: bytes) -> None:
        with self._lock:
            try:
                self.agent.send_notif(peer, msg)
            except Exception:
                pass

    def poll_notifs(self) -> list[tuple[str, bytes]]:
        with self._lock:
            n = self.agent.get_new_notifs()
        return [(k.decode() if isinstance(k, bytes) else k, m) for k, msgs in n.items() for m in msgs]
