"""What a TAB costs: one round of pdctl's shell completion, side by side with `pdctl --help` in the same run.

A TAB in bash runs `pdctl` once with typer's completion protocol in the environment (`_PDCTL_COMPLETE=complete_bash`,
`COMP_WORDS`, `COMP_CWORD`; the script `pdctl --show-completion bash` prints) and shows the lines it prints. Each
case below is one such round, by the interpreter's real path (a pyenv shim would add its own start-up): command
names, option names, and each kind of option value (layers, heal modes, storm targets, roles and instances of an
inventory given with -i, the roles of `logs`, playbooks). Rounds are interleaved with the baseline, `pdctl --help`,
so a busy machine weighs on both alike; the medians of N runs are printed as a markdown table for
docs/performance.md, with the candidates each round gave (so a fast round that completes nothing shows).

Run: python bench/bench_completion.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

INVENTORY = """\
name: bench
hosts:
  gpu-1: {address: 10.0.0.1}
  gpu-2: {address: 10.0.0.2}
roles:
  prefill: [{host: gpu-1, port: 30000, bootstrap_port: 8998, listen_host: 0.0.0.0}]
  decode: [{host: gpu-1, port: 30002, listen_host: 0.0.0.0}, {host: gpu-2, port: 30002, listen_host: 0.0.0.0}]
  router: [{host: gpu-1, port: 30001}]
"""

#: (what a TAB completes, the command line up to the cursor); "{inv}" is the inventory file above
CASES = [
    ("command names", "pdctl "),
    ("option names", "pdctl storm --"),
    ("--layer", "pdctl verify final-health --layer "),
    ("--heal", "pdctl watch --heal "),
    ("--target", "pdctl storm --target "),
    ("--role (-i given)", "pdctl lint -i {inv} --role "),
    ("--first-pair (-i given)", "pdctl restart -i {inv} --rolling --first-pair "),
    ("logs ROLE", "pdctl logs "),
    ("run PLAYBOOK", "pdctl run "),
]


def completion_env(line: str) -> dict[str, str]:
    """Typer's bash protocol for the words of `line` with the cursor after the last one (an empty word when the
    line ends in a space), as its completion script sets it."""
    words = line.split(" ")
    return {
        **os.environ,
        "_PDCTL_COMPLETE": "complete_bash",
        "COMP_WORDS": " ".join(words),
        "COMP_CWORD": str(len(words) - 1),
    }


def one_round(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    return time.perf_counter() - t0, out.stdout


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    runs = ap.parse_args(argv).runs
    pdctl = [os.path.realpath(sys.executable), "-m", "pdctl"]
    with tempfile.TemporaryDirectory() as tmp:
        inv = Path(tmp) / "bench.yaml"
        inv.write_text(INVENTORY)
        cases = [(what, line.format(inv=inv)) for what, line in CASES]
        one_round(pdctl + ["--help"])  # bytecode and the page cache warm before anything is timed
        helps: list[float] = []
        times: dict[str, list[float]] = {what: [] for what, _ in cases}
        shown: dict[str, str] = {}
        for _ in range(runs):
            for what, line in cases:
                helps.append(one_round(pdctl + ["--help"])[0])
                took, out = one_round(pdctl, completion_env(line))
                times[what].append(took)
                shown[what] = " ".join(out.split())
        base = statistics.median(helps)
        print(
            f"`pdctl --help` (baseline, {len(helps)} runs interleaved): {base:.3f} s; python {sys.version.split()[0]}"
        )
        print()
        print("| a TAB completes | command line | median | vs --help | candidates |")
        print("|---|---|---|---|---|")
        for what, line in cases:
            m = statistics.median(times[what])
            cands = shown[what] if len(shown[what]) <= 60 else shown[what][:57] + "..."
            line = line.replace(str(inv), "inv.yaml")
            print(f"| {what} | `{line}` | {m:.3f} s | {m / base:.2f}x | {cands or '(none: file names)'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
