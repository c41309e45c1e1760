"""SystemdManager: a role as a systemd unit under /etc/systemd/system, driven with systemctl over the Transport.

`render_unit` is pure (and checked by `systemd-analyze verify` in tests); `parse_systemctl_show` is the pure half of
`status`. The main process' start time is read from /proc (the helper the pidfile manager uses), so both managers
report the same clock.
"""

from __future__ import annotations

import calendar
import json
import re
from typing import TYPE_CHECKING

from pdctl.errors import StepFailed
from pdctl.poll import poll_until
from pdctl.services.base import ServiceManager, ServiceSpec, ServiceStatus
from pdctl.services.pidfile import parse_proc_stat, read_proc_start
from pdctl.shell import check_env_name, quote
from pdctl.transport.base import Transport, no_answer

if TYPE_CHECKING:
    from pdctl.checks.proc import ProcessInfo

UNIT_DIR = "/etc/systemd/system"
SHOW_PROPERTIES = (
    "Id",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "MainPID",
    "ExecMainPID",
    "ExecMainStatus",
    "ExecMainStartTimestamp",
    "ExecMainStartTimestampMonotonic",
    "NRestarts",
    "FragmentPath",
)
START_CHECK_SECONDS = 1.0

_BARE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


# -- pure rendering -------------------------------------------------------------------------------------------
def _escape_common(value: str) -> str:
    if "\x00" in value:
        raise ValueError("NUL byte in a unit value")
    return value.replace("%", "%%")


def systemd_quote_arg(arg: str, *, first: bool = False) -> str:
    """One ExecStart argument: `$` -> `$$` (no variable expansion), `%` -> `%%` (no specifiers), C-style escapes
    inside double quotes when the argument is not a plain word."""
    s = _escape_common(str(arg)).replace("$", "$$")
    if s == ";":
        return "\\;"
    if s and _BARE.match(s) and not (first and s.startswith(("@", "-", "+", "!", ":"))):
        return s
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'"{s}"'


def systemd_exec_line(argv: tuple[str, ...] | list[str]) -> str:
    if not argv:
        raise ValueError("empty argv")
    if not str(argv[0]).startswith("/"):
        raise ValueError(f"ExecStart needs an absolute path, got {argv[0]!r}")
    return " ".join(systemd_quote_arg(a, first=(i == 0)) for i, a in enumerate(argv))


def systemd_environment_line(name: str, value: str) -> str:
    """`Environment="NAME=value"` with `%`, `\\`, `"` escaped (Environment= does not expand `$`)."""
    check_env_name(name)
    v = _escape_common(str(value))
    v = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'Environment="{name}={v}"'


SPEC_MARK = "# pdctl-spec: "


def spec_from_unit(name: str, text: str) -> ServiceSpec | None:
    """The spec pdctl embedded in a unit it rendered; None for a unit written by hand or an older pdctl."""
    for line in text.splitlines():
        if line.startswith(SPEC_MARK):
            try:
                d = json.loads(line[len(SPEC_MARK) :])
                return ServiceSpec(
                    name=name,
                    argv=tuple(d["argv"]),
                    env=dict(d.get("env") or {}),
                    workdir=d.get("workdir"),
                    description=d.get("description") or "",
                )
            except (ValueError, KeyError, TypeError):
                return None
    return None


def unit_name(name: str) -> str:
    return name if name.endswith(".service") else f"{name}.service"


