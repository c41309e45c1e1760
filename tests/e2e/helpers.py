"""Helpers for end-to-end tests: run the real `pdctl` CLI in a subprocess with its state in a temp dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def json(self):
        return json.loads(self.stdout)


#: the watch's cadences for a drill that must page or heal within a test's minutes, not the production defaults
FAST_WATCH = {
    "health_every": 2,
    "inflight_interval": 1,
    "inflight_window": 6,
    "e2e_every": 10,
    "pairs_every": 3,
    "flags_every": 4,
}


def silent_ssh_host() -> dict:
    """An inventory host whose SSH port refuses connections (a real connect on loopback): a host that does not
    answer, as pdctl sees it."""
    from tests.fixtures.net import closed_port

    return {
        "transport": "ssh",
        "address": "127.0.0.1",
        "port": closed_port(),
        "connect_timeout": 2,
        "http": "tunnel",
        "accept_new_host_key": True,
    }


def pdctl(
    args: list[str], *, state: Path, env: dict[str, str] | None = None, timeout: float = 600, netns: str | None = None
) -> Run:
    """Run `python -m pdctl ARGS` with XDG_STATE_HOME=state; optionally inside a network namespace."""
    e = dict(os.environ)
    e.update({"XDG_STATE_HOME": str(state), "COLUMNS": "200", "PDCTL_OPERATOR": "test-operator"})
    e.update(env or {})
    cmd = [sys.executable, "-m", "pdctl", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    p = subprocess.run(cmd, cwd=REPO, env=e, capture_output=True, text=True, timeout=timeout)
    return Run(p.returncode, p.stdout, p.stderr)


def write_inventory(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def local_inventory(
    name: str,
    ports: dict[str, int],
    *,
    decode_args: dict | None = None,
    decode_env: dict | None = None,
    host: dict | None = None,
    prefill_env: dict | None = None,
    router_kind: str | None = None,
) -> dict:
    """A bundled-engine inventory on this machine with the given free ports (the router: pdctl's default kind,
    or `router_kind`)."""
    return {
        "name": name,
        "engine": "bundled",
        "hosts": {"local": host or {"transport": "local", "service_manager": "pidfile"}},
        "roles": {
            "prefill": [
                {
                    "host": "local",
                    "port": ports["prefill"],
                    "bootstrap_port": ports["bootstrap"],
                    "env": prefill_env or {},
                    "ready_timeout": 180,
                }
            ],
            "decode": [
                {
                    "host": "local",
                    "port": ports["decode"],
                    "args": decode_args or {},
                    "env": decode_env or {},
                    "ready_timeout": 180,
                }
            ],
            "router": [
                {
                    "host": "local",
                    "port": ports["router"],
                    "ready_timeout": 180,
                    **({"kind": router_kind} if router_kind else {}),
                    "args": {"--prometheus-port": ports["prometheus"], "--health-check-interval-secs": 2},
                }
            ],
        },
    }


def layer(report: dict, name: str) -> list[dict]:
    return report["layers"][name]


def statuses(report: dict, name: str) -> set[str]:
    return {r["status"] for r in layer(report, name)}


def kill_leftovers(state: Path) -> None:
    """SIGKILL the process group of every pidfile under `state` (what a failed test's `down` may leave)."""
    for pidfile in state.rglob("*.pid"):
        try:
            text = pidfile.read_text()
            pid = int(json.loads(text)["pid"]) if text.strip().startswith("{") else int(text.split()[0])
            os.killpg(pid, signal.SIGKILL)
        except (ValueError, KeyError, ProcessLookupError, PermissionError, IndexError, OSError):
            pass


def deployed(tmp_path_factory, name: str, inv: dict, *, timeout: float = 600):
    """Deploy `inv` (no final-health) in a fresh state dir; yield {"state", "inv" (its path), "data"}; always
    `down` and kill what is left. For a module fixture: `yield from deployed(...)`."""
    state = tmp_path_factory.mktemp(name)
    path = write_inventory(state / "inv.yaml", inv)
    try:
        r = pdctl(["deploy", "-i", str(path), "--no-verify", "--json"], state=state, timeout=timeout)
        assert r.code == 0, r.output
        yield {"state": state, "inv": path, "data": inv}
    finally:
        pdctl(["down", "-i", str(path)], state=state, timeout=120)
        kill_leftovers(state)
