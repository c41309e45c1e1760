"""PidfileManager: services without systemd (the embedded default, CI, plain hosts).

Files under `state_dir` on the host: `<name>.json` (argv, env, workdir), `<name>.pid` (pid, start time),
`<name>.log` (stdout+stderr, appended). The start time comes from /proc/<pid>/stat so a reused pid is never mistaken
for the service. The launching shell itself writes the pidfile (atomically, before it even tells pdctl the pid), so
a pdctl killed right after a launch (even kill -9) never leaves a running service without one. Every host-side
action goes through the Transport, so local and SSH behave the same.

The pure parsers (`parse_proc_stat`, `parse_proc_stat_starttime`, `ticks_to_epoch`, `parse_proc_probe`) are shared
with the systemd manager.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pdctl.errors import StepFailed
from pdctl.poll import poll_until
from pdctl.services.base import ServiceManager, ServiceSpec, ServiceStatus
from pdctl.services.held_signals import stop_signals_held
from pdctl.shell import env_assignments, quote, quote_argv
from pdctl.transport.base import Transport, no_answer

if TYPE_CHECKING:
    from pdctl.checks.proc import ProcessInfo

#: variables a launched process inherits from the host's shell; the spec's env is added on top
INHERITED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ")

START_CHECK_SECONDS = 1.0

#: first words of the line written to a service's log at each start (before the process runs)
START_MARKER = "==== pdctl: start of "
# $$ is the pid that exec keeps through setsid and env, i.e. the service's main pid
_MARK_AND_EXEC = 'echo "' + START_MARKER + '$1 at $(date -u +%Y-%m-%dT%H:%M:%SZ) (pid $$) ===="; shift; exec "$@"'


def since_last_start(log_text: str) -> str:
    """The part of a log from its last start marker on (all of it when no marker is in view)."""
    lines = log_text.splitlines(keepends=True)
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(START_MARKER):
            return "".join(lines[i:])
    return log_text


# -- pure parsers ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str  # R, S, D, Z, T, ...
    pgrp: int
    starttime: int  # clock ticks after boot (field 22)


def parse_proc_stat(stat_text: str) -> ProcStat:
    """Parse one /proc/<pid>/stat line. The comm field may hold spaces and parentheses: split at the last ')'."""
    text = stat_text.strip()
    lpar, rpar = text.find("("), text.rfind(")")
    if lpar < 0 or rpar < lpar:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    pid = int(text[:lpar].strip())
    rest = text[rpar + 1 :].split()
    # rest[0] is field 3 (state); field N is rest[N - 3]
    if len(rest) < 20:
        raise ValueError(f"truncated /proc/<pid>/stat line: {text[:80]!r}")
    return ProcStat(pid=pid, state=rest[0], pgrp=int(rest[2]), starttime=int(rest[19]))


def parse_proc_stat_starttime(stat_text: str) -> int:
    """Field 22 of /proc/<pid>/stat: the process start time in clock ticks since boot."""
    return parse_proc_stat(stat_text).starttime


def ticks_to_epoch(ticks: int, btime: int, clk_tck: int) -> float:
    """Epoch seconds of a start time in ticks since boot, given /proc/stat's btime and SC_CLK_TCK."""
    return btime + ticks / clk_tck


def parse_btime(proc_stat_text: str) -> int:
    """The `btime` line of /proc/stat (boot time, epoch seconds)."""
    for line in proc_stat_text.splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    raise ValueError("no btime line in /proc/stat output")


@dataclass(frozen=True)
class ProcStart:
    pid: int
    state: str
    start_ticks: int
    started_at: float  # epoch seconds

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X", "x")


# The probe prints three marked sections so that one round trip answers "is pid alive, and since when".
_PROBE = (
    'stat=$(cat /proc/{pid}/stat 2>/dev/null) || exit 1; echo "STAT $stat"; '
    "grep '^btime ' /proc/stat; echo \"CLK_TCK $(getconf CLK_TCK)\""
)


