"""A reference to one role instance, `prefill[0]`: the role and its index in the inventory's list for that role.

A NamedTuple, so it is the `(role, index)` pair it replaces: it unpacks, compares and hashes as one (a dict keyed by
RoleRef answers a plain `("prefill", 0)`), and serialises as `["prefill", 0]`. What a label adds (host and port)
comes from the inventory: `Inventory.label(*ref)`."""

from __future__ import annotations

from typing import NamedTuple


class RoleRef(NamedTuple):
    role: str  # "prefill" | "decode" | "router"
    number: int  # its place in the inventory's list of that role, from 0

    @property
    def short(self) -> str:
        """`prefill[0]`."""
        return f"{self.role}[{self.number}]"
