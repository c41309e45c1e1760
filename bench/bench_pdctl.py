"""Benchmarks of pdctl itself, each side by side with its baseline in the same run.

1. `pdctl --help` start-up vs a bare `python -c pass`.
2. `pdctl verify final-health` over SSH (real sshd on 127.0.0.1, HTTP tunnelled through the SSH connection) vs the
   seed's one-liner (one ssh + curl + grep of /proc) against the same deployment through the same sshd.
3. Co-restart downtime: from the start of `pdctl restart --pair` to the first good probe through the router, vs the
   sum of the three roles' own (restart + ready) times taken from the same run's step records.

Prints a markdown table (medians of N runs) for docs/performance.md. Run: python bench/bench_pdctl.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.helpers import local_inventory, pdctl, write_inventory  # noqa: E402
from tests.fixtures.net import free_port  # noqa: E402
from tests.fixtures.sshd import running_sshd  # noqa: E402


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} s"


def bench_help(runs: int) -> tuple[list[float], list[float]]:
    helps = [timed(lambda: subprocess.run([sys.executable, "-m", "pdctl", "--help"], capture_output=True, check=True))
             for _ in range(runs)]
    bare = [timed(lambda: subprocess.run([sys.executable, "-c", "pass"], capture_output=True, check=True))
            for _ in range(runs)]
    return helps, bare


def seed_one_liner(sshd, ports: dict[str, int], remote_state: str) -> list[str]:
    """The seed's final-health command, adapted only where the service manager differs (pidfile, not systemctl)."""
    p, d, r = ports["prefill"], ports["decode"], ports["router"]
    remote = (
        "echo '=== final health ==='; "
        f"for p in {p} {d} {r}; do echo -n \"$p=$(curl -s -m4 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:$p/health) \"; done; echo; "
        "echo '=== end-to-end probe ==='; "
        f"curl -s -m30 http://127.0.0.1:{r}/v1/chat/completions -H 'Content-Type: application/json' "
        "-d '{\"model\":\"pdctl-tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":8}' "
        "-o /dev/null -w 'code=%{http_code} t=%{time_total}s\\n'; "
        "echo '=== transfer_failed (must be 0) + live improvements intact ==='; "
        f"curl -s -m5 http://127.0.0.1:{p}/metrics | grep '^sglang:num_transfer_failed_reqs_total{{.*tp_rank=\"0\"' "
        "| grep -oE '[0-9.]+$' | sed 's/^/prefill_transfer_failed=/'; "
        f"dpid=$(sed -E 's/.*\"pid\": ([0-9]+).*/\\1/' {remote_state}/pdctl-bench-decode-0.pid); "
        "tr '\\0' ' ' < /proc/$dpid/cmdline | grep -oE 'disable-overlap-schedule|cuda-graph-max-bs-decode [0-9]+'; "
        "tr '\\0' '\\n' < /proc/$dpid/environ | grep -E 'MULTI_STREAM|TARGET_CTAS'"
    )
    return ["ssh", "-i", sshd.key_path, "-p", str(sshd.port), "-o", f"UserKnownHostsFile={sshd.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=15", "-F", "/dev/null",
            f"{sshd.user}@{sshd.address}", remote]


def probe_ok(url: str) -> bool:
    import httpx

    try:
        r = httpx.post(f"{url}/v1/chat/completions", timeout=5,
                       json={"model": "pdctl-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        return r.status_code == 200 and bool(r.json()["choices"][0]["message"]["content"])
    except Exception:
        return False


def bench_restart(inv: Path, state: Path, router_url: str) -> tuple[float, float]:
    """(downtime: restart start -> first good probe after it, sum of the roles' own restart+ready times)."""
    t0 = time.monotonic()
    result: dict = {}
    th = threading.Thread(target=lambda: result.update(run=pdctl(["restart", "--pair", "-i", str(inv), "--json",
                                                                  "--no-verify"], state=state)))
    th.start()
    th.join()
    # The router is ready when restart returns; the first good probe after it closes the outage.
    while not probe_ok(router_url):
        if time.monotonic() - t0 > 600:
            raise RuntimeError("restart did not come back within 600 s")
        time.sleep(0.05)
    first_good_after = time.monotonic()
    run = result["run"]
    assert run.code == 0, run.output
    own = sum(s["seconds"] for s in run.json()["steps"])
    return first_good_after - t0, own


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    helps, bare = bench_help(args.runs)
    rows = [("`pdctl --help` start-up", med(helps), "`python -c pass`", med(bare))]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with running_sshd(tmp / "sshd") as sshd:
            ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
            remote_state = str(tmp / "remote")
            host = {"transport": "ssh", "address": sshd.address, "port": sshd.port, "user": sshd.user,
                    "key": sshd.key_path, "known_hosts": sshd.known_hosts, "ssh_config": str(tmp / "none"),
                    "http": "tunnel", "python": sys.executable, "state_dir": remote_state}
            data = local_inventory("bench", ports, host=host,
                                   decode_args={"--disable-overlap-schedule": True, "--cuda-graph-max-bs-decode": 96},
                                   decode_env={"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0", "SGLANG_SM120_MMA_TARGET_CTAS": "512"})
            inv = write_inventory(tmp / "inv.yaml", data)
            try:
                dep = pdctl(["deploy", "-i", str(inv), "--no-verify"], state=tmp)
                assert dep.code == 0, dep.output
                fh, one = [], []
                for _ in range(args.runs):
                    fh.append(timed(lambda: pdctl(["verify", "final-health", "-i", str(inv)], state=tmp)))
                    one.append(timed(lambda: subprocess.run(seed_one_liner(sshd, ports, remote_state),
                                                            capture_output=True, timeout=120)))
                rows.append(("`pdctl verify final-health` over SSH (5 layers)", med(fh),
                             "seed one-liner over the same sshd (health, probe, metric grep, /proc)", med(one)))
                downs, owns = [], []
                router_url = f"http://127.0.0.1:{ports['router']}"
                for _ in range(max(2, args.runs // 2)):
                    d, o = bench_restart(inv, tmp, router_url)
                    downs.append(d)
                    owns.append(o)
                rows.append(("co-restart downtime (restart start -> first good probe)", med(downs),
                             "sum of the three roles' own restart+ready times", med(owns)))
            finally:
                pdctl(["down", "-i", str(inv)], state=tmp, timeout=120)

    print("| what | pdctl | baseline | baseline figure |")
    print("|---|---|---|---|")
    for what, a, base, b in rows:
        print(f"| {what} | {a} | {base} | {b} |")


if __name__ == "__main__":
    main()
