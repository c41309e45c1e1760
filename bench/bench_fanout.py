"""Fan-out over many hosts (issue 14), each figure side by side with its baseline in the same run (alternated).

1. `pdctl status` and `pdctl verify final-health` over 8 SSH hosts (4 prefills, 3 decodes, 1 router, one instance
   per host, each host a real sshd on 127.0.0.1 with its own state_dir) against the SAME instances declared on one
   SSH host, so the figure isolates the fan-out; and 1 prefill + 1 decode + 1 router on one host for reference.
   The 1-host inventory reaches the very processes the 8-host one deployed: its state_dir holds links to every
   host's pidfiles and records, so both read the same pidfiles, /proc and ports. Cold (a new SSH connection per
   host per run) and warm (keep_connection: kept connections of an earlier run).
2. `pdctl verify pairs` (the 2x2 matrix) against one router probe (`verify final-health --layer e2e`) on a 2x2x1
   deployment on this machine, whole command wall time.

Every command runs as `sys.executable -m pdctl` (the interpreter itself, never a pyenv shim). Deployments stay up
across runs and are torn down at the end by pid, even on failure. Prints markdown tables for docs/performance.md.
Run: python bench/bench_fanout.py [--runs N] [--profile DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.helpers import pdctl, write_inventory  # noqa: E402
from tests.fixtures.net import free_port  # noqa: E402
from tests.fixtures.sshd import running_sshd  # noqa: E402

PREFILLS, DECODES = 4, 3  # + 1 router = 8 hosts; 7 bundled engines (~430 MB each) suit 2 cores / 24 GiB


def pdctl_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pdctl", *args]


def env_for(state: Path) -> dict:
    return {**os.environ, "XDG_STATE_HOME": str(state), "COLUMNS": "100", "PDCTL_OPERATOR": "bench"}


def wall(cmd: list[str], env: dict, *, want: int = 0) -> tuple[float, float]:
    """(wall, CPU: user+sys of the command and the children it waited for) of one run, which must exit `want`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=REPO)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != want:
        raise RuntimeError(f"{' '.join(cmd[2:])} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ssh_host(sshd, state_dir: str, **over) -> dict:
    return {
        "transport": "ssh",
        "address": sshd.address,
        "port": sshd.port,
        "user": sshd.user,
        "key": sshd.key_path,
        "known_hosts": sshd.known_hosts,
        "ssh_config": os.path.join(sshd.workdir, "none"),
        "connect_timeout": 10,
        "http": "tunnel",
        "service_manager": "pidfile",
        "python": sys.executable,
        "workdir": str(REPO),
        "internal_address": "127.0.0.1",
        "state_dir": state_dir,
        **over,
    }


def worker(host: str, **extra) -> dict:
    # 0.0.0.0: the inventory must let the router (and decodes) on other hosts dial it; every "host" is this machine
    return {"host": host, "port": free_port(), "listen_host": "0.0.0.0", "ready_timeout": 240, **extra}


def router(host: str) -> dict:
    return worker(
        host, args={"--prometheus-port": free_port(), "--health-check-interval-secs": 2, "--policy": "random"}
    )


def xpyd(name: str, hosts: dict, placement: list[str], prefills: int, decodes: int) -> dict:
    """An inventory: instance k (prefills, then decodes, then the router) on host placement[k]."""
    return {
        "name": name,
        "engine": "bundled",
        "hosts": hosts,
        "roles": {
            "prefill": [worker(placement[i], bootstrap_port=free_port()) for i in range(prefills)],
            "decode": [worker(placement[prefills + j]) for j in range(decodes)],
            "router": [router(placement[prefills + decodes])],
        },
    }


def on_one_host(data: dict, host_name: str, host: dict) -> dict:
    """The same instances (ports, names) declared on one host."""
    roles = {r: [{**inst, "host": host_name} for inst in insts] for r, insts in data["roles"].items()}
    return {**data, "hosts": {host_name: host}, "roles": roles}


def link_states(dirs: list[str], into: Path, host_name: str) -> None:
    """One state_dir that holds links to every host's pidfiles, specs and logs, and the co-restart record of the
    first host with its labels ("decode[0]@gpu4:port") renamed to the one host."""
    into.mkdir(parents=True, exist_ok=True)
    for d in dirs:
        for f in Path(d).iterdir():
            if f.name != "lineage" and not (into / f.name).exists():
                (into / f.name).symlink_to(f)
    (into / "lineage").mkdir(exist_ok=True)
    for rec in (Path(dirs[0]) / "lineage").glob("*.json"):
        (into / "lineage" / rec.name).write_text(re.sub(r"@[A-Za-z0-9_.-]+:", f"@{host_name}:", rec.read_text()))


def kill_recorded(state_dirs: list[str]) -> None:
    """Kill by pid every process a pidfile under these state dirs names (teardown's safety net)."""
    for d in state_dirs:
        for pf in Path(d).glob("*.pid"):
            try:
                pid = json.loads(pf.read_text())["pid"]
                os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError, KeyError):
                pass


