"""A Deployment: the inventory plus one live connection per host and a service manager per host.

Every op takes a Deployment so that a command reuses one SSH connection per host across all its steps.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterable, TypeVar

from pdctl.ops.fanout import Labelled, fan_out, raise_first_unreachable
from pdctl.progress import Progress
from pdctl.services.base import ServiceManager, ServiceStatus
from pdctl.transport.base import Transport
from pdctl.role_ref import RoleRef

if TYPE_CHECKING:  # the inventory models stay off the `pdctl --help` path
    from pdctl.inventory import Inventory, RoleInstance
    from pdctl.lock import LockState

T = TypeVar("T")


class Deployment:
    def __init__(self, inv: Inventory, progress: Progress | None = None):
        from pdctl.transport.connect import TransportPool

        self.inv = inv
        self.progress = progress or Progress()
        self._pool = TransportPool(inv.hosts)
        self._managers: dict[str, ServiceManager] = {}
        self._lock = threading.Lock()

    # -- reaching hosts --------------------------------------------------------------------------------------
    def transport(self, host_name: str) -> Transport:
        with self._lock:
            return self._pool.get(host_name)

    def services(self, host_name: str) -> ServiceManager:
        from pdctl.services.connect import service_manager

        t = self.transport(host_name)
        with self._lock:
            if host_name not in self._managers:
                self._managers[host_name] = service_manager(self.inv.hosts[host_name], t)
            return self._managers[host_name]

    def instance(self, role: str, index: int) -> RoleInstance:
        return getattr(self.inv.roles, role)[index]

    def base_url(self, role: str, index: int) -> str:
        """The role's base URL (a RoleURL: a tunnel's local port over SSH with http=tunnel), which names the role and
        its address on its host in every message about it. Over a tunnel this connects (UnreachableError,
        HostKeyRefused)."""
        from pdctl.checks.http_util import RoleURL

        inst = self.instance(role, index)
        t, probe = self.transport(inst.host), probe_address(inst.listen_host)
        url = t.http_base_url(inst.port, host=probe)
        return RoleURL(
            url,
            label=self.inv.label(role, index),
            host=inst.host,
            remote=f"{probe}:{inst.port}",
            tunnel=t.http_tunnel,
            failure=lambda since: t.tunnel_failure(url, since),
        )

    def bootstrap_url(self, index: int) -> str:
        inst = self.instance("prefill", index)
        return self.transport(inst.host).http_base_url(
            self.inv.bootstrap_port(inst), host=probe_address(inst.listen_host)
        )

    def status(self, role: str, index: int) -> ServiceStatus:
        inst = self.instance(role, index)
        return self.services(inst.host).status(self.inv.service_name(role, index))

    # -- fan-out (one policy for a host that cannot be asked: pdctl.ops.fanout) -------------------------------
    def each_instance(
        self, fn: Callable[[str, int], T], *, roles: Iterable[str] | None = None
    ) -> list[Labelled[RoleRef, T]]:
        """`fn(role, index)` for every role instance (of `roles`, default all), in parallel with a bound; labelled
        results in inventory order. An unreachable host is that item's `error`, never a raise from here."""
        wanted = None if roles is None else set(roles)
        items = [
            (self.inv.label(r, i), RoleRef(r, i)) for r, i, _ in self.inv.instances() if wanted is None or r in wanted
        ]
        return fan_out(items, lambda key: fn(*key))

    def each_host(self, fn: Callable[[str], T], *, roles: Iterable[str] | None = None) -> list[Labelled[str, T]]:
        """`fn(host)` once for every host that runs a role (of `roles`), in parallel; in order of first use."""
        wanted = None if roles is None else set(roles)
        hosts = dict.fromkeys(inst.host for r, _i, inst in self.inv.instances() if wanted is None or r in wanted)
        return fan_out([(h, h) for h in hosts], fn)

    def connect_all(self) -> None:
        """Reach every host that runs a role, in parallel. Raises the first UnreachableError/HostKeyRefused, so a
        command about a host that cannot be asked fails fast naming it instead of reporting every check failed."""

        raise_first_unreachable(self.each_host(lambda name: self.transport(name).reach()))

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> "Deployment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def probe_address(listen_host: str) -> str:
    # A role listening on all interfaces is probed on loopback of its host, as the seed's curl did.
    return "127.0.0.1" if listen_host in ("0.0.0.0", "::", "") else listen_host


def deployment_lock(dep: Deployment, action: str, *, run: str = "", states: Callable[[], dict[str, str]] | None = None):
    """The inventory's lock, kept on the first prefill's host so every operator sees it. `run` is the audit run
    id of `action`, kept in the lock so whoever finds it abandoned can name the run.

    Taking over an abandoned lock (its holder died) is said on the progress stream and audited as a "lock
    takeover" record naming the previous holder, its action, its run and (with `states`) what state the roles
    were left in; the caller finds it in the lock's `took_over` to warn about it in its result."""
    from pdctl import state
    from pdctl.lock import DeploymentLock
    from pdctl.services.connect import default_state_dir

    def said_and_audited(ab) -> None:
        import time

        from pdctl import audit
        from pdctl.errors import PdctlError

        dep.progress.info("taking over", ab.describe())
        extra: dict = {
            "run": run,
            "lock": ab.lock_dir,
            "lock_host": ab.host,
            "previous": None if ab.owner is None else {k: v for k, v in ab.owner.__dict__.items() if k != "token"},
        }
        if states is not None:
            try:
                extra["roles_left"] = states()
            except PdctlError as e:
                extra["roles_left"] = f"unknown: {e.message.splitlines()[0]}"
        audit.append(
            "lock takeover",
            inventory=dep.inv.source,
            args={"by": action},
            result=f"taken over: {ab.describe()}",
            started=time.time(),
            extra=extra,
        )

    host = dep.inv.roles.prefill[0].host
    state_dir = default_state_dir(dep.inv.hosts[host])
    lock_dir = f"{state_dir}/locks/{dep.inv.name}.lock"
    return DeploymentLock(
        dep.transport(host),
        lock_dir,
        state.operator(),
        action,
        run=run,
        on_takeover=said_and_audited,
        state_dir=state_dir,
    )


def lock_state(dep: Deployment) -> "LockState":
    """The deployment lock as it stands (a live holder described, or an abandoned lock), from one read; free when
    it cannot be read. For the read-only commands (status, triage), which say that a change is under way or that
    a lock was abandoned rather than take it."""
    from pdctl.lock import LockState

    try:
        return deployment_lock(dep, "read").state()
    except Exception:  # advisory: a lock that cannot be read must not stop a read-only command
        return LockState(None, None)


def lock_holder(dep: Deployment) -> str | None:
    """Who holds the deployment lock now (a live holder), described; None when it is free or cannot be read."""
    return lock_state(dep).holder
