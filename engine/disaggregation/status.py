"""Per-room transfer status table and its update rule.

Fixed rule (Fix A): once Failed or Success is set, non-terminal writes are ignored until the room is cleared
(a Failed write still lands on a Success room: an abort after the last chunk fails it). Pre-fix rule (the
status-update-race drill): a write takes Failed, else max(current, new) -- so a late Transferring
turns a Failed room back into Transferring, the seed's race.
"""

from __future__ import annotations

import threading

from engine.disaggregation.kvpoll import KVPoll, TERMINAL


def next_status(cur: KVPoll | None, new: KVPoll, sticky: bool) -> KVPoll | None:
    """Pure update rule; None means the room stays unknown."""
    if cur is None:
        return None if new == KVPoll.Failed else new  # a Failed for an unknown room is ignored
    if new == KVPoll.Failed:
        return KVPoll.Failed
    if sticky and cur in TERMINAL:
        return cur
    return KVPoll(max(cur, new))


class StatusTable:
    def __init__(self, sticky: bool = True):
        self.sticky = sticky
        self._s: dict[int, KVPoll] = {}
        self._lock = threading.Lock()

    def update(self, room: int, new: KVPoll) -> KVPoll | None:
        with self._lock:
            nxt = next_status(self._s.get(room), new, self.sticky)
            if nxt is not None:
                self._s[room] = nxt
            return nxt

    def get(self, room: int) -> KVPoll | None:
        with self._lock:
            return self._s.get(room)

    def clear(self, room: int) -> None:
        with self._lock:
            self._s.pop(room, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._s)