@contextlib.contextmanager
def deployed(inv: Path, state: Path, state_dirs: list[str]):
    try:
        r = pdctl(["deploy", "-i", str(inv), "--no-verify"], state=state, timeout=900)
        if r.code != 0:
            raise RuntimeError(f"deploy of {inv.name} failed:\n{r.output[-4000:]}")
        yield inv
    finally:
        pdctl(["down", "-i", str(inv)], state=state, timeout=300)
        kill_recorded(state_dirs)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def alternated(cmds: dict[str, list[str]], env: dict, runs: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) of each command, runs times, in turn (a, b, c, a, b, c, ...), after one unmeasured warm-up each."""
    for cmd in cmds.values():
        wall(cmd, env)
    out: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, cmd in cmds.items():
            out[k].append(wall(cmd, env))
    return out


def profile(cmd: list[str], env: dict, dest: Path) -> None:
    """cProfile of one run of `cmd` (a pdctl command), saved to dest (.pstats)."""
    p = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(dest), "-m", "pdctl", *cmd[3:]],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=REPO,
    )
    if p.returncode != 0:
        raise RuntimeError(p.stdout + p.stderr)


def bench_fanout(tmp: Path, runs: int, prof: Path | None) -> list[tuple[str, str, str, str, str]]:
    hosts_n = PREFILLS + DECODES + 1
    rows = []
    with contextlib.ExitStack() as stack:
        sshds = [stack.enter_context(running_sshd(tmp / f"sshd{i}", log_level="VERBOSE")) for i in range(hosts_n)]
        states = [str(tmp / f"host{i}-state") for i in range(hosts_n)]
        names = [f"gpu{i}" for i in range(hosts_n)]
        many = xpyd("fan", {n: ssh_host(s, d) for n, s, d in zip(names, sshds, states)}, names, PREFILLS, DECODES)
        one_state = tmp / "one-host-state"
        one = on_one_host(many, "gpu0", ssh_host(sshds[0], str(one_state)))
        ref_state = str(tmp / "ref-state")
        ref = xpyd("ref", {"gpu0": ssh_host(sshds[0], ref_state)}, ["gpu0"] * 3, 1, 1)
        slug = {"8 hosts": "many", "1 host": "one", "1P+1D+1R, 1 host": "ref"}
        inv = {
            k: write_inventory(tmp / f"{slug[k]}.yaml", d)
            for k, d in (("8 hosts", many), ("1 host", one), ("1P+1D+1R, 1 host", ref))
        }
        warm = {
            k: write_inventory(
                tmp / f"{slug[k]}-warm.yaml",
                {**d, "hosts": {n: {**h, "keep_connection": 300} for n, h in d["hosts"].items()}},
            )
            for k, d in (("8 hosts", many), ("1 host", one), ("1P+1D+1R, 1 host", ref))
        }
        t0 = time.monotonic()
        stack.enter_context(deployed(inv["8 hosts"], tmp, states))
        stack.enter_context(deployed(inv["1P+1D+1R, 1 host"], tmp, [ref_state]))
        print(f"deployed in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        link_states(states, one_state, "gpu0")
        env = env_for(tmp)
        stack.callback(
            lambda: [
                subprocess.run(pdctl_cmd("ssh", "--close", "-i", str(w)), capture_output=True, env=env, timeout=60)
                for w in warm.values()
            ]
        )
        for what in (("status",), ("verify", "final-health")):
            label = "`pdctl " + " ".join(what) + "`"
            cold = alternated({k: pdctl_cmd(*what, "-i", str(p)) for k, p in inv.items()}, env, runs)
            kept = alternated({k: pdctl_cmd(*what, "-i", str(p)) for k, p in warm.items()}, env, runs)
            for mode, got in (("cold", cold), ("warm", kept)):
                for n, kind in ((0, "wall"), (1, "CPU")):
                    a, b, c = (med([x[n] for x in got[k]]) for k in ("8 hosts", "1 host", "1P+1D+1R, 1 host"))
                    rows.append((f"{label}, {mode}, {kind}", f"{a:.3f} s", f"{b:.3f} s", f"{a / b:.2f}x", f"{c:.3f} s"))
        pairs = alternated(
            {
                "8 hosts": pdctl_cmd("verify", "pairs", "-i", str(inv["8 hosts"])),
                "1 host": pdctl_cmd("verify", "pairs", "-i", str(inv["1 host"])),
            },
            env,
            runs,
        )
        for n, kind in ((0, "wall"), (1, "CPU")):
            a, b = (med([x[n] for x in pairs[k]]) for k in ("8 hosts", "1 host"))
            rows.append(
                (
                    f"`pdctl verify pairs` ({PREFILLS}x{DECODES} matrix), cold, {kind}",
                    f"{a:.3f} s",
                    f"{b:.3f} s",
                    f"{a / b:.2f}x",
                    "-",
                )
            )
        # how many SSH connections one cold 8-host final-health opens, per host (sshd's own log)
        before = [Path(s.log_path).read_text(errors="replace").count("Accepted publickey") for s in sshds]
        wall(pdctl_cmd("verify", "final-health", "-i", str(inv["8 hosts"])), env)
        after = [Path(s.log_path).read_text(errors="replace").count("Accepted publickey") for s in sshds]
        print("SSH connections per host, one cold 8-host final-health:", [b - a for a, b in zip(before, after)])
        if prof is not None:
            prof.mkdir(parents=True, exist_ok=True)
            for k in ("8 hosts", "1 host"):
                for what in (("status",), ("verify", "final-health")):
                    tag = f"{'-'.join(what)}-{k.replace(' ', '')}"
                    profile(pdctl_cmd(*what, "-i", str(inv[k])), env, prof / f"{tag}.pstats")
    return rows


def bench_pairs(tmp: Path, runs: int) -> list[tuple[str, str, str, str]]:
    state_dir = str(tmp / "pairs-state")
    host = {"transport": "local", "service_manager": "pidfile", "python": sys.executable, "state_dir": state_dir}
    inv = write_inventory(tmp / "pairs.yaml", xpyd("pairs", {"local": host}, ["local"] * 5, 2, 2))
    env = env_for(tmp)
    with deployed(inv, tmp, [state_dir]):
        got = alternated(
            {
                "pairs": pdctl_cmd("verify", "pairs", "-i", str(inv), "--json"),
                "e2e": pdctl_cmd("verify", "final-health", "-i", str(inv), "--layer", "e2e", "--json"),
            },
            env,
            runs,
        )
        inner_pairs, inner_e2e = [], []
        for _ in range(runs):  # the work inside the command: the matrix's own elapsed_ms, the probe's latency
            p = subprocess.run(
                pdctl_cmd("verify", "pairs", "-i", str(inv), "--json"),
                capture_output=True,
                text=True,
                env=env,
                cwd=REPO,
                timeout=120,
            )
            inner_pairs.append(json.loads(p.stdout)["elapsed_ms"])
            e = subprocess.run(
                pdctl_cmd("verify", "final-health", "-i", str(inv), "--layer", "e2e", "--json"),
                capture_output=True,
                text=True,
                env=env,
                cwd=REPO,
                timeout=120,
            )
            inner_e2e.append(json.loads(e.stdout)["layers"]["e2e"][0]["data"]["latency_ms"])
    return [
        (
            "`pdctl verify pairs` (2x2), whole command",
            f"{med([w for w, _ in got['pairs']]):.3f} s",
            "`pdctl verify final-health --layer e2e` (one router probe), whole command",
            f"{med([w for w, _ in got['e2e']]):.3f} s",
        ),
        (
            "the 2x2 matrix itself (JSON `elapsed_ms`)",
            f"{med(inner_pairs):.1f} ms",
            "the router probe itself (e2e `latency_ms`)",
            f"{med(inner_e2e):.1f} ms",
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", type=Path, default=None, help="save cProfile data of 8-host and 1-host runs here")
    ap.add_argument("--only", choices=("fanout", "pairs"), default=None)
    args = ap.parse_args()
    # as scripts/install.sh does: these machines set PYTHONDONTWRITEBYTECODE, and a checkout without bytecode
    # would add ~0.2 s of compiling to every run
    subprocess.run([sys.executable, "-m", "compileall", "-q", "pdctl"], cwd=REPO, check=True, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        tmp = Path(tmp)
        if args.only in (None, "fanout"):
            rows = bench_fanout(tmp, args.runs, args.profile)
            print(
                f"| what (median of {args.runs}) | 8 SSH hosts | same instances, 1 SSH host | ratio "
                "| 1P+1D+1R, 1 SSH host |"
            )
            print("|---|---|---|---|---|")
            for row in rows:
                print("| " + " | ".join(row) + " |")
            print()
        if args.only in (None, "pairs"):
            rows = bench_pairs(tmp, args.runs)
            print(f"| what (median of {args.runs}) | figure | baseline | baseline figure |")
            print("|---|---|---|---|")
            for row in rows:
                print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
