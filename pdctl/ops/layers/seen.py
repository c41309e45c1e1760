"""What one watch round saw, and how a round asks per target: a host that does not answer makes ITS targets
unknown and the rest are still watched (final-health stops at such a host instead). Shared by the layers' rounds;
checks.watch_state folds a Seen in."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from pdctl.checks.inflight import Point
from pdctl.checks.result import CheckResult
from pdctl.ops.context import Deployment

#: (prefill label, decode label, pass|fail|unknown, latency s or None) of one pair's canary
PairSeen = tuple[str, str, str, float | None]


@dataclass
class Seen:
    """What one round saw."""

    checks: list[CheckResult] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)  # target -> why it could not be asked
    point: Point | None = None  # inflight: one sample of every worker
    pairs: list[PairSeen] = field(default_factory=list)
    hazards: dict[tuple[str, str], str] | None = None  # lineage: (prefill, decode) -> kind
    processes: dict[str, tuple[int | None, float | None]] = field(default_factory=dict)  # label -> (pid, start)
    canary_tokens: int = 0  # tokens the decodes generated for this round's own canaries (told apart from traffic)
    change: str | None = None  # health round: who holds the deployment lock, described ("" free; None not read)


def why(e: BaseException) -> str:
    """An error's first line, for an unknown target's reason."""
    return (getattr(e, "message", None) or str(e) or type(e).__name__).splitlines()[0]


def unreachable_hosts(dep: Deployment, roles: Collection[str] | None = None) -> dict[str, str]:
    """host -> why, for each non-local host that runs a role (of `roles`) and does not answer a `true` within its
    connect timeout (the kept connection makes it one round trip). A local host always answers."""

    def reach(name: str) -> None:
        dep.transport(name).reach()

    return {r.label: why(r.error) for r in dep.each_host(reach, roles=roles) if r.error is not None}


def targets_on(dep: Deployment, hosts: dict[str, str], roles: Collection[str] | None = None) -> dict[str, str]:
    """target label -> why it is unknown, for every instance (of `roles`) on one of `hosts` (host -> why)."""
    return {
        dep.inv.label(role, i): f"unknown: host {inst.host} did not answer: {hosts[inst.host]}"
        for role, i, inst in dep.inv.instances()
        if inst.host in hosts and (roles is None or role in roles)
    }


def per_instance(
    dep: Deployment, fn: Callable[[str, int], list[CheckResult]], roles: Collection[str] | None = None
) -> Seen:
    """fn(role, index) -> [CheckResult] for every instance (of `roles`) on a host that answers; the others
    unknown."""
    down = unreachable_hosts(dep)
    seen = Seen(unknown=targets_on(dep, down, roles))
    wanted = [(r, i) for r, i, inst in dep.inv.instances() if inst.host not in down and (roles is None or r in roles)]
    for r in dep.each_instance(lambda role, i: fn(role, i) if (role, i) in wanted else None, roles=roles):
        if r.error is not None:
            seen.unknown[r.label] = f"unknown: {why(r.error)}"
        for check in r.value or []:
            check.target = r.label
            seen.checks.append(check)
    return seen
