"""Benchmarks of pdctl itself, each side by side with its baseline in the same run (pairs alternated).

1. `pdctl --help` start-up vs a bare `python -c pass`.
2. local `pdctl verify final-health` (wall and CPU, children included) vs the seed's one-liner run locally
   (4 curls, a grep, /proc reads) against the same deployment.
3. `pdctl verify final-health` over SSH (real sshd on 127.0.0.1, HTTP tunnelled through the SSH connection): cold
   (a new connection per run) and warm (keep_connection: the kept connection of an earlier run) vs the seed's
   one-liner (one ssh + curl + grep of /proc) through the same sshd.
4. The latency final-health reports for its end-to-end probe and a /health vs curl's time_total for the same
   request, taken right before and after.
5. Co-restart downtime: from the start of `pdctl restart --pair` to the first good probe through the router, vs the
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


def wall_cpu(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall, CPU of the process and its children) of one command run to completion."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, timeout=120, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} s"


def bench_help(runs: int) -> tuple[list[float], list[float]]:
    helps = [
        timed(lambda: subprocess.run([sys.executable, "-m", "pdctl", "--help"], capture_output=True, check=True))
        for _ in range(runs)
    ]
    bare = [
        timed(lambda: subprocess.run([sys.executable, "-c", "pass"], capture_output=True, check=True))
        for _ in range(runs)
    ]
    return helps, bare


def seed_script(ports: dict[str, int], remote_state: str) -> str:
    """The seed's final-health command, adapted only where the service manager differs (pidfile, not systemctl)."""
    p, d, r = ports["prefill"], ports["decode"], ports["router"]
    return (
        "echo '=== final health ==='; "
        f"for p in {p} {d} {r}; do echo -n \"$p=$(curl -s -m4 -o /dev/null -w '%{{http_code}}' "
        'http://127.0.0.1:$p/health) "; done; echo; '
        "echo '=== end-to-end probe ==='; "
        f"curl -s -m30 http://127.0.0.1:{r}/v1/chat/completions -H 'Content-Type: application/json' "
        '-d \'{"model":"pdctl-tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8}\' '
        "-o /dev/null -w 'code=%{http_code} t=%{time_total}s\\n'; "
        "echo '=== transfer_failed (must be 0) + live improvements intact ==='; "
        f"curl -s -m5 http://127.0.0.1:{p}/metrics | grep '^sglang:num_transfer_failed_reqs_total{{.*tp_rank=\"0\"' "
        "| grep -oE '[0-9.]+$' | sed 's/^/prefill_transfer_failed=/'; "
        f"dpid=$(sed -E 's/.*\"pid\": ([0-9]+).*/\\1/' {remote_state}/pdctl-bench-decode-0.pid); "
        "tr '\\0' ' ' < /proc/$dpid/cmdline | grep -oE 'disable-overlap-schedule|cuda-graph-max-bs-decode [0-9]+'; "
        "tr '\\0' '\\n' < /proc/$dpid/environ | grep -E 'MULTI_STREAM|TARGET_CTAS'"
    )


def seed_one_liner(sshd, ports: dict[str, int], remote_state: str) -> list[str]:
    """The seed's one-liner as an on-call engineer runs it: one ssh, the script on the host."""
    remote = seed_script(ports, remote_state)
    return [
        "ssh",
        "-i",
        sshd.key_path,
        "-p",
        str(sshd.port),
        "-o",
        f"UserKnownHostsFile={sshd.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "ConnectTimeout=15",
        "-F",
        "/dev/null",
        f"{sshd.user}@{sshd.address}",
        remote,
    ]


def probe_ok(url: str) -> bool:
    import httpx

    try:
        r = httpx.post(
            f"{url}/v1/chat/completions",
            timeout=5,
            json={
                "model": "pdctl-tiny",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4,
                "temperature": 0,
            },
        )
        return r.status_code == 200 and bool(r.json()["choices"][0]["message"]["content"])
    except Exception:
        return False


