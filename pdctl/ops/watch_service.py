"""`pdctl watch --install / --uninstall / --status`: the watch as a service on the OPERATOR's host (where pdctl
runs, through a LocalTransport), never on the role hosts.

Which manager: systemd when it runs this machine (sd_booted: /run/systemd/system exists) and pdctl is root (the
unit goes to /etc/systemd/system); else the pidfile manager the roles use, with the spec, pidfile and log under
pdctl's state directory. The service is `pdctl-watch-<inventory name>`: one per deployment. Its command is this
interpreter running `-m pdctl watch` with the inventory's absolute path and the options given; its environment
pins what pdctl's state depends on (XDG_STATE_HOME, PDCTL_AUDIT_LOG, HOME, PYTHONPATH when pdctl is not in this
interpreter's site-packages), so the service writes the same audit log and lineage as the operator who installed it.

The systemd unit is Type=notify with WatchdogSec= (the watch says READY=1, then WATCHDOG=1 while rounds complete:
pdctl.ops.watch), Restart=on-failure (a watchdog timeout and a SIGKILL included), SuccessExitStatus=130 (pdctl's
exit on SIGTERM, so `systemctl stop` is a clean stop). Install and uninstall append audit records.
"""

from __future__ import annotations

import os
import site
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pdctl import audit, state
from pdctl.checks.result import CheckResult
from pdctl.errors import ExitCode
from pdctl.services.base import ServiceSpec

if TYPE_CHECKING:
    from pdctl.inventory import Inventory

DEFAULT_WATCHDOG_S = 60.0  # above the longest round a dead host can cause (the 30 s e2e timeout)
START_TIMEOUT_S = 120.0  # systemctl start waits for READY=1 (every cadence's first round)
EXPORTER_WAIT_S = 15.0


def service_name(inventory_name: str) -> str:
    return f"pdctl-watch-{inventory_name}"


def manager_kind() -> tuple[str, str]:
    """("systemd" | "pidfile", why)."""
    if not os.path.isdir("/run/systemd/system"):
        return "pidfile", "systemd does not run this machine"
    if os.geteuid() != 0:
        return "pidfile", "systemd runs this machine, but a system unit needs root"
    return "systemd", "systemd runs this machine"


def watch_argv(
    inventory: Path | None, *, listen: str | None, listen_any: bool, timeline: str | None, heal: str
) -> tuple[str, ...]:
    """The service's command: this interpreter, `-m pdctl watch`, absolute paths, the options given."""
    argv = [sys.executable, "-m", "pdctl", "watch"]
    if inventory is not None:
        argv += ["-i", str(Path(inventory).resolve())]
    if listen:
        argv += ["--listen", listen]
    if listen_any:
        argv.append("--listen-any")
    if timeline:
        argv += ["--timeline", timeline if timeline == "-" else str(Path(timeline).resolve())]
    if heal != "off":
        argv += ["--heal", heal]
    return tuple(argv)


