"""Do the kept SSH connections pay for themselves? pdctl with the keeper on and off over an SSH hop with 20 ms added.

The hop: a network namespace joined to this one by a veth pair (10.213.0.1/30 here, 10.213.0.2/30 there) and a real
OpenSSH server in the namespace with a throwaway host key and an authorized throwaway client key
(tests/fixtures/sshd.py's running_sshd, started with `ip netns exec`). The 20 ms: `tc netem delay 10ms` on both
veth ends where the kernel has netem; where it has not (this project's machines: no sch_netem, no fq for an EDT
delay), bench/delay_relay.py inside the namespace holds every byte 10 ms each way in front of the sshd (its
docstring says what it models). The inventory's roles are declared on that host but not running: the commands
measured only need SSH (pidfiles read over SFTP, /proc, a tunnel dial to a port where nothing listens), no engine.

Timed, paired and interleaved, --runs rounds of each command:
- keeper off: $PDCTL_SSH_KEEP=0, a new SSH connection (paramiko import and handshake) per run;
- keeper on, cold: $PDCTL_SSH_KEEP=300 with no keeper running (closed by an untimed `pdctl ssh --close`): the run
  starts the keeper, which connects;
- keeper on, warm: the same right after, over the kept connection;
- the seed's baseline: plain OpenSSH `ssh host true` over the same hop (a new connection each time).
Each row also says how many SSH connections the sshd accepted per run (its log), so "warm" is shown to be warm.

Needs root (namespaces, tc), iproute2 (ip, tc, ss) and openssh-server/-client; nothing else outside the repo.
Everything made is removed on exit, Ctrl-C or SIGTERM included: the keepers, the sshd and the relay this script
started (by pid), the namespace and its veth pair.
Run: sudo python3 bench/bench_keeper.py [--runs 7] [--delay-ms 10] [--delay-by auto|netem|relay]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.helpers import write_inventory  # noqa: E402
from tests.fixtures.keepers import keeper_pids  # noqa: E402
from tests.fixtures.net import wait_port  # noqa: E402
from tests.fixtures.sshd import SSHD, SshdServer, running_sshd  # noqa: E402

ROOT_ADDRESS = "10.213.0.1"
HOST_ADDRESS = "10.213.0.2"
PREFIX_LEN = 30
SSH_PORT = 2222  # not 22: known_hosts then names the host as [address]:port, as the fixture writes it
UPSTREAM_PORT = 2223  # the sshd behind delay_relay.py, on the namespace's own 127.0.0.1
KEEP_ON_S = "300"
COMMANDS = {
    "status": ["status"],
    "final-health --layer flags": ["verify", "final-health", "--layer", "flags"],
}


@dataclass(frozen=True)
class Hop:
    """The namespace at the far end of the delayed link, and the veth end that stays in this namespace."""

    netns: str
    root_veth: str
    delay_ms: float
    netem: bool  # False: the kernel has no netem; the delay is delay_relay.py's, in front of the sshd

    def exec_prefix(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.netns)


def _ip(*args: str) -> None:
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=15)
    if p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")


def _run_quiet(argv: list[str]) -> None:
    with contextlib.suppress(Exception):
        subprocess.run(argv, capture_output=True, timeout=15)


def _address_in_use(address: str) -> bool:
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, timeout=15).stdout
    return f" {address}/" in out


@contextlib.contextmanager
def delayed_hop(delay_ms: float, method: str) -> Iterator[Hop]:
    """A namespace reached from here over a veth pair; with `delay_ms` of netem delay on each end when the kernel
    has netem (`method` auto or netem), else none here (far_sshd puts delay_relay.py in front). Always removed."""
    if _address_in_use(ROOT_ADDRESS):
        raise RuntimeError(f"{ROOT_ADDRESS} is already configured here (another run of this bench?): not touching it")
    tag = uuid.uuid4().hex[:6]
    netns, root_veth, far_veth = f"pdkeep-{tag}", f"pdk{tag}r", f"pdk{tag}n"  # veth names: at most 15 bytes
    made_netns = False
    try:
        _ip("netns", "add", netns)
        made_netns = True
        _ip("-n", netns, "link", "set", "lo", "up")
        _ip("link", "add", root_veth, "type", "veth", "peer", "name", far_veth, "netns", netns)
        _ip("addr", "add", f"{ROOT_ADDRESS}/{PREFIX_LEN}", "dev", root_veth)
        _ip("-n", netns, "addr", "add", f"{HOST_ADDRESS}/{PREFIX_LEN}", "dev", far_veth)
        _ip("link", "set", root_veth, "up")
        _ip("-n", netns, "link", "set", far_veth, "up")
        netem = False
        if method != "relay":
            netem = _netem(["tc"], root_veth, delay_ms, required=method == "netem")
            if netem:
                _netem(["ip", "netns", "exec", netns, "tc"], far_veth, delay_ms, required=True)
        yield Hop(netns=netns, root_veth=root_veth, delay_ms=delay_ms, netem=netem)
    finally:
        if made_netns:
            # only what this script started runs in its namespace (the sshd, its sessions, the relay): end it by pid
            _kill_namespace_processes(netns)
            _run_quiet(["ip", "link", "del", root_veth])  # deleting either end removes the pair
            _run_quiet(["ip", "netns", "del", netns])


def _netem(tc: list[str], dev: str, delay_ms: float, *, required: bool) -> bool:
    """Add `delay_ms` of netem delay on `dev`'s egress. False when the kernel has no netem and it is not
    `required`; RuntimeError for any other failure."""
    argv = [*tc, "qdisc", "add", "dev", dev, "root", "netem", "delay", f"{delay_ms:g}ms"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=15)
    if p.returncode == 0:
        return True
    if not required and "qdisc kind is unknown" in p.stderr:
        return False
    raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")


def _listening_in(netns: str, port: int) -> bool:
    argv = ["ip", "netns", "exec", netns, "ss", "-Hltn", f"sport = :{port}"]
    return bool(subprocess.run(argv, capture_output=True, text=True, timeout=15).stdout.strip())


def _wait_listening_in(netns: str, port: int, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not _listening_in(netns, port):
        if proc.poll() is not None:
            raise RuntimeError(f"the process for port {port} in {netns} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"port {port} in {netns} not listening within {timeout:g}s")
        time.sleep(0.05)


@contextlib.contextmanager
def far_sshd(hop: Hop, work: Path) -> Iterator[SshdServer]:
    """A throwaway sshd in the hop's namespace, reached from here at HOST_ADDRESS:SSH_PORT through the delay: on
    that address itself with netem, else on the namespace's 127.0.0.1 behind delay_relay.py. Stopped by pid."""
    prefix = ("ip", "netns", "exec", hop.netns)
    if hop.netem:
        with running_sshd(
            work / "sshd",
            address=HOST_ADDRESS,
            port=SSH_PORT,
            prefix=prefix,
            log_level="INFO",
            wait=lambda proc, port: wait_port(port, host=HOST_ADDRESS, timeout=15, proc=proc),
        ) as server:
            yield server
        return
    with running_sshd(
        work / "sshd",
        address="127.0.0.1",
        port=UPSTREAM_PORT,
        prefix=prefix,
        log_level="INFO",
        wait=lambda proc, port: _wait_listening_in(hop.netns, port, proc),
    ) as server:
        relay_argv = [
            *prefix,
            sys.executable,
            str(REPO / "bench" / "delay_relay.py"),
            f"--listen={HOST_ADDRESS}:{SSH_PORT}",
            f"--upstream=127.0.0.1:{UPSTREAM_PORT}",
            f"--delay-ms={hop.delay_ms:g}",
        ]
        relay = subprocess.Popen(relay_argv, stdin=subprocess.DEVNULL)
        try:
            wait_port(SSH_PORT, host=HOST_ADDRESS, timeout=15, proc=relay)
            key_type, key = server.host_key_line.split()[1:3]
            known = work / "known_hosts"
            known.write_text(f"[{HOST_ADDRESS}]:{SSH_PORT} {key_type} {key}\n")
            yield dataclasses.replace(server, address=HOST_ADDRESS, port=SSH_PORT, known_hosts=str(known))
        finally:
            relay.terminate()
            try:
                relay.wait(timeout=5)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait(timeout=5)


