"""What the heal tests share: an isolated state directory and audit log, a 1P1D local inventory, the records a heal
appends (as pdctl.ops.heal writes them), a real Watch holding the pair-broken case, and another operator's process
holding the deployment lock. For tests/unit/test_heal_*.py and test_history_heal_records.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from pdctl import audit
from pdctl.checks.heal_ledger import HEAL_ACTION, HealEnd
from pdctl.checks.watch_events import HealEvent
from pdctl.ops.context import Deployment
from pdctl.ops.watch import Watch

REPO = Path(__file__).resolve().parents[2]

# another operator's process: it takes the deployment lock as `pdctl restart --pair` would, says so, and holds it
# until its stdin closes
HOLD_LOCK = """
import sys
from pdctl.inventory import load_inventory
from pdctl.ops.context import Deployment, deployment_lock
with Deployment(load_inventory(sys.argv[1])) as dep, deployment_lock(dep, "restart --pair"):
    print("held", flush=True)
    sys.stdin.read()
"""


def audit_env(tmp_path: Path, monkeypatch) -> Path:
    """pdctl's state under tmp_path/state, a real audit log tmp_path/audit.jsonl (returned), a wide terminal, no
    inventory from the environment."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    return log


def inventory(name: str, port: int, *, heal_budget: bool = True) -> dict:
    """A 1P1D bundled deployment on this machine (pidfiles), its ports from `port` up; with `heal_budget`, one heal
    an hour, confirmed after three failed canaries in a row."""
    data: dict[str, Any] = {
        "name": name,
        "engine": "bundled",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
        "roles": {
            "prefill": [{"host": "local", "port": port, "bootstrap_port": port + 1}],
            "decode": [{"host": "local", "port": port + 2}],
            "router": [{"host": "local", "port": port + 3}],
        },
    }
    if heal_budget:
        data["watch"] = {"heal_max_per_hour": 1, "heal_pair_failures": 3}
    return data


def heal_started(inv: Path | str, run: str, evidence: Optional[dict] = None) -> None:
    """A heal's first record, written before it acts: its evidence."""
    audit.append(HEAL_ACTION, inventory=str(inv), args=_heal_args(), result=audit.STARTED, started=time.time(),
                 extra={"run": run, "evidence": evidence or {}})  # fmt: skip


def heal_ended(inv: Path | str, run: str, end: HealEnd) -> None:
    """A heal's last record: how it ended."""
    audit.append(HEAL_ACTION, inventory=str(inv), args=_heal_args(), result=end.result, started=time.time(),
                 extra=end.record_fields(run))  # fmt: skip


def write_heal(inv: Path | str, end: Optional[HealEnd], run: str) -> None:
    """The records one heal appends: its start, then its end unless `end` is None (a watch killed mid-heal)."""
    heal_started(inv, run)
    if end is not None:
        heal_ended(inv, run, end)


def red_restart(inv: Path | str) -> None:
    """The record a heal's own `restart --pair` appends when its final-health ran red (before the heal's end)."""
    audit.append("restart --pair", inventory=str(inv), result="final-health failed", started=time.time(),
                 extra={"exit_code": 1})  # fmt: skip


def record_line(inv: Path | str, action: str, result: str, ago_s: float = 0.0, **extra) -> str:
    """One audit log line as written by hand, dated `ago_s` seconds ago."""
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(time.time() - ago_s))
    rec = {"time": when, "operator": "o", "inventory": str(inv), "action": action, "args": {}, "result": result}
    return json.dumps({**rec, **extra}) + "\n"


def broken_pair_watch(dep: Deployment) -> tuple[Watch, list]:
    """A real Watch whose state holds the pair-broken case (three failed canaries in a row), and its timeline."""
    watch = Watch(dep)
    lines: list = []
    watch.on_lines.append(lines.extend)
    p, d = dep.inv.label("prefill", 0), dep.inv.label("decode", 0)
    for t in (1.0, 2.0, 3.0):
        watch.state.apply_pairs([(p, d, "fail", None)], t)
    return watch, lines


def heal_lines(lines: list, outcome: Optional[str] = None) -> list[HealEvent]:
    """The heal events of a timeline (of one outcome, if given)."""
    return [x for x in lines if isinstance(x, HealEvent) and outcome in (None, x.outcome)]


@contextmanager
def lock_held(inv: Path) -> Iterator[subprocess.Popen]:
    """Another operator's live process holding the deployment lock of `inv`, until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(inv)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held", holder.stderr
        yield holder
    finally:
        if holder.stdin:
            holder.stdin.close()
        holder.wait(30)


def _heal_args() -> dict:
    return {"case": "pair-broken", "action": "restart --pair"}