def proc_probe_command(pid: int) -> str:
    """Shell command whose output `parse_proc_probe` understands; exits 1 when the pid does not exist."""
    return _PROBE.format(pid=int(pid))


def parse_proc_probe(text: str) -> ProcStart | None:
    """Parse the output of `proc_probe_command`; None if it lacks the stat line."""
    stat = btime = clk = None
    for line in text.splitlines():
        if line.startswith("STAT "):
            stat = parse_proc_stat(line[5:])
        elif line.startswith("btime "):
            btime = int(line.split()[1])
        elif line.startswith("CLK_TCK "):
            clk = int(line.split()[1])
    if stat is None or btime is None:
        return None
    return ProcStart(stat.pid, stat.state, stat.starttime, ticks_to_epoch(stat.starttime, btime, clk or 100))


def read_proc_start(transport: Transport, pid: int, *, timeout: float = 10.0) -> ProcStart | None:
    """Observe /proc/<pid> on the transport's host: state and start time; None if no such process.

    Raises `no_answer` (UnreachableError, exit 3) when the probe overruns `timeout`: a host that did not answer
    says nothing about the pid, so it is never read as "gone"."""
    res = transport.run(proc_probe_command(pid), timeout=timeout)
    if res.timed_out:
        raise no_answer(transport.name, timeout, f"reading /proc/{int(pid)}")
    if not res.ok:
        return None
    try:
        return parse_proc_probe(res.stdout)
    except ValueError:
        return None


def status_from_record(name: str, rec: dict, info: ProcStart | None) -> ServiceStatus:
    """Judge a pidfile record against the recorded pid's /proc state (None: no such process)."""
    if not rec:
        return ServiceStatus(name, False, None, None, "not running (no pidfile)")
    pid = rec["pid"]
    if info is None or not info.alive:
        return ServiceStatus(name, False, None, None, f"stale pidfile: pid {pid} is gone")
    if "start_ticks" not in rec:  # the launching shell found no /proc entry: the process was gone at once
        return ServiceStatus(name, False, None, None, f"stale pidfile: pid {pid} exited as it was launched")
    if info.start_ticks != rec.get("start_ticks"):
        return ServiceStatus(name, False, None, None, f"stale pidfile: pid {pid} now belongs to another process")
    return ServiceStatus(name, True, pid, info.started_at, "running")


