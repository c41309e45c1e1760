"""Fake backend (like SGLang's): every transfer succeeds instantly and moves nothing.
For unit tests of the scheduling logic only; a fake decode recomputes the prompt locally."""

from __future__ import annotations

from engine.disaggregation.kv_pool import KVPool


class FakeBackend:
    name = "fake"

    def __init__(self, agent_name: str, pool: KVPool):
        self.agent_name = agent_name
        self.pool = pool

    def metadata(self) -> bytes:
        return b"fake"

    def add_peer(self, metadata: bytes) -> str:
        return "fake-peer"

    def write(self, peer, src_pages, dst_base, dst_pages, page_bytes, notif=b"", timeout_s=30.0) -> bool:
        return True

    def send_notif(self, peer: str, msg: bytes) -> None:
        pass

    def poll_notifs(self):
        return []