def bench_restart(inv: Path, state: Path, router_url: str) -> tuple[float, float]:
    """(downtime: restart start -> first good probe after it, sum of the roles' own restart+ready times)."""
    t0 = time.monotonic()
    result: dict = {}
    th = threading.Thread(
        target=lambda: result.update(
            run=pdctl(["restart", "--pair", "-i", str(inv), "--json", "--no-verify"], state=state)
        )
    )
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


def pdctl_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pdctl", *args]


def bench_env(state: Path, **extra: str) -> dict:
    import os

    return {**os.environ, "XDG_STATE_HOME": str(state), "COLUMNS": "100", **extra}


def reported_vs_curl(inv: Path, state: Path, ports: dict[str, int], runs: int) -> tuple[list, list, list, list]:
    """(pdctl's e2e latency, curl's, pdctl's prefill /health latency, curl's) in ms, curl right before and after."""
    chat = (
        "curl -s -o /dev/null -w '%{time_total}' -m30 http://127.0.0.1:"
        + str(ports["router"])
        + '/v1/chat/completions -H \'Content-Type: application/json\' -d \'{"model":"pdctl-tiny",'
        '"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0}\''
    )
    health = f"curl -s -o /dev/null -w '%{{time_total}}' -m4 http://127.0.0.1:{ports['prefill']}/health"

    def curl(cmd: str) -> float:
        return float(subprocess.run(["bash", "-c", cmd], capture_output=True, text=True).stdout) * 1000

    ours_e2e, curl_e2e, ours_h, curl_h = [], [], [], []
    for _ in range(runs):
        before = curl(chat), curl(health)
        out = subprocess.run(
            pdctl_cmd("verify", "final-health", "-i", str(inv), "--layer", "health,e2e", "--json"),
            capture_output=True,
            text=True,
            env=bench_env(state),
        )
        after = curl(chat), curl(health)
        doc = json.loads(out.stdout)
        ours_e2e.append(doc["layers"]["e2e"][0]["data"]["latency_ms"])
        ours_h.append(
            next(
                r["data"]["latency_ms"]
                for r in doc["layers"]["health"]
                if r["target"].startswith("prefill") and r["name"] == "/health"
            )
        )
        curl_e2e.append((before[0] + after[0]) / 2)
        curl_h.append((before[1] + after[1]) / 2)
    return ours_e2e, curl_e2e, ours_h, curl_h


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    runs = args.runs

    helps, bare = bench_help(runs)
    rows = [("`pdctl --help` start-up", med(helps), "`python -c pass`", med(bare))]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with running_sshd(tmp / "sshd") as sshd:
            ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
            remote_state = str(tmp / "remote")
            host = {
                "transport": "ssh",
                "address": sshd.address,
                "port": sshd.port,
                "user": sshd.user,
                "key": sshd.key_path,
                "known_hosts": sshd.known_hosts,
                "ssh_config": "none",
                "http": "tunnel",
                "python": sys.executable,
                "state_dir": remote_state,
            }
            decode = dict(
                decode_args={"--disable-overlap-schedule": True, "--cuda-graph-max-bs-decode": 96},
                decode_env={"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0", "SGLANG_SM120_MMA_TARGET_CTAS": "512"},
            )
            inv = write_inventory(tmp / "inv.yaml", local_inventory("bench", ports, host=host, **decode))
            warm_inv = write_inventory(
                tmp / "warm.yaml", local_inventory("bench", ports, host={**host, "keep_connection": 120}, **decode)
            )
            local_inv = write_inventory(
                tmp / "local.yaml",
                local_inventory(
                    "bench",
                    ports,
                    host={
                        "transport": "local",
                        "service_manager": "pidfile",
                        "python": sys.executable,
                        "state_dir": remote_state,
                    },
                    **decode,
                ),
            )
            try:
                dep = pdctl(["deploy", "-i", str(inv), "--no-verify"], state=tmp)
                assert dep.code == 0, dep.output
                fh_cmd = pdctl_cmd("verify", "final-health", "-i", str(local_inv))
                env = bench_env(tmp)
                local, one_local = [], []
                for _ in range(runs):
                    local.append(wall_cpu(fh_cmd, env))
                    one_local.append(wall_cpu(["bash", "-c", seed_script(ports, remote_state)]))
                rows.append(
                    (
                        "local `pdctl verify final-health` wall",
                        med([w for w, _ in local]),
                        "seed one-liner run locally, wall",
                        med([w for w, _ in one_local]),
                    )
                )
                rows.append(
                    (
                        "local `pdctl verify final-health` CPU",
                        med([c for _, c in local]),
                        "seed one-liner run locally, CPU",
                        med([c for _, c in one_local]),
                    )
                )
                cold, one = [], []
                for _ in range(runs):
                    cold.append(wall_cpu(pdctl_cmd("verify", "final-health", "-i", str(inv)), env)[0])
                    one.append(wall_cpu(seed_one_liner(sshd, ports, remote_state))[0])
                rows.append(
                    (
                        "`pdctl verify final-health` over SSH, cold (5 layers)",
                        med(cold),
                        "seed one-liner over the same sshd (health, probe, metric grep, /proc)",
                        med(one),
                    )
                )
                warm_cmd = pdctl_cmd("verify", "final-health", "-i", str(warm_inv))
                if wall_cpu(warm_cmd, env)[0] and _warm_supported(warm_inv, tmp):
                    warm, one = [], []
                    for _ in range(runs):
                        warm.append(wall_cpu(warm_cmd, env)[0])
                        one.append(wall_cpu(seed_one_liner(sshd, ports, remote_state))[0])
                    rows.append(
                        (
                            "`pdctl verify final-health` over SSH, warm (kept connection)",
                            med(warm),
                            "seed one-liner over the same sshd",
                            med(one),
                        )
                    )
                    subprocess.run(pdctl_cmd("ssh", "--close", "-i", str(warm_inv)), capture_output=True, env=env)
                e2e, curl_e2e, h, curl_h = reported_vs_curl(local_inv, tmp, ports, runs)
                rows.append(
                    (
                        "latency final-health reports for its e2e probe",
                        f"{statistics.median(e2e):.1f} ms",
                        "curl time_total of the same request, before and after",
                        f"{statistics.median(curl_e2e):.1f} ms",
                    )
                )
                rows.append(
                    (
                        "latency final-health reports for prefill /health",
                        f"{statistics.median(h):.1f} ms",
                        "curl time_total of the same request, before and after",
                        f"{statistics.median(curl_h):.1f} ms",
                    )
                )
                downs, owns = [], []
                router_url = f"http://127.0.0.1:{ports['router']}"
                for _ in range(max(2, runs // 2)):
                    d, o = bench_restart(inv, tmp, router_url)
                    downs.append(d)
                    owns.append(o)
                rows.append(
                    (
                        "co-restart downtime (restart start -> first good probe)",
                        med(downs),
                        "sum of the three roles' own restart+ready times",
                        med(owns),
                    )
                )
            except BaseException:
                print("| partial run; rows so far |", file=sys.stderr)
                for row in rows:
                    print("| " + " | ".join(row) + " |", file=sys.stderr)
                raise
            finally:
                subprocess.run(
                    pdctl_cmd("ssh", "--close", "-i", str(warm_inv)), capture_output=True, env=bench_env(tmp)
                )
                pdctl(["down", "-i", str(inv)], state=tmp, timeout=120)

    print("| what | pdctl | baseline | baseline figure |")
    print("|---|---|---|---|")
    for what, a, base, b in rows:
        print(f"| {what} | {a} | {base} | {b} |")


def _warm_supported(inv: Path, state: Path) -> bool:
    """Whether this pdctl keeps connections (`pdctl ssh` exists and lists one after a run)."""
    r = subprocess.run(pdctl_cmd("ssh", "-i", str(inv), "--json"), capture_output=True, text=True, env=bench_env(state))
    return r.returncode == 0


if __name__ == "__main__":
    main()
