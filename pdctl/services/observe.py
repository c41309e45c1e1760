"""Every service of one host and its main process, read in ONE remote command.

final-health needs, for each role on a host, the service's state and its main process's argv, env and start time.
Asked one by one that is three round trips per role (pidfile or `systemctl show`, a /proc liveness probe, the
/proc dump); over SSH each is an exec channel. `observe_command` asks for all of a host's services at once and
`parse_observation` splits the answer; the managers judge each service from it exactly as `status()` does.

Output of the command (one line each): `btime N`, `clk N`, then per service `@@svc NAME`, its record line
(`rec BASE64` of the pidfile, or `show BASE64` of `systemctl show` plus `rc N`, `!` when unreadable), and when a
main pid is known `@@pid N` followed by `gone` or the `cmdline`/`environ`/`stat` lines of `checks.proc`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from pdctl.checks.proc import GONE_MARK, ProcessInfo, parse_proc_dump
from pdctl.shell import quote

# Few processes on the host: every fork is a millisecond or two, and this runs on each check. Builtins do the
# parsing (`read`, parameter expansion); only base64 (one per file) and getconf are executed.
_B64_FN = (
    "if base64 -w0 </dev/null >/dev/null 2>&1; then pdctl_b64() { base64 -w0 2>/dev/null < \"$1\" || printf '!'; }; "
    "else pdctl_b64() { if [ -r \"$1\" ]; then base64 < \"$1\" | tr -d '\\n'; else printf '!'; fi; }; fi"
)
# prints the /proc dump of pid $1 in checks.proc's line format, or `gone`
_DUMP_FN = (
    'pdctl_dump() { [ -d "/proc/$1" ] || { echo gone; return 0; }; '
    'for f in cmdline environ stat; do printf \'%s \' "$f"; pdctl_b64 "/proc/$1/$f"; echo; done; }'
)
_CLOCK = (
    'while read -r k v; do if [ "$k" = btime ]; then echo "btime ${v%% *}"; break; fi; done < /proc/stat; '
    "printf 'clk '; getconf CLK_TCK 2>/dev/null || echo 100"
)


def pidfile_observe_command(services: dict[str, str]) -> str:
    """The one command for pidfile services: {name: pidfile path}. The pid is taken from the pidfile on the host."""
    parts = [_B64_FN, _DUMP_FN, _CLOCK]
    for name, path in services.items():
        f = quote(path)
        parts.append(
            f"echo {quote('@@svc ' + name)}; printf 'rec '; pdctl_b64 {f}; echo; "
            f'line=; read -r line 2>/dev/null < {f}; pid=${{line#*\\"pid\\": }}; pid=${{pid%%[!0-9]*}}; '
            'if [ -n "$line" ] && [ -n "$pid" ]; then echo "@@pid $pid"; pdctl_dump "$pid"; fi'
        )
    return "\n".join(parts)


def systemd_observe_command(units: dict[str, str], properties: tuple[str, ...]) -> str:
    """The one command for systemd services: {name: unit}. `systemctl show` once per unit, then its MainPID's dump."""
    props = " ".join(f"-p {quote(p)}" for p in properties)
    parts = [_B64_FN, _DUMP_FN, _CLOCK]
    for name, unit in units.items():
        parts.append(
            f"echo {quote('@@svc ' + name)}; s=$(systemctl show {quote(unit)} {props} 2>&1); "
            "echo \"rc $?\"; printf 'show %s\\n' \"$(printf '%s\\n' \"$s\" | base64 | tr -d '\\n')\"; "
            'pid=; while read -r kv; do case "$kv" in MainPID=*) pid=${kv#MainPID=};; esac; done <<PDCTL_EOF\n'
            "$s\nPDCTL_EOF\n"
            'if [ -n "$pid" ] && [ "$pid" != 0 ]; then echo "@@pid $pid"; pdctl_dump "$pid"; fi'
        )
    return "\n".join(parts)


@dataclass
class ServiceObservation:
    """What the host said about one service: its record (pidfile bytes or `systemctl show` text; None when
    missing or unreadable), the exit code of the read (systemd), and the main process (None: no pid, or gone)."""

    name: str
    record: bytes | None = None
    rc: int = 0
    pid: int | None = None
    process: ProcessInfo | None = None
    stat: str | None = None  # the raw /proc/PID/stat, for the zombie check
    notes: list[str] = field(default_factory=list)


def record_of(raw: bytes | None) -> dict:
    """A pidfile's content as {"pid": int, "start_ticks"?: int}; {} when missing or not a pidfile."""
    import json

    if raw is None:
        return {}
    try:
        d = json.loads(raw)
        return d if isinstance(d, dict) and isinstance(d.get("pid"), int) else {}
    except ValueError:
        return {}


def run_observation(run, host: str, command: str, names: list[str]) -> dict[str, ServiceObservation]:
    """Run an observe command with the manager's `run(cmd, what)` (which raises `no_answer` on a timeout: unknown)
    and return one observation per name. StepFailed, naming the host, when the command failed on the host."""
    from pdctl.errors import StepFailed

    res = run(command, f"reading {len(names)} service(s) and /proc")
    seen = parse_observation(res.stdout) if res.ok else {}
    missing = [n for n in names if n not in seen]
    if missing:
        raise StepFailed(
            f"{host}: reading the state of {', '.join(missing)} and /proc failed "
            f"(exit {res.exit_code}): {res.stderr.strip()[:300] or 'no output'}"
        )
    return {n: seen[n] for n in names}


def _decode(value: str) -> bytes | None:
    if value == "!":
        return None
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        return None


def parse_observation(stdout: str) -> dict[str, ServiceObservation]:
    """Split the output of an observe command into one ServiceObservation per service, in the order asked."""
    clock: list[str] = []
    out: dict[str, ServiceObservation] = {}
    current: ServiceObservation | None = None
    dump: list[str] = []

    def finish_dump() -> None:
        if current is not None and current.pid is not None and dump:
            current.process = parse_proc_dump(current.pid, "\n".join(dump + clock))
            stat = next((line[5:] for line in dump if line.startswith("stat ")), None)
            raw = _decode(stat) if stat is not None else None
            current.stat = raw.decode(errors="replace") if raw else None
        dump.clear()

    for line in stdout.splitlines():
        key, _, value = line.partition(" ")
        if current is None and key in ("btime", "clk"):
            clock.append(line)
        elif key == "@@svc":
            finish_dump()
            current = out[value] = ServiceObservation(value)
        elif current is None:
            continue
        elif key in ("rec", "show") and current.pid is None:
            current.record = _decode(value.strip())
        elif key == "rc" and current.pid is None:
            current.rc = int(value) if value.strip().isdigit() else -1
        elif key == "@@pid":
            finish_dump()
            current.pid = int(value) if value.strip().isdigit() else None
        elif current.pid is not None:
            dump.append(GONE_MARK if line.strip() == "gone" else line)
    finish_dump()
    return out