def _kill_namespace_processes(netns: str) -> None:
    for _ in range(20):
        try:
            out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=15).stdout
        except Exception:
            return
        pids = [int(p) for p in out.split() if p.isdigit()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def inventory(server, work: Path) -> dict:
    """One SSH host (the sshd behind the hop) with a prefill, a decode and a router declared on it, none running."""
    host = {
        "transport": "ssh",
        "address": server.address,
        "port": server.port,
        "user": server.user,
        "key": server.key_path,
        "known_hosts": server.known_hosts,
        "connect_timeout": 10,
        "command_timeout": 30,
        "ssh_config": "none",
        "http": "tunnel",
        "service_manager": "pidfile",
        "python": sys.executable,
        "state_dir": str(work / "remote-state"),
    }
    return {
        "name": "keeperbench",
        "engine": "bundled",
        "hosts": {"far": host},
        "roles": {
            "prefill": [{"host": "far", "port": 31000, "bootstrap_port": 31090}],
            "decode": [{"host": "far", "port": 31002}],
            "router": [{"host": "far", "port": 31001}],
        },
    }


@dataclass
class Variant:
    """One row: its runs' wall and client CPU seconds (the process and its children; a keeper is neither), the
    sshd's accepted connections per run, and the exit codes seen."""

    name: str
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    connections: list[int] = field(default_factory=list)
    codes: set[int] = field(default_factory=set)
    host_requests: list[int] = field(default_factory=list)  # what the keeper served for each run (kept runs only)


def accepted(log_path: str) -> int:
    """How many SSH connections the sshd (LogLevel INFO or more) has authenticated so far."""
    return Path(log_path).read_text(errors="replace").count("Accepted publickey")


def timed_run(argv: list[str], env: dict[str, str], log_path: str, into: Variant) -> None:
    before_conn = accepted(log_path)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode in (2, 3, 4):  # usage, unreachable, refused: the run measured nothing worth a figure
        raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    into.walls.append(wall)
    into.cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    into.connections.append(accepted(log_path) - before_conn)
    into.codes.add(p.returncode)


def keeper_requests(runtime_dir: str) -> int:
    """How many host requests (run, read_file, tunnel, ...) the keeper of our control directory has served; 0
    when none runs."""
    from pdctl.transport.kept import ask_keeper

    total = 0
    for sock in (Path(runtime_dir) / "pdctl-ssh").glob("*.sock"):
        info = ask_keeper(str(sock), {"op": "info"}, 5.0)
        total += int(info["requests"]) if isinstance(info, dict) else 0
    return total


def end_keepers(pdctl: list[str], inv_path: str, env: dict[str, str], runtime_dir: str) -> None:
    """`pdctl ssh --close`, then SIGKILL by pid any keeper of our control directory that is still there."""
    with contextlib.suppress(Exception):
        subprocess.run([*pdctl, "ssh", "--close", "-i", inv_path], cwd=REPO, env=env, capture_output=True, timeout=30)
    for pid in keeper_pids(runtime_dir):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def banner_ms(address: str, port: int, samples: int = 5) -> float:
    """Median time from connect() to the sshd's first line (its version banner), ms: the TCP handshake's SYN and
    SYN-ACK, its ACK (sshd sends the banner once it accepted), the banner's way back: 4 x the one-way delay."""
    import socket

    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        with socket.create_connection((address, port), timeout=5) as conn:
            got = b""
            while b"\n" not in got:
                chunk = conn.recv(256)
                if not chunk:
                    break
                got += chunk
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def table(variants: list[tuple[str, Variant]]) -> str:
    lines = [
        "| command | variant | median wall | min | max | median client CPU | SSH connections per run | requests to "
        "the keeper per run | exit |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for command, v in variants:
        conns = sorted(set(v.connections))
        lines.append(
            f"| {command} | {v.name} | {statistics.median(v.walls) * 1000:.0f} ms | {min(v.walls) * 1000:.0f} ms | "
            f"{max(v.walls) * 1000:.0f} ms | {statistics.median(v.cpus) * 1000:.0f} ms | "
            f"{'/'.join(map(str, conns))} | {'/'.join(map(str, sorted(set(v.host_requests)))) or '-'} | "
            f"{'/'.join(map(str, sorted(v.codes)))} |"
        )
    return "\n".join(lines)


def paired_saving(off: Variant, other: Variant) -> tuple[float, float, float]:
    """Median, min and max of off - other over the rounds (each round's runs ran back to back), ms."""
    diffs = [(a - b) * 1000 for a, b in zip(off.walls, other.walls, strict=True)]
    return statistics.median(diffs), min(diffs), max(diffs)


VARIANTS = ("keeper off", "keeper on, cold", "keeper on, warm")


@dataclass
class Setup:
    """What every timed run needs: the pdctl command line, the inventory, the environments, the sshd's log."""

    pdctl: list[str]
    inv_path: str
    env_on: dict[str, str]
    env_off: dict[str, str]
    env_plain: dict[str, str]
    runtime_dir: str
    sshd_log: str
    ssh_true: list[str]


def ssh_true_argv(server: SshdServer) -> list[str]:
    """The seed's way in: OpenSSH, a new connection, `true`; no ssh_config, the throwaway key and known_hosts."""
    return [
        "ssh",
        "-F",
        "/dev/null",
        "-i",
        server.key_path,
        "-p",
        str(server.port),
        "-o",
        f"UserKnownHostsFile={server.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=15",
        f"{server.user}@{server.address}",
        "true",
    ]


def measure(s: Setup, runs: int) -> tuple[dict[str, dict[str, Variant]], Variant]:
    """`runs` rounds; each runs every command keeper off, keeper on cold then warm, and `ssh host true` once, in
    orders that alternate between rounds (so that no variant always comes first). One unmeasured round before."""

    def off(command: str, into: dict[str, Variant]) -> None:
        timed_run([*s.pdctl, *COMMANDS[command], "-i", s.inv_path], s.env_off, s.sshd_log, into["keeper off"])

    def on(command: str, into: dict[str, Variant]) -> None:
        end_keepers(s.pdctl, s.inv_path, s.env_on, s.runtime_dir)  # untimed: no kept connection for "cold"
        argv = [*s.pdctl, *COMMANDS[command], "-i", s.inv_path]
        for variant in (into["keeper on, cold"], into["keeper on, warm"]):
            before = keeper_requests(s.runtime_dir)
            timed_run(argv, s.env_on, s.sshd_log, variant)
            variant.host_requests.append(keeper_requests(s.runtime_dir) - before)

    def seed(into: Variant) -> None:
        timed_run(s.ssh_true, s.env_plain, s.sshd_log, into)

    scratch = {c: {n: Variant(n) for n in VARIANTS} for c in COMMANDS}  # the page cache, the sshd's first sessions
    for command in COMMANDS:
        off(command, scratch[command])
        on(command, scratch[command])
    seed(Variant("scratch"))

    rows = {c: {n: Variant(n) for n in VARIANTS} for c in COMMANDS}
    baseline = Variant("seed baseline: `ssh host true` (OpenSSH, a new connection)")
    for r in range(runs):
        # a command's off and on runs back to back (paired: the machine's load is about the same for both), which
        # first alternating; the commands' order and the baseline's place alternate too
        commands = list(COMMANDS) if r % 2 == 0 else list(reversed(COMMANDS))
        if r % 2 == 1:
            seed(baseline)
        for i, command in enumerate(commands):
            if (r // 2 + i) % 2 == 0:
                off(command, rows[command])
                on(command, rows[command])
            else:
                on(command, rows[command])
                off(command, rows[command])
        if r % 2 == 0:
            seed(baseline)
        print(f"round {r + 1}/{runs} done", file=sys.stderr)
    return rows, baseline


def report(rows: dict[str, dict[str, Variant]], baseline: Variant, header: str) -> str:
    variants = [(c, v) for c in COMMANDS for v in rows[c].values()] + [("-", baseline)]
    lines = [header, "", table(variants), ""]
    for command in COMMANDS:
        r = rows[command]
        warm = paired_saving(r["keeper off"], r["keeper on, warm"])
        cold = paired_saving(r["keeper off"], r["keeper on, cold"])
        repaid = f": repaid after {-cold[0] / warm[0]:.1f} warm runs" if warm[0] > 0 and cold[0] < 0 else ""
        lines.append(
            f"- `{command}`: warm saves {warm[0]:.0f} ms a run against keeper off (paired by round, range "
            f"{warm[1]:.0f} to {warm[2]:.0f}); cold costs {-cold[0]:.0f} ms more than keeper off (range "
            f"{-cold[2]:.0f} to {-cold[1]:.0f}){repaid}."
        )
    return "\n".join(lines)


def bench(runs: int, delay_ms: float, method: str) -> None:
    if os.geteuid() != 0:
        raise SystemExit("needs root: network namespaces and tc")
    if not os.path.exists(SSHD):
        raise SystemExit(f"needs openssh-server ({SSHD})")
    # as scripts/install.sh does: these machines set PYTHONDONTWRITEBYTECODE, and every run would compile otherwise
    subprocess.run([sys.executable, "-m", "compileall", "-q", "pdctl"], cwd=REPO, check=True, capture_output=True)
    pdctl = [sys.executable, "-m", "pdctl"]
    work = Path(tempfile.mkdtemp(prefix="pdkeep-"))  # short: the keepers' unix socket paths must fit 107 bytes
    runtime_dir = str(work / "rt")
    os.mkdir(runtime_dir, 0o700)
    env_plain = {k: v for k, v in os.environ.items() if k not in ("PDCTL_TEST_OWNER", "PDCTL_SSH_KEEP")}
    env_plain.update(
        XDG_STATE_HOME=str(work / "state"), XDG_RUNTIME_DIR=runtime_dir, COLUMNS="200", PDCTL_OPERATOR="bench"
    )
    env_on = {**env_plain, "PDCTL_SSH_KEEP": KEEP_ON_S}
    inv_path = ""
    load_before = os.getloadavg()
    try:
        with delayed_hop(delay_ms, method) as hop, far_sshd(hop, work) as server:
            banner = banner_ms(HOST_ADDRESS, SSH_PORT)
            inv_path = str(write_inventory(work / "inv.yaml", inventory(server, work)))
            setup = Setup(
                pdctl=pdctl,
                inv_path=inv_path,
                env_on=env_on,
                env_off={**env_plain, "PDCTL_SSH_KEEP": "0"},
                env_plain=env_plain,
                runtime_dir=runtime_dir,
                sshd_log=server.log_path,
                ssh_true=ssh_true_argv(server),
            )
            rows, baseline = measure(setup, runs)
            end_keepers(pdctl, inv_path, env_on, runtime_dir)
    finally:
        if inv_path:
            end_keepers(pdctl, inv_path, env_on, runtime_dir)
        for pid in keeper_pids(runtime_dir):  # none should be left; any that is, is ours (our control directory)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    how = "tc netem on both veth ends" if hop.netem else "bench/delay_relay.py in front of the sshd (no netem here)"
    header = (
        f"Hop: a veth pair into a network namespace, {delay_ms:g} ms added each way by {how}; connect to the "
        f"sshd's banner {banner:.1f} ms (4 x {delay_ms:g} ms expected). {runs} rounds, each command's keeper-off "
        f"and keeper-on runs back to back, which first alternating; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after, {os.cpu_count()} cores. Wall is the whole command's; client CPU is its "
        f"process and children's (a keeper's is in neither)."
    )
    print()
    print(report(rows, baseline, header))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="rounds; each times every variant once (default 7)")
    ap.add_argument("--delay-ms", type=float, default=10.0, help="delay added in EACH direction (default 10)")
    ap.add_argument(
        "--delay-by",
        choices=("auto", "netem", "relay"),
        default="auto",
        help="tc netem on both veth ends, or bench/delay_relay.py in front of the sshd (auto: netem when the kernel "
        "has it)",
    )
    args = ap.parse_args()

    def on_term(signum, frame):  # SIGTERM cleans up as Ctrl-C does: through every finally above
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        bench(args.runs, args.delay_ms, args.delay_by)
    except KeyboardInterrupt:
        print("interrupted: the namespace, its veth pair, the sshd and the keepers are removed", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
