"""Process observation: every role instance's service and its live main process (argv, env, start time), each
host's read in ONE remote command (`ServiceManager.observe`), hosts in parallel. What final-health's flags and
lineage layers, the watch's flags round and the co-restart record read. Gathers only; the judges are in checks/.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pdctl.checks.proc import ProcessInfo
from pdctl.errors import PdctlError, RefusedError, UnreachableError, UsageError
from pdctl.ops.context import Deployment
from pdctl.ops.fanout import Labelled, raise_first_unreachable
from pdctl.services.base import ServiceStatus
from pdctl.role_ref import RoleRef


@dataclass(frozen=True)
class LiveProcess:
    """One role instance as the service manager and /proc showed it."""

    role: str
    index: int
    service: ServiceStatus
    process: ProcessInfo | None  # None: no live main process (stopped, gone while read, or the read failed)

    @property
    def active(self) -> bool:
        return self.service.active


_Key = RoleRef
_HostSeen = dict[_Key, LiveProcess]


def _observe_host(dep: Deployment, host: str) -> _HostSeen:
    """(role, index) -> LiveProcess of the roles on `host`, in one remote command. Raises UnreachableError /
    RefusedError when the host cannot be asked (fan_out keeps it as the host's error), UsageError when it never
    can be (a key file missing)."""
    names = {
        dep.inv.service_name(role, i): RoleRef(role, i) for role, i, inst in dep.inv.instances() if inst.host == host
    }
    try:
        seen = dep.services(host).observe(list(names))
    except (UnreachableError, RefusedError, UsageError):
        raise
    except PdctlError as e:  # the host answered, the read failed: shown for its roles, the others stand
        down = e.message.splitlines()[0]
        return {
            key: LiveProcess(*key, ServiceStatus(name, False, None, None, detail=down), None)
            for name, key in names.items()
        }
    return {key: LiveProcess(*key, *seen[name]) for name, key in names.items()}


def _by_label(dep: Deployment, results: Sequence[Labelled[str, _HostSeen]]) -> dict[str, LiveProcess]:
    found = {key: value for r in results if r.reached and r.value is not None for key, value in r.value.items()}
    return {
        dep.inv.label(role, i): found[RoleRef(role, i)]
        for role, i, _ in dep.inv.instances()
        if RoleRef(role, i) in found
    }


def live_processes(dep: Deployment) -> dict[str, LiveProcess]:
    """label -> LiveProcess for every role instance, in inventory order.

    Raises the first UnreachableError/RefusedError (exit 3/4, e.g. "unknown: gpu1 did not answer within 20 s")
    once every host was asked: a host that could not be asked says nothing about its processes, so it is
    never reported as "no live main process" (nor counted in a lineage record)."""
    results = dep.each_host(lambda host: _observe_host(dep, host))
    raise_first_unreachable(results)
    return _by_label(dep, results)


def live_processes_reached(dep: Deployment) -> tuple[dict[str, LiveProcess], dict[str, PdctlError]]:
    """live_processes of the hosts that answered, and host -> the error of each host that could not be asked:
    its roles are left out (unknown, never "no live main process"). For `pdctl watch`, which watches the rest."""
    results = dep.each_host(lambda host: _observe_host(dep, host))
    return _by_label(dep, results), {r.label: r.error for r in results if r.error is not None}