def render_unit(
    spec: ServiceSpec,
    restart: str = "on-failure",
    *,
    restart_sec: float = 5,
    timeout_stop_sec: float = 30,
    watchdog_sec: float | None = None,
    success_exit_status: str | None = None,
) -> str:
    """The unit file text for `spec`. Pure. Raises ValueError on an unusable spec (relative ExecStart, bad env).

    watchdog_sec: a Type=notify unit (the process says READY=1 and pings WATCHDOG=1 over $NOTIFY_SOCKET, only its
    main process is heard) that systemd kills and restarts when the pings stop for that long. success_exit_status:
    exit codes that are a clean stop (pdctl exits 130 on SIGTERM), so `systemctl stop` leaves it inactive, not
    failed."""
    desc = _escape_common(spec.description or f"pdctl {spec.name}").replace("\n", " ")
    lines = [
        "# Managed by pdctl: changes here are overwritten by `pdctl deploy`.",
        # The spec itself, so a later deploy can say what it changes (the unit is 0600: it may hold secrets).
        SPEC_MARK
        + json.dumps(
            {"argv": list(spec.argv), "env": dict(spec.env), "workdir": spec.workdir, "description": spec.description},
            sort_keys=True,
        ),
        "[Unit]",
        f"Description={desc}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
    ]
    if watchdog_sec is not None:
        if not watchdog_sec > 0:
            raise ValueError(f"WatchdogSec must be > 0, got {watchdog_sec!r}")
        lines += ["Type=notify", "NotifyAccess=main", f"WatchdogSec={watchdog_sec:g}"]
    else:
        lines.append("Type=simple")
    if spec.workdir:
        # the inventory refuses both for a host's workdir; a spec from elsewhere (the watch's cwd) may still hold them
        if any(ch in spec.workdir for ch in "\n\r"):
            raise ValueError(f"workdir {spec.workdir!r} contains a newline: a unit's WorkingDirectory= is one line")
        if not spec.workdir.startswith("/"):
            raise ValueError(f"workdir {spec.workdir!r} is not an absolute path, which WorkingDirectory= needs")
        lines.append(f"WorkingDirectory={_escape_common(spec.workdir)}")
    lines += [systemd_environment_line(k, v) for k, v in spec.env.items()]
    lines += [
        f"ExecStart={systemd_exec_line(spec.argv)}",
        f"Restart={restart}",
        f"RestartSec={restart_sec:g}",
        *([f"SuccessExitStatus={success_exit_status}"] if success_exit_status else []),
        "KillMode=mixed",
        f"TimeoutStopSec={timeout_stop_sec:g}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


# -- pure parsing ---------------------------------------------------------------------------------------------
def parse_systemctl_show(text: str) -> dict[str, str]:
    """`Key=Value` lines of `systemctl show` into a dict (values kept as text; the first `=` splits)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.rstrip("\r")
    return out


def parse_systemd_timestamp(value: str) -> float | None:
    """`Tue 2025-03-11 09:41:07 UTC` -> epoch seconds. Only UTC/GMT or a numeric offset; None otherwise."""
    m = re.match(r"^(?:\w{3} )?(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? ?(\S+)?$", value.strip())
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    frac = float("0." + m.group(7)) if m.group(7) else 0.0
    tz = m.group(8) or "UTC"
    epoch = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac
    if tz in ("UTC", "GMT", "Z"):
        return epoch
    off = re.match(r"^([+-])(\d\d):?(\d\d)$", tz)
    if off:
        sign = 1 if off.group(1) == "+" else -1
        return epoch - sign * (int(off.group(2)) * 3600 + int(off.group(3)) * 60)
    return None


def status_from_show(name: str, show: dict[str, str]) -> ServiceStatus:
    """Judge a parsed `systemctl show`: active means ActiveState=active with a MainPID. Start time from the
    ExecMainStartTimestamp when it is in UTC (the manager replaces it with the /proc time when it can); the
    restarts systemd made on its own (NRestarts, reset by a manual start or restart) kept for the lineage layer."""
    active_state = show.get("ActiveState", "unknown")
    sub = show.get("SubState", "unknown")
    pid = int(show.get("MainPID") or 0) or None
    active = active_state == "active" and pid is not None
    detail = f"{active_state}/{sub}"
    if show.get("LoadState") not in (None, "loaded"):
        detail += f" (LoadState={show['LoadState']})"
    if show.get("Result") not in (None, "", "success"):
        detail += f" (Result={show['Result']})"
    started = parse_systemd_timestamp(show.get("ExecMainStartTimestamp", "")) if active else None
    restarts = int(show["NRestarts"]) if show.get("NRestarts", "").isdigit() else None
    return ServiceStatus(name, active, pid if active else None, started, detail, restarts)


# -- the manager ----------------------------------------------------------------------------------------------
class SystemdManager(ServiceManager):
    """Units in `unit_dir` on the transport's host; needs root (or equivalent) there."""

    def __init__(
        self,
        transport: Transport,
        *,
        unit_dir: str = UNIT_DIR,
        restart: str = "on-failure",
        timeout_stop_sec: float = 30,
        command_timeout: float = 60.0,
        unit_options: dict | None = None,
    ):
        self.t = transport
        self.unit_options = dict(unit_options or {})  # more of render_unit's keywords (the watch's watchdog)
        self.unit_dir = unit_dir.rstrip("/")
        self.restart_policy = restart
        self.timeout_stop_sec = timeout_stop_sec
        self.command_timeout = command_timeout

    def unit_path(self, name: str) -> str:
        return f"{self.unit_dir}/{unit_name(name)}"

    def _systemctl(self, *args: str, timeout: float | None = None):
        """Run systemctl; one that overruns its timeout raises `no_answer` (unknown), never a unit's failure."""
        cmd = "systemctl " + " ".join(quote(a) for a in args)
        limit = timeout or self.command_timeout
        res = self.t.run(cmd, timeout=limit)
        if res.timed_out:
            raise no_answer(self.t.name, limit, f"systemctl {args[0]}")
        return res

    def _fail(self, what: str, name: str, res) -> StepFailed:
        out = (res.stderr or res.stdout).strip()
        return StepFailed(f"{self.t.name}: {what} {unit_name(name)} failed (exit {res.exit_code}): {out}")

    def _render(self, spec: ServiceSpec) -> str:
        return render_unit(spec, self.restart_policy, timeout_stop_sec=self.timeout_stop_sec, **self.unit_options)

    def render(self, spec: ServiceSpec) -> str:
        """The unit text `install` would write for `spec`. Pure."""
        return self._render(spec)

    def enable(self, name: str) -> None:
        """`systemctl enable`: started at boot (multi-user.target). Raises StepFailed when systemctl refuses."""
        res = self._systemctl("enable", unit_name(name))
        if not res.ok:
            raise self._fail("enable of", name, res)

    def disable(self, name: str) -> None:
        res = self._systemctl("disable", unit_name(name))
        if not res.ok:
            raise self._fail("disable of", name, res)

    def installed_spec(self, name: str) -> ServiceSpec | None:
        raw = self.t.read_file(self.unit_path(name), timeout=self.command_timeout)
        return spec_from_unit(name, raw.decode(errors="replace")) if raw else None

    def not_installed(self, name: str) -> str | None:
        present = self.t.read_file(self.unit_path(name), timeout=self.command_timeout) is not None
        return None if present else f"unit file {self.unit_path(name)} missing"

    def is_current(self, spec: ServiceSpec) -> bool:
        current = self.t.read_file(self.unit_path(spec.name), timeout=self.command_timeout)
        return current is not None and current.decode(errors="replace") == self._render(spec)

    def purge(self, name: str) -> list[str]:
        """Remove the unit file of a stopped service and reload systemd. The journal keeps its lines (journald
        rotates them; pdctl does not delete them): said in the result."""
        if self.status(name).active:
            raise StepFailed(f"{self.t.name}: {unit_name(name)} is active: stop it before purging its unit")
        unit = quote(self.unit_path(name))
        res = self.t.run(
            f"if [ -e {unit} ] || [ -L {unit} ]; then rm -f -- {unit} && echo removed; fi", timeout=self.command_timeout
        )
        if res.timed_out:
            raise no_answer(self.t.name, self.command_timeout, f"removing {self.unit_path(name)}")
        if not res.ok:
            raise self._fail("removing the unit file of", name, res)
        if "removed" not in res.stdout:  # never installed here: nothing to remove, nothing to reload
            return [f"(no unit file {self.unit_path(name)} there)"]
        reload = self._systemctl("daemon-reload")
        if not reload.ok:
            raise self._fail("daemon-reload after removing", name, reload)
        return [self.unit_path(name), f"(journal of {unit_name(name)} kept: journald rotates it)"]

    def install(self, spec: ServiceSpec) -> bool:
        """Write the unit if its text changed, then `systemctl daemon-reload`. Returns whether it changed."""
        if self.is_current(spec):
            return False
        self.t.put_file(self.unit_path(spec.name), self._render(spec), mode=0o600)
        res = self._systemctl("daemon-reload")
        if not res.ok:
            raise self._fail("daemon-reload after writing", spec.name, res)
        return True

    def start(self, name: str) -> None:
        """`systemctl start`; then for ~1 s make sure it did not fail or enter auto-restart (StepFailed with the
        journal tail if it did). No-op if active."""
        if self.status(name).active:
            return
        res = self._systemctl("start", unit_name(name))
        if not res.ok:
            raise StepFailed(f"{self._fail('start of', name, res).message}\n{self.log_tail(name, 30)}")
        self._check_stays_up(name)

    def _check_stays_up(self, name: str) -> None:
        def exited(show: dict) -> bool:
            return show.get("ActiveState") in ("failed", "inactive") or show.get("SubState") == "auto-restart"

        w = poll_until(lambda: self.show(name), exited, timeout=START_CHECK_SECONDS, interval=0.1)
        if w.ok:
            show = w.value
            raise StepFailed(
                f"{self.t.name}: {unit_name(name)} exited right after start ({show.get('ActiveState')}/"
                f"{show.get('SubState')}, Result={show.get('Result')}); journal ends with:\n{self.log_tail(name, 30)}"
            )

    def stop(self, name: str, *, grace: float = 20.0) -> None:
        """`systemctl stop`: SIGTERM to the main process (KillMode=mixed), SIGKILL after the unit's TimeoutStopSec."""
        res = self._systemctl("stop", unit_name(name), timeout=max(grace, self.timeout_stop_sec) + 30)
        # exit 5 is systemctl's "unit not loaded" (LSB: not installed): no unit file, so nothing of it runs
        if not res.ok and res.exit_code != 5:
            raise self._fail("stop of", name, res)

    def restart(self, name: str, *, grace: float = 20.0) -> None:
        res = self._systemctl("restart", unit_name(name), timeout=max(grace, self.timeout_stop_sec) + 30)
        if not res.ok:
            raise StepFailed(f"{self._fail('restart of', name, res).message}\n{self.log_tail(name, 30)}")
        self._check_stays_up(name)

    def show(self, name: str) -> dict[str, str]:
        args = ["show", unit_name(name)]
        for p in SHOW_PROPERTIES:
            args += ["-p", p]
        res = self._systemctl(*args)
        if not res.ok:
            raise self._fail("systemctl show of", name, res)
        return parse_systemctl_show(res.stdout)

    def status(self, name: str) -> ServiceStatus:
        st = status_from_show(name, self.show(name))
        if st.active and st.main_pid:
            info = read_proc_start(self.t, st.main_pid, timeout=self.command_timeout)
            if info is not None and info.alive:
                st = ServiceStatus(st.name, True, st.main_pid, info.started_at, st.detail, st.restarts)
        return st

    def observe(self, names: list[str]) -> dict[str, tuple[ServiceStatus, "ProcessInfo | None"]]:
        """`systemctl show` of every unit and its MainPID's /proc argv/env/start time, in ONE command."""
        from pdctl.services.observe import run_observation, systemd_observe_command

        def run(cmd: str, what: str):
            res = self.t.run(cmd, timeout=self.command_timeout)
            if res.timed_out:
                raise no_answer(self.t.name, self.command_timeout, what)
            return res

        out: dict[str, tuple[ServiceStatus, ProcessInfo | None]] = {}
        command = systemd_observe_command({n: unit_name(n) for n in names}, SHOW_PROPERTIES)
        for name, o in run_observation(run, self.t.name, command, names).items():
            text = (o.record or b"").decode(errors="replace")
            if o.rc != 0 or o.record is None:
                out[name] = (
                    ServiceStatus(
                        name,
                        False,
                        None,
                        None,
                        f"systemctl show of {unit_name(name)} failed (exit {o.rc}): {text.strip()[:200]}",
                    ),
                    None,
                )
                continue
            st, proc = status_from_show(name, parse_systemctl_show(text)), o.process
            alive = (
                st.active
                and proc is not None
                and o.pid == st.main_pid
                and o.stat is not None
                and o.stat != ""
                and parse_proc_stat(o.stat).state not in ("Z", "X", "x")
            )
            if alive and proc is not None:  # as status(): the kernel's start time of the main process
                st = ServiceStatus(st.name, True, st.main_pid, proc.start_time, st.detail, st.restarts)
            out[name] = (st, proc if alive else None)
        return out

    def log_tail(self, name: str, lines: int = 200) -> str:
        """The journal's last lines, with SECRET=... assignments and --secret-flag values masked."""
        from pdctl.secrets import mask_text

        res = self.t.run(
            f"journalctl -u {quote(unit_name(name))} -n {int(lines)} --no-pager", timeout=self.command_timeout
        )
        if res.timed_out:
            raise no_answer(self.t.name, self.command_timeout, f"journalctl -u {unit_name(name)}")
        return mask_text(res.stdout if res.ok else (res.stdout + res.stderr))
