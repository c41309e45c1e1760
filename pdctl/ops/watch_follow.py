"""The watch follows what is declared: when its inventory file changes (an edited inventory deployed with `pdctl
deploy` or `restart`, another router kind, other launch lines), the next flags round judges against the new one,
without a restart of the watch, and the timeline says so ({"event": "declared"}).

Declared is the file the watch was started with; it is read again when its size, mtime or content changed. A file
that no longer parses, or names another deployment, is not followed: said once per change, and the watch goes on
with what it had (a watch of one deployment never turns into a watch of another).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from pdctl.errors import PdctlError
from pdctl.inventory import Inventory, load_inventory
from pdctl.serialize import to_data


@dataclass
class Declared:
    """A new inventory to judge against, and what changed in it (top-level sections and role instances)."""

    inv: Inventory
    changed: list[str]


@dataclass
class InventoryFollower:
    path: str | None  # None: the embedded default, which never changes
    inv: Inventory
    stamp: tuple[int, int] | None  # (size, mtime_ns) of the file as last read
    digest: str  # of its bytes as last read

    @classmethod
    def of(cls, inv: Inventory) -> InventoryFollower:
        path = None if inv.source == "<embedded default>" else inv.source
        stamp, digest = _read(path) if path is not None else (None, "")
        return cls(path, inv, stamp, digest)

    def look(self) -> Declared | str | None:
        """None: unchanged. A Declared: the file changed and is followed now. A str: it changed and is not
        followed (why). Never raises for the file's sake."""
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError as e:
            why = f"{self.path}: cannot be read ({e.strerror}): still judging against the inventory loaded before"
            return self._refuse((-1, -1), "", why)
        stamp = (st.st_size, st.st_mtime_ns)
        if stamp == self.stamp:
            return None
        stamp_now, digest = _read(self.path)
        if digest == self.digest:
            self.stamp = stamp_now
            return None
        try:
            new = load_inventory(self.path)
        except PdctlError as e:
            first = e.message.splitlines()[0]
            return self._refuse(stamp_now, digest, f"{first}: still judging against the inventory loaded before")
        if new.name != self.inv.name:
            return self._refuse(
                stamp_now,
                digest,
                f"{self.path} now declares deployment {new.name!r}, not {self.inv.name!r}: not followed (start a "
                "watch for it)",
            )
        changed = what_changed(self.inv, new)
        self.inv, self.stamp, self.digest = new, stamp_now, digest
        return Declared(new, changed)

    def _refuse(self, stamp: tuple[int, int] | None, digest: str, why: str) -> str | None:
        """Say a change that is not followed once: the same file state is not said again."""
        if stamp == self.stamp and digest == self.digest:
            return None
        self.stamp, self.digest = stamp, digest
        return why


def _read(path: str) -> tuple[tuple[int, int] | None, str]:
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read()
    except OSError:
        return None, ""
    return (st.st_size, st.st_mtime_ns), hashlib.sha256(data).hexdigest()


def what_changed(old: Inventory, new: Inventory) -> list[str]:
    """The top-level sections that differ, a role's instances one by one ('roles.decode[0]'). Pure."""
    a, b = to_data(old), to_data(new)
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        if key != "roles":
            out.append(key)
            continue
        for role in sorted(set(a.get(key) or {}) | set(b.get(key) or {})):
            olds, news = (a.get(key) or {}).get(role) or [], (b.get(key) or {}).get(role) or []
            for i in range(max(len(olds), len(news))):
                if (olds[i] if i < len(olds) else None) != (news[i] if i < len(news) else None):
                    out.append(f"roles.{role}[{i}]")
    return out