# -- the manager ----------------------------------------------------------------------------------------------
class PidfileManager(ServiceManager):
    """Detached processes tracked by pidfiles under `state_dir` on the transport's host."""

    def __init__(self, transport: Transport, state_dir: str, *, command_timeout: float = 30.0):
        self.t = transport
        self.state_dir = state_dir.rstrip("/") or "/"
        self.command_timeout = command_timeout
        self._started: set[str] = set()  # services this manager launched (their log tails start at that launch)

    # paths
    def spec_path(self, name: str) -> str:
        return f"{self.state_dir}/{name}.json"

    def pid_path(self, name: str) -> str:
        return f"{self.state_dir}/{name}.pid"

    def log_path(self, name: str) -> str:
        return f"{self.state_dir}/{name}.log"

    def _run(self, cmd: str, what: str, timeout: float | None = None):
        """Run `cmd`; one that overruns its timeout raises `no_answer` naming `what` (unknown, exit 3): a kill or
        rm that did not answer says nothing about the process or the file."""
        limit = timeout or self.command_timeout
        res = self.t.run(cmd, timeout=limit)
        if res.timed_out:
            raise no_answer(self.t.name, limit, what)
        return res

    def _guard(self) -> None:
        """Before anything is written or removed under state_dir: the path on the host is checked once per
        transport (pdctl.services.state_dir_guard: another user's link on the way is refused, exit 4)."""
        from pdctl.services.state_dir_guard import ensure_state_dir

        ensure_state_dir(self.t, self.state_dir)

    def _proc(self, pid: int) -> ProcStart | None:
        return read_proc_start(self.t, pid, timeout=self.command_timeout)

    def _read(self, path: str) -> bytes | None:
        return self.t.read_file(path, timeout=self.command_timeout)

    # -- install ---------------------------------------------------------------------------------------------
    def render(self, spec: ServiceSpec) -> str:
        """The spec text `install` would write. Pure."""
        return self.render_spec(spec)

    @staticmethod
    def render_spec(spec: ServiceSpec) -> str:
        return (
            json.dumps(
                {
                    "name": spec.name,
                    "argv": list(spec.argv),
                    "env": dict(spec.env),
                    "workdir": spec.workdir,
                    "description": spec.description,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )

    def install(self, spec: ServiceSpec) -> bool:
        """Write `<state_dir>/<name>.json`. Returns True if it differs from what was there. Safe while running."""
        if self.is_current(spec):
            return False
        self._guard()
        self.t.put_file(self.spec_path(spec.name), self.render_spec(spec), mode=0o600)
        return True

    def is_current(self, spec: ServiceSpec) -> bool:
        current = self._read(self.spec_path(spec.name))
        return current is not None and current.decode(errors="replace") == self.render_spec(spec)

    def installed_spec(self, name: str) -> ServiceSpec | None:
        raw = self._read(self.spec_path(name))
        if raw is None:
            return None
        try:
            d = json.loads(raw)
            argv = tuple(d["argv"])
        except (ValueError, KeyError, TypeError):
            raise StepFailed(
                f"{self.t.name}: {self.spec_path(name)} is not a pdctl service spec "
                "(corrupt or written by hand); run `pdctl deploy` to rewrite it"
            ) from None
        return ServiceSpec(
            name=name,
            argv=argv,
            env=dict(d.get("env") or {}),
            workdir=d.get("workdir"),
            description=d.get("description") or "",
        )

    def not_installed(self, name: str) -> str | None:
        """Raises StepFailed for a corrupt spec (as start would), UnreachableError for a host that did not answer."""
        return None if self.installed_spec(name) is not None else f"{self.spec_path(name)} missing"

    def purge(self, name: str, *, keep_log: bool = False) -> list[str]:
        """Remove the spec, pidfile and log of a stopped service (the log may hold what secrets masking missed;
        `keep_log` keeps it, said in the list)."""
        self._guard()
        if self.status(name).active:
            raise StepFailed(f"{self.t.name}: {name!r} is running: stop it before purging its files")
        paths = [self.spec_path(name), self.pid_path(name)] + ([] if keep_log else [self.log_path(name)])
        # only what was there is said removed (a role never deployed here had none)
        res = self._run(
            "rc=0; for p in " + " ".join(quote(p) for p in paths) + "; do "
            'if [ -e "$p" ] || [ -L "$p" ]; then '
            'if rm -f -- "$p"; then printf \'%s\\n\' "$p"; else rc=1; fi; fi; done; [ $rc -eq 0 ]',
            f"removing the files of {name}",
        )
        if not res.ok:
            raise StepFailed(f"{self.t.name}: could not remove the files of {name!r}: {res.stderr.strip()}")
        removed = [p for p in paths if p in res.stdout.splitlines()]
        return (removed or ["(no files there)"]) + ([f"(log {self.log_path(name)} kept)"] if keep_log else [])

    # -- start -----------------------------------------------------------------------------------------------
    def launch_command(self, spec: ServiceSpec) -> str:
        """The shell command that starts `spec` detached and prints its pid (setsid: pid == process group)."""
        inherited = " ".join(f'{v}="${{{v}:-}}"' for v in INHERITED_ENV)
        assigns = env_assignments(spec.env)
        cd = f"cd {quote(spec.workdir)} && " if spec.workdir else ""
        log = quote(self.log_path(spec.name))
        return (
            # the log may echo secrets (a traceback with the cmdline): 0600 like the spec, also an older one
            # and a link there is nobody's pdctl made: neither created nor appended to through it
            f"mkdir -p {quote(self.state_dir)} && {{ [ ! -L {log} ] || {{ echo {log}: a symbolic link, not "
            f"followed >&2; exit 1; }}; }} && : >>{log} && chmod 600 {log} && {cd}"
            f"{{ sh -c {quote(_MARK_AND_EXEC)} sh {quote(spec.name)} setsid env -i {inherited} {assigns} "
            f"{quote_argv(spec.argv)} "
            f"</dev/null >>{quote(self.log_path(spec.name))} 2>&1 & }} ; {self._record_pid(spec.name)}"
        )

    def _record_pid(self, name: str) -> str:
        """Shell run right after the launch: write `<name>.pid` (pid and /proc start ticks) atomically, then print
        the pid. A pidfile that cannot be written kills the process (never a service running without one)."""
        pidfile, tmp = quote(self.pid_path(name)), quote(self.pid_path(name) + ".tmp")
        # field 22 of /proc/<pid>/stat, counted after the last ')' (the comm field may hold spaces and parentheses)
        return (
            "p=$!; t=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f20); "
            f'{{ if [ -n "$t" ]; then printf \'{{"pid": %s, "start_ticks": %s}}\\n\' "$p" "$t"; '
            f'else printf \'{{"pid": %s}}\\n\' "$p"; fi; }} >{tmp} && mv -f {tmp} {pidfile} '
            f"|| {{ kill -KILL -$p 2>/dev/null || kill -KILL $p; echo could not write {pidfile} >&2; "
            "exit 1; }; echo $p"
        )

    def start(self, name: str) -> None:
        """Start detached; no-op if running. Raises StepFailed if not installed or if it exits within ~1 s."""
        self._guard()
        if self.status(name).active:
            return
        spec = self.installed_spec(name)
        if spec is None:
            raise StepFailed(f"{self.t.name}: service {name!r} is not installed ({self.spec_path(name)} missing)")
        with stop_signals_held():  # the pidfile is on the host before an interrupt can land
            res = self._run(self.launch_command(spec), f"launching {name}")
            self._started.add(name)
        pid_text = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
        if not res.ok or not pid_text.isdigit():
            raise StepFailed(
                f"{self.t.name}: could not launch {name!r}: exit {res.exit_code}: {(res.stderr or res.stdout).strip()}"
            )
        pid = int(pid_text)
        info = self._proc(pid)
        ticks = info.start_ticks if info is not None else None

        def alive() -> bool:  # the same process (start time), still running
            now = self._proc(pid)
            return now is not None and now.alive and now.start_ticks == ticks

        stays_up = info is not None and info.alive
        if stays_up:
            died = poll_until(alive, lambda up: not up, timeout=START_CHECK_SECONDS, interval=0.05)
            stays_up = not died.ok
        if not stays_up:
            tail = self.log_tail(name, 30, since_start=True)
            raise StepFailed(
                f"{self.t.name}: {name!r} (pid {pid}) exited within {START_CHECK_SECONDS:g}s of start; "
                f"log {self.log_path(name)} ends with:\n{tail}"
            )

    # -- observe ---------------------------------------------------------------------------------------------
    def _recorded(self, name: str) -> dict:
        from pdctl.services.observe import record_of

        return record_of(self._read(self.pid_path(name)))

    def status(self, name: str) -> ServiceStatus:
        """Active only if the recorded pid is alive AND its /proc start time matches the recorded one. Raises
        `no_answer` (UnreachableError) when the pidfile or /proc read overruns command_timeout: unknown, not stopped."""
        rec = self._recorded(name)
        return status_from_record(name, rec, self._proc(rec["pid"]) if rec else None)

    def observe(self, names: list[str]) -> dict[str, tuple[ServiceStatus, "ProcessInfo | None"]]:
        """Every pidfile, each recorded pid's liveness and its /proc argv/env/start time, in ONE command."""
        from pdctl.services.observe import pidfile_observe_command, record_of, run_observation

        out: dict[str, tuple[ServiceStatus, ProcessInfo | None]] = {}
        command = pidfile_observe_command({n: self.pid_path(n) for n in names})
        for name, o in run_observation(self._run, self.t.name, command, names).items():
            rec, start = record_of(o.record), None
            if rec and o.pid is not None and o.pid == rec["pid"] and o.process is not None and o.stat:
                stat = parse_proc_stat(o.stat)
                start = ProcStart(o.pid, stat.state, stat.starttime, o.process.start_time or 0.0)
            st = status_from_record(name, rec, start)
            out[name] = (st, o.process if st.active else None)
        return out

    # -- stop ------------------------------------------------------------------------------------------------
    def stop(self, name: str, *, grace: float = 20.0) -> None:
        """SIGTERM the process group, wait up to `grace` (polling), then SIGKILL. Removes the pidfile."""
        self._guard()  # before the pidfile is read: its pid is killed
        st = self.status(name)
        if not st.active:
            self._run(f"rm -f -- {quote(self.pid_path(name))}", f"removing {self.pid_path(name)}")
            return
        pid = st.main_pid
        if pid is None:  # an active status always carries its pid
            raise StepFailed(f"{self.t.name}: {name!r} is running but its pid is unknown")
        start_ticks = self._recorded(name).get("start_ticks")
        self._run(f"kill -TERM -{pid} 2>/dev/null || kill -TERM {pid} 2>/dev/null; true", f"kill -TERM {pid}")
        if not self._wait_gone(pid, start_ticks, grace):
            self._run(f"kill -KILL -{pid} 2>/dev/null || kill -KILL {pid} 2>/dev/null; true", f"kill -KILL {pid}")
            if not self._wait_gone(pid, start_ticks, 10.0):
                raise StepFailed(f"{self.t.name}: {name!r} (pid {pid}) survived SIGKILL for 10s")
        # stragglers of the group (children that ignored SIGTERM); the group id cannot be reused while they live
        self._run(
            f"kill -KILL -{pid} 2>/dev/null; rm -f -- {quote(self.pid_path(name))}",
            f"kill -KILL -{pid} and removing {self.pid_path(name)}",
        )

    def _wait_gone(self, pid: int, start_ticks: int | None, limit: float) -> bool:
        def gone(info) -> bool:
            return info is None or not info.alive or info.start_ticks != start_ticks

        return poll_until(lambda: self._proc(pid), gone, timeout=limit, interval=0.02, backoff=1.5, max_interval=0.2).ok

    def missing_log(self, name: str) -> str | None:
        path = self.log_path(name)
        res = self._run(f"test -e {quote(path)}", f"looking for {path}")
        return path if res.exit_code == 1 else None  # any other failure: let the read say what it found

    def log_tail(self, name: str, lines: int = 200, *, since_start: bool | None = None) -> str:
        """The log's last lines, with the service's secret env/flag values (and any SECRET=... text) masked.

        since_start: only the lines from the last start marker on, so that a failed start never shows an earlier
        process's lines (its "ready" line, say). None means: when this manager launched `name` itself (the
        failure checks after a start); a plain read (`pdctl logs`) gets the whole tail, markers included."""
        from pdctl.secrets import mask_text, secret_values

        res = self._run(
            f"tail -n {int(lines)} -- {quote(self.log_path(name))} 2>/dev/null", f"reading {self.log_path(name)}"
        )
        try:
            spec = self.installed_spec(name)
        except StepFailed:  # a corrupt spec must not hide the log; pattern masking still applies
            spec = None
        if since_start or (since_start is None and name in self._started):
            text = since_last_start(res.stdout)
        else:
            text = res.stdout
        return mask_text(text, secret_values(spec.env, spec.argv) if spec else ())
