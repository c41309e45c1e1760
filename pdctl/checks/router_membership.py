"""Router membership: whether each router routes to a running worker (it is in the router's worker list, as its
role, healthy and ready), judged from the routers' GET /workers lists.

A worker can run and answer /health while no request reaches it: a rolling restart interrupted, killed or stopped
part-way leaves workers out of a router's list (the routers keep what the worker API last told them), and an
operator can take one out by hand. `pdctl status` must say so rather than "5 of 5 running". Pure: the lists are
read by pdctl.ops.router_membership.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pdctl.checks.rolling import listed


@dataclass(frozen=True)
class RouterList:
    """One router's worker list as read now: `workers` (GET /workers' entries), or `error` when it could not be read;
    `unknown` when that is because the router's host could not be asked (nothing is known), not a router that
    answered wrongly or not at all on a live host (a failure)."""

    router: str  # the router's label
    workers: tuple[Mapping[str, Any], ...] | None = None
    error: str | None = None
    unknown: bool = False


@dataclass(frozen=True)
class NotRouted:
    """One router that does not route to the worker, and why in the router's own terms."""

    router: str
    why: str  # "not in its worker list", "listed as unhealthy", "listed as draining", ...


@dataclass(frozen=True)
class Unread:
    """A router whose worker list could not be read, why, and whether that is unknown (its host could not be
    asked) rather than a failure (a router on a live host that did not answer its worker API)."""

    router: str
    why: str
    unknown: bool = False


@dataclass(frozen=True)
class Membership:
    """How the routers see one running worker: the routers that do not route to it, and those whose list could
    not be read."""

    missing: tuple[NotRouted, ...] = ()
    unread: tuple[Unread, ...] = ()
    json_extra = ("routed",)

    @property
    def routed(self) -> bool | None:
        """True: every router routes to it; False: some router that answered does not; None: a router's list could
        not be read (its host not asked, or the router not answering its worker API: its own health is
        final-health's to judge), so nothing is known of its routing."""
        if self.missing:
            return False
        return None if self.unread else True


def why_not_routed(entry: Mapping[str, Any] | None, role: str) -> str | None:
    """Why a router whose list holds `entry` for a worker of `role` does not route to it, or None when it does.
    The same test as the rolling restart's `back_in_service` (listed as its role, not unhealthy, ready where the
    router says a status)."""
    if entry is None:
        return "not in its worker list"
    kind = entry.get("worker_type")
    if kind != role:
        return f"listed as {kind}"
    if entry.get("is_healthy") is False:
        return "listed as unhealthy"
    status = entry.get("status", "ready")
    if status != "ready":
        return f"listed as {status}"
    return None


def judge_membership(role: str, urls: Mapping[str, str], lists: Sequence[RouterList]) -> Membership:
    """Membership of one running worker of `role`. `urls`: router label -> the worker's URL as that router knows
    it (it was started with it). Pure."""
    missing, unread = [], []
    for rl in lists:
        if rl.workers is None:
            unread.append(Unread(rl.router, rl.error or "not read", rl.unknown))
            continue
        why = why_not_routed(listed(rl.workers, urls[rl.router]), role)
        if why is not None:
            missing.append(NotRouted(rl.router, why))
    return Membership(tuple(missing), tuple(unread))
