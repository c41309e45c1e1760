"""The contract of a KV transfer backend: what the prefill and decode KV managers (prefill_kv.py, decode_kv.py)
call, and what a backend's factory is given. The registry of backends is backends.py.

A backend moves pages of the local KV pool into a peer's pool (one-sided WRITE) and carries short notifications
(`<room>:S:...` / `<room>:F`) between peers; everything else (rooms, statuses, bootstrap) is the managers'."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the HTTP process reads the registry for its flags and never imports torch
    from prometheus_client import CollectorRegistry

    from engine.disaggregation.kv_pool import KVPool


class TransferBackend(Protocol):
    # what peers key this process by: the prefill sends it in its bootstrap registration, the decode with each room
    agent_name: str

    def metadata(self) -> bytes:
        """What a peer needs to reach this process (decode sends it to prefill in POST /kv/peer)."""
        ...

    def add_peer(self, metadata: bytes) -> str:
        """Learn (or learn again) a peer from its metadata; returns the peer's name for write/send_notif."""
        ...

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
        """WRITE local src_pages into the peer's dst_pages (its pool starts at dst_base); then deliver notif, if
        any, after the data. Blocks; False on any failure (never raises: a failed transfer is an answer)."""
        ...

    def send_notif(self, peer: str, msg: bytes) -> None:
        """Best effort: a notification that cannot be sent is dropped."""
        ...

    def poll_notifs(self) -> list[tuple[str, bytes]]:
        """Notifications received since the last poll, as (sender's name, message). Never blocks."""
        ...


@dataclass(frozen=True)
class BackendContext:
    """Everything a backend's factory may use; each takes what it needs (backends.py says which)."""

    pool: KVPool  # registered with the backend once, at start
    agent_name: str  # fresh for every process (a restarted decode is a new peer)
    listen_host: str  # --host
    advertised_host: str  # the address peers on other hosts dial
    ib_device: str | None  # --disaggregation-ib-device
    metrics_registry: CollectorRegistry | None  # the prefill's (the sending side's counters); None on decode
