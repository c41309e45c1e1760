"""Fake backend (like SGLang's): every transfer succeeds instantly and moves nothing.
For unit tests of the scheduling logic only; a fake decode recomputes the prompt locally."""

from __future__ import annotations

from engine.disaggregation.kv_pool import KVPool
from engine.disaggregation.transfer_backend import BackendContext, TransferBackend


def create(ctx: BackendContext) -> TransferBackend:
    return FakeBackend(ctx.agent_name, ctx.pool)


class FakeBackend:
    def __init__(self, agent_name: str, pool: KVPool):
        self.agent_name = agent_name
        self.pool = pool

    def metadata(self) -> bytes:
        return b"fake"

    def add_peer(self, metadata: bytes) -> str:
        return "fake-peer"

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
        return True

    def send_notif(self, peer: str, msg: bytes) -> None:
        pass

    def poll_notifs(self) -> list[tuple[str, bytes]]:
        return []