def service_env() -> dict[str, str]:
    """What the service's pdctl must see as the installer's did."""
    import pdctl

    env = {"XDG_STATE_HOME": str(state.state_dir().parent)}
    for name in ("PDCTL_AUDIT_LOG", "PDCTL_OPERATOR", "HOME"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    root = str(Path(pdctl.__file__).resolve().parent.parent)
    if root not in {str(Path(p).resolve()) for p in site.getsitepackages()}:
        env["PYTHONPATH"] = root  # a checkout or an editable install: the pdctl that installed it
    return env


def watch_spec(inventory_name: str, argv: tuple[str, ...]) -> ServiceSpec:
    return ServiceSpec(
        name=service_name(inventory_name),
        argv=argv,
        env=service_env(),
        workdir=os.getcwd(),
        description=f"pdctl watch of {inventory_name}",
    )


def _manager(kind: str, watchdog_s: float = DEFAULT_WATCHDOG_S):
    from pdctl.transport.local import LocalTransport

    t = LocalTransport("operator")
    if kind == "systemd":
        from pdctl.services.systemd import SystemdManager

        return SystemdManager(
            t,
            restart="on-failure",
            command_timeout=START_TIMEOUT_S,
            unit_options={"watchdog_sec": watchdog_s, "success_exit_status": "130"},
        )
    from pdctl.services.pidfile import PidfileManager

    return PidfileManager(t, str(state.state_dir()), command_timeout=30.0)


@dataclass
class WatchService:
    """What --install / --uninstall / --status say: where it runs, whether and as which pid, how to stop it."""

    action: str  # install, uninstall, status
    name: str
    manager: str  # systemd | pidfile
    manager_why: str
    path: str  # the unit file or the spec file
    log: str  # where its output goes
    argv: list[str] = field(default_factory=list)
    dry_run: bool = False
    rendered: str = ""  # the unit or spec text (secret-looking env values masked)
    changed: bool = False  # install: the unit/spec differed from what was there; uninstall: removed
    active: bool = False
    pid: int | None = None
    restarts: int | None = None
    detail: str = ""
    exporter_url: str = ""
    exporter_answers: bool | None = None
    checks: list[CheckResult] = field(default_factory=list)
    stop_with: str = ""
    removed: list[str] = field(default_factory=list)
    json_extra = ("ok",)

    @property
    def ok(self) -> bool:
        return not any(getattr(c, "failed", False) for c in self.checks)


def _describe(kind: str, why: str, mgr, name: str, action: str, inv_arg: str) -> WatchService:
    if kind == "systemd":
        path, log, stop = mgr.unit_path(name), f"journalctl -u {name}.service", f"systemctl stop {name}"
    else:
        path, log, stop = mgr.spec_path(name), mgr.log_path(name), f"pdctl watch --uninstall{inv_arg}"
    return WatchService(action, name, kind, why, path, log, stop_with=stop)


def _rendered(mgr, spec: ServiceSpec) -> str:
    from dataclasses import replace

    from pdctl.secrets import mask_env

    masked = replace(spec, env=mask_env(spec.env))
    return mgr.render(masked)


def _fill_status(ws: WatchService, mgr, listen: str | None, wait_s: float = 0.0) -> None:
    st = mgr.status(ws.name)
    ws.active, ws.pid, ws.restarts, ws.detail = st.active, st.main_pid, st.restarts, st.detail
    if listen and st.active:
        ws.exporter_url = f"http://{_url_host(listen)}/metrics"
        ws.exporter_answers = _scrape(ws.exporter_url, wait_s)[0] is not None


def _url_host(listen: str) -> str:
    from pdctl.inventory import parse_listen

    host, port = parse_listen(listen)
    host = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _scrape(url: str, wait_s: float) -> tuple[str | None, str]:
    """(the /metrics text or None, why not); retried for `wait_s` (a service just started binds first)."""
    from pdctl.checks.http_util import client

    end = time.monotonic() + wait_s
    while True:
        try:
            r = client().get(url, timeout=5.0)
            if r.status_code == 200:
                return r.text, ""
            why = f"HTTP {r.status_code}"
        except Exception as e:  # refused, timed out: the words go to the check
            why = f"{type(e).__name__}: {e}"
        if time.monotonic() >= end:
            return None, why
        time.sleep(0.2)


def install(
    inv,
    inventory: Path | None,
    *,
    listen: str | None,
    listen_any: bool,
    timeline: str | None,
    heal: str,
    watchdog_s: float = DEFAULT_WATCHDOG_S,
    dry_run: bool = False,
) -> WatchService:
    """Write the unit (or spec), enable and start it; a running one whose definition changed is restarted. Audited
    as `watch --install`. Raises StepFailed when it does not stay up (its log tail said), UnreachableError when
    systemctl does not answer."""
    kind, why = manager_kind()
    mgr = _manager(kind, watchdog_s)
    spec = watch_spec(
        inv.name, watch_argv(inventory, listen=listen, listen_any=listen_any, timeline=timeline, heal=heal)
    )
    inv_arg = f" -i {Path(inventory).resolve()}" if inventory is not None else ""
    ws = _describe(kind, why, mgr, spec.name, "install", inv_arg)
    ws.argv, ws.dry_run, ws.rendered = list(spec.argv), dry_run, _rendered(mgr, spec)
    if dry_run:
        ws.changed = not mgr.is_current(spec)
        return ws
    args = {"service": spec.name, "manager": kind, "argv": list(spec.argv), "watchdog_s": watchdog_s}
    with audit.audited("watch --install", inventory=inv.source, args=args) as rec:
        was_active = mgr.status(spec.name).active
        ws.changed = mgr.install(spec)
        if kind == "systemd":
            mgr.enable(spec.name)
        if was_active and ws.changed:
            mgr.restart(spec.name)
        else:
            mgr.start(spec.name)
        _fill_status(ws, mgr, listen or inv.watch.listen, EXPORTER_WAIT_S)
        rec.result = (
            f"{'installed' if ws.changed else 'unchanged'}, running as pid {ws.pid} ({kind})"
            if ws.active
            else f"installed, not running: {ws.detail}"
        )
        rec.extra["pid"] = ws.pid
        rec.extra["exit_code"] = 0 if ws.active else ExitCode.CHECK_FAILED  # history reads the word from it
    return ws


def uninstall(inv, inventory: Path | None, *, dry_run: bool = False) -> WatchService:
    """Stop it, disable it (systemd), remove its unit (then daemon-reload) or its spec and pidfile (its log is
    kept). Nothing installed: nothing done, said. Audited as `watch --uninstall`."""
    kind, why = manager_kind()
    mgr = _manager(kind)
    name = service_name(inv.name)
    ws = _describe(kind, why, mgr, name, "uninstall", "")  # once removed, nothing is left to stop
    present = mgr.not_installed(name) is None
    if dry_run or not present:
        ws.detail = "would stop, disable and remove it" if present else "not installed: nothing to remove"
        ws.dry_run = dry_run
        return ws
    with audit.audited("watch --uninstall", inventory=inv.source, args={"service": name, "manager": kind}) as rec:
        st = mgr.status(name)
        mgr.stop(name)
        if kind == "systemd":
            mgr.disable(name)
            ws.removed = mgr.purge(name)
        else:
            ws.removed = mgr.purge(name, keep_log=True)
        ws.changed = True
        ws.pid = st.main_pid
        ws.detail = f"stopped pid {st.main_pid}" if st.active else "was not running"
        rec.result = f"removed ({kind}); {ws.detail}"
        rec.extra["exit_code"] = 0
    return ws


def status(inv, inventory: Path | None) -> WatchService:
    """Read-only: the service's state, one scrape of its exporter, judged (checks.watch_service)."""
    from pdctl.checks.metrics import parse_metrics
    from pdctl.checks.watch_service import WatchServiceSeen, judge_watch_service
    from pdctl.services.systemd import SystemdManager

    kind, why = manager_kind()
    mgr = _manager(kind)
    name = service_name(inv.name)
    ws = _describe(kind, why, mgr, name, "status", f" -i {Path(inventory).resolve()}" if inventory else "")
    installed = mgr.not_installed(name) is None
    spec = mgr.installed_spec(name) if installed else None
    listen = _listen_of(spec.argv) if spec is not None else None
    listen = listen or inv.watch.listen
    ws.argv = list(spec.argv) if spec is not None else []
    ws.exporter_url = f"http://{_url_host(listen)}/metrics"
    st = mgr.status(name)
    ws.active, ws.pid, ws.restarts, ws.detail = st.active, st.main_pid, st.restarts, st.detail
    text, why_not, last = None, "", None
    if installed and st.active:
        text, why_not = _scrape(ws.exporter_url, 0.0)
        ws.exporter_answers = text is not None
        if text is not None:
            stamps = [s.value for s in parse_metrics(text).samples("pdctl_round_last_timestamp_seconds")]
            last = max(stamps) if stamps else None
    seen = WatchServiceSeen(
        installed,
        st.active,
        st.main_pid,
        st.detail,
        st.restarts if isinstance(mgr, SystemdManager) else None,
        ws.exporter_url,
        why_not,
        last,
        time.time(),
    )
    ws.checks = judge_watch_service(seen, min(inv.watch.health_every, inv.watch.inflight_interval), name=name)
    return ws


#: `pdctl status`'s "watch" entry: service, manager, state, pid, and detail / restarts when known (JSON scalars)
WatchBrief = dict[str, str | int | None]


def brief(inv: Inventory) -> WatchBrief:
    """One line's worth for `pdctl status`: is this deployment's watch service installed, running, as which pid.
    Never raises: a manager that did not answer is said as the state "unknown"."""
    kind, _ = manager_kind()
    name = service_name(inv.name)
    out: WatchBrief = {"service": name, "manager": kind, "state": "unknown", "pid": None}
    try:
        mgr = _manager(kind)
        if mgr.not_installed(name) is not None:
            out["state"] = "not installed"
            return out
        st = mgr.status(name)
        out.update(state="running" if st.active else "stopped", pid=st.main_pid, detail=st.detail)
        if kind == "systemd":
            out["restarts"] = st.restarts
    except Exception as e:  # status must still show the roles
        out["detail"] = (getattr(e, "message", None) or str(e) or type(e).__name__).splitlines()[0]
    return out


def _listen_of(argv) -> str | None:
    argv = list(argv)
    return argv[argv.index("--listen") + 1] if "--listen" in argv[:-1] else None
