"""The CLI contract (issue 10, item 5): one exit code and, with --json, exactly one JSON document on stdout in every
outcome, each cell of command x outcome asserted here with real parts (the real CLI in a subprocess, a real sshd).

| outcome                     | exit | stdout under --json                                                        |
|-----------------------------|------|----------------------------------------------------------------------------|
| usage (a bad option value)  | 2    | {"ok": false, "error": {"exit_code": 2, "kind": "usage", ...}}            |
| unreachable host            | 3    | {"ok": false, "error": {"exit_code": 3, "kind": "unreachable", ...}}      |
| refused (unknown host key)  | 4    | {"ok": false, "error": {"exit_code": 4, "kind": "refused", ...}};        |
|                             |      | status: its own document, every row's error_exit_code 4                    |
| refused (lock held)         | 4    | restart, down: the refused error document naming the holder               |
| role down behind a tunnel   | 1 final-health, verify pairs (the failed checks), 3 verify inflight, 1 triage      |
|                             | (stopped is a finding), 1 status (its rows say stopped), 3 storm (before any load) |
| dry-run restart / down      | 0 with the plan, even with the host unreachable (they plan from the inventory) |

`status` keeps its own document (every role's row, the error in the row of each role that could not be asked).
`logs` has no --json: its usage cell is the error and hint lines alone. The refused-by-hazard cell (restart of
decode alone under a running prefill) and the ok / check-failed / interrupted cells need the engine:
tests/e2e/test_cli_contract_engine.py holds them (an interrupted `verify inflight --json` prints its partial report,
exit 130, as its help says); deploy and restart interrupted: tests/e2e/test_interrupts.py.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.net import closed_port, free_port

pytestmark = [pytest.mark.e2e]

WINDOW = ["--window", "2", "--interval", "1"]
#: "exit 3 before any window" shown by a bounded wait: a window far longer than the wait the cell allows
LONG_WINDOW = ["--window", "60", "--interval", "1"]
#: every command that asks a host, as the operator would type it (mutating ones as a dry run)
HOST_COMMANDS = {
    "verify final-health": ["verify", "final-health"],
    "verify inflight": ["verify", "inflight", *WINDOW],
    "verify pairs": ["verify", "pairs"],
    "triage": ["triage", *WINDOW],
    "deploy --dry-run": ["deploy", "--dry-run"],
    "storm": ["storm", "--requests", "2", "--calibrate", "0", "--window", "1", "--interval", "0.5"],
}
#: a bad value for an option of each command (click's usage errors and pdctl's own)
USAGE = {
    "status": ["status", "-i"],
    "verify final-health": ["verify", "final-health", "--layer", "vibes"],
    "verify inflight": ["verify", "inflight", "--window", "soon"],
    "verify pairs": ["verify", "pairs", "--budget", "0"],
    "triage": ["triage", "--interval", "-1"],
    "deploy": ["deploy", "--no-such-flag"],
    "restart": ["restart", "--role", "cache"],
    "down": ["down", "--purge=yes"],
    "storm": ["storm", "--requests", "many"],
    "run": ["run", "final-health", "--var", "novalue"],
    "history": ["history", "-n", "0"],
    "lint": ["lint", "--role", "cache"],
    "render": ["render", "--role", "cache"],
}
#: pdctl's own --role check answers with the roles to choose from instead of "run `pdctl X --help`"
ROLE_HINT = "one of: prefill, decode, router, prefill[0], decode[0], router[0]"


def _one_document(r) -> dict:
    doc = json.loads(r.stdout)  # raises if stdout is not exactly one JSON document
    assert isinstance(doc, dict)
    return doc


def _error_doc(r, code: int, kind: str) -> dict:
    assert r.code == code, (r.code, r.output)
    doc = _one_document(r)
    assert doc["ok"] is False and doc["error"]["exit_code"] == code and doc["error"]["kind"] == kind, doc
    assert doc["error"]["message"] and "Traceback" not in r.output
    assert "error: " in r.stderr
    return doc["error"]


def _roles_on(host_name: str, host: dict, ports: dict) -> dict:
    data = local_inventory("contract", ports, host=host)
    data["hosts"] = {host_name: host}
    for role in ("prefill", "decode", "router"):
        data["roles"][role][0]["host"] = host_name
    return data


def _ports() -> dict:
    return {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}


def _ssh_host(sshd, tmp, **over) -> dict:
    host = {
        "transport": "ssh",
        "address": sshd.address,
        "port": sshd.port,
        "user": sshd.user,
        "key": str(sshd.key_path),
        "known_hosts": str(sshd.known_hosts),
        "connect_timeout": 3,
        "ssh_config": "none",
        "http": "tunnel",
        "service_manager": "pidfile",
        "python": sys.executable,
        "state_dir": str(tmp / "remote-state"),
    }
    host.update(over)
    return host


@pytest.mark.parametrize("name", USAGE, ids=str)
def test_usage_cell_exit_2_and_one_error_document(name, tmp_path):
    r = pdctl(
        [*USAGE[name], "--json"] if USAGE[name][-1] != "-i" else [*USAGE[name][:-1], "--json", "-i"],
        state=tmp_path,
        timeout=60,
    )
    err = _error_doc(r, 2, "usage")
    if name in ("lint", "render"):
        assert err["hint"] == ROLE_HINT and "--role cache" in err["message"]
    else:
        assert err["hint"] == f"run `pdctl {name} --help`" or name == "run"


@pytest.mark.parametrize("args", [["logs", "decode", "-n", "0"], ["logs", "cache"]], ids=" ".join)
def test_usage_cell_logs_exit_2_error_and_hint_only(args, tmp_path):
    r = pdctl(args, state=tmp_path, timeout=60)
    assert r.code == 2, r.output
    assert r.stdout == "" and "Traceback" not in r.output
    assert r.stderr.startswith("error: ") and "hint: run `pdctl logs --help`" in r.stderr


@pytest.fixture(scope="module")
def unreachable_inventory(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unreachable")
    host = {
        "transport": "ssh",
        "address": "127.0.0.1",
        "port": closed_port(),
        "user": "root",
        "connect_timeout": 1,
        "known_hosts": str(tmp / "kh"),
        "ssh_config": "none",
        "http": "tunnel",
    }
    return tmp, write_inventory(tmp / "inv.yaml", _roles_on("gpu-gone", host, _ports()))


@pytest.mark.parametrize("name", HOST_COMMANDS, ids=str)
def test_unreachable_host_cell_exit_3_naming_it_before_any_window(name, unreachable_inventory):
    import time

    tmp, inv = unreachable_inventory
    sampled = name in ("verify inflight", "triage")
    args = (
        [*HOST_COMMANDS[name][: 2 if name == "verify inflight" else 1], *LONG_WINDOW]
        if sampled
        else HOST_COMMANDS[name]
    )
    started = time.monotonic()
    # a sampled command gets less time than its 60 s window: decided before sampling, not after failed reads
    r = pdctl([*args, "-i", str(inv), "--json"], state=tmp, timeout=45 if sampled else 120)
    err = _error_doc(r, 3, "unreachable")
    assert "gpu-gone" in err["message"]
    if sampled:
        assert time.monotonic() - started < 20


@pytest.mark.parametrize("args", [["restart", "--pair", "--dry-run"], ["down", "--dry-run"]], ids=" ".join)
def test_unreachable_host_offline_dry_runs_exit_0_with_their_plan(args, unreachable_inventory):
    """A dry-run restart or down plans from the inventory alone: it needs no host, so it works before a window."""
    tmp, inv = unreachable_inventory
    r = pdctl([*args, "-i", str(inv), "--json"], state=tmp, timeout=60)
    assert r.code == 0, r.output
    doc = _one_document(r)
    assert doc["dry_run"] is True and any("gpu-gone" in str(step) for step in doc.get("steps") or doc["plan"])


def test_unreachable_host_status_cell_exit_3_with_its_own_document(unreachable_inventory):
    tmp, inv = unreachable_inventory
    r = pdctl(["status", "-i", str(inv), "--json"], state=tmp, timeout=120)
    assert r.code == 3, r.output
    doc = _one_document(r)
    assert {row["error_exit_code"] for row in doc["roles"]} == {3}
    assert all("gpu-gone" in row["error"] for row in doc["roles"])


@pytest.fixture(scope="module")
def unknown_key_inventory(sshd, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unknown-key")
    empty = tmp / "known_hosts"
    empty.write_text("")
    return (
        tmp,
        empty,
        write_inventory(tmp / "inv.yaml", _roles_on("gpu1", _ssh_host(sshd, tmp, known_hosts=str(empty)), _ports())),
    )


@pytest.mark.parametrize("name", HOST_COMMANDS, ids=str)
def test_refused_cell_unknown_host_key_exit_4(name, unknown_key_inventory):
    tmp, known, inv = unknown_key_inventory
    r = pdctl([*HOST_COMMANDS[name], "-i", str(inv), "--json"], state=tmp, timeout=120)
    err = _error_doc(r, 4, "refused")
    assert "gpu1" in err["message"] and "accept_new_host_key" in err["message"] + (err["hint"] or "")
    assert known.read_text() == ""


def test_refused_cell_status_unknown_host_key_exit_4_with_its_own_document(unknown_key_inventory):
    tmp, known, inv = unknown_key_inventory
    r = pdctl(["status", "-i", str(inv), "--json"], state=tmp, timeout=120)
    assert r.code == 4, r.output
    doc = _one_document(r)
    assert {row["error_exit_code"] for row in doc["roles"]} == {4}
    assert all("gpu1" in row["error"] for row in doc["roles"]) and known.read_text() == ""


@pytest.mark.parametrize("args", [["restart", "--pair", "--no-verify"], ["down"]], ids=" ".join)
def test_refused_cell_lock_held_exit_4_naming_the_holder(args, tmp_path, monkeypatch):
    """Nothing runs: the lock is taken before any role is looked at, so the refusal needs no engine."""
    from pdctl.inventory import load_inventory
    from pdctl.ops.context import Deployment, deployment_lock

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # the local host's lock dir, as the CLI's
    inv = write_inventory(tmp_path / "inv.yaml", local_inventory("contract-lock", _ports()))
    with Deployment(load_inventory(inv)) as dep, deployment_lock(dep, "test holds the lock"):
        r = pdctl([*args, "-i", str(inv), "--json"], state=tmp_path, timeout=60)
    err = _error_doc(r, 4, "refused")
    assert "test holds the lock" in err["message"] and "held by" in err["message"]


@pytest.fixture(scope="module")
def role_down_inventory(sshd, tmp_path_factory):
    """A reachable host (real sshd, http through the SSH tunnel) where nothing listens on any role's port."""
    tmp = tmp_path_factory.mktemp("role-down")
    ports = _ports()
    return tmp, ports, write_inventory(tmp / "inv.yaml", _roles_on("gpu1", _ssh_host(sshd, tmp), ports))


def _no_tunnel_port_or_library_noise(r, ports) -> None:
    import re

    for port in re.findall(r"127\.0\.0\.1:(\d+)", r.output):
        assert int(port) in ports.values(), f"a local tunnel port {port} is named: {r.output}"
    assert "Secsh" not in r.stderr and "paramiko" not in r.stderr.lower() and "Traceback" not in r.output


def test_role_down_behind_tunnel_final_health_names_role_and_its_address(role_down_inventory):
    tmp, ports, inv = role_down_inventory
    r = pdctl(["verify", "final-health", "-i", str(inv), "--json", "--layer", "health"], state=tmp, timeout=120)
    assert r.code == 1, r.output
    doc = _one_document(r)
    health = {c["target"].split("@")[0]: c for c in doc["layers"]["health"] if c["name"] == "/health"}
    assert set(health) == {"prefill[0]", "decode[0]", "router[0]"}
    for role, check in health.items():
        port = ports[role.split("[")[0]]
        assert check["status"] == "fail"
        assert f"connection refused on gpu1 at 127.0.0.1:{port}" in check["observed"], check
        assert f"{role}@gpu1:{port}" in check["detail"] and check["data"]["url"] == f"http://127.0.0.1:{port}/health"
    _no_tunnel_port_or_library_noise(r, ports)


def test_role_down_behind_tunnel_inflight_exit_3_naming_each_worker(role_down_inventory):
    tmp, ports, inv = role_down_inventory
    r = pdctl(["verify", "inflight", *WINDOW, "-i", str(inv), "--json"], state=tmp, timeout=120)
    err = _error_doc(r, 3, "unreachable")
    for role in ("prefill", "decode"):
        assert f"{role}[0]@gpu1:{ports[role]}" in err["message"]
        assert f"connection refused on gpu1 at 127.0.0.1:{ports[role]}" in err["message"]
    _no_tunnel_port_or_library_noise(r, ports)


def _triage(role_down_inventory):
    tmp, ports, inv = role_down_inventory
    return ports, pdctl(["triage", *WINDOW, "-i", str(inv), "--json"], state=tmp, timeout=120)


def test_role_down_behind_tunnel_triage_says_stopped_exit_1(role_down_inventory):
    ports, r = _triage(role_down_inventory)
    assert r.code == 1, r.output
    doc = _one_document(r)
    assert doc["ok"] is False and doc["findings"]
    health = [o for o in doc["observations"] if "/health" in json.dumps(o)]
    assert health and all(
        "127.0.0.1:" not in json.dumps(o) or "through the SSH tunnel" in json.dumps(o) for o in health
    )
    assert "Secsh" not in r.stderr and "Traceback" not in r.output


def test_role_down_behind_tunnel_triage_names_no_tunnel_port(role_down_inventory):
    ports, r = _triage(role_down_inventory)
    _no_tunnel_port_or_library_noise(r, ports)


def test_role_down_behind_tunnel_status_says_stopped_exit_1(role_down_inventory):
    tmp, ports, inv = role_down_inventory
    r = pdctl(["status", "-i", str(inv), "--json"], state=tmp, timeout=120)
    assert r.code == 1, r.output
    doc = _one_document(r)
    # each role named by its address on the host, never by a tunnel port
    assert {row["label"]: row["state"] for row in doc["roles"]} == {
        f"{role}[0]@gpu1:{ports[role]}": "stopped" for role in ("prefill", "decode", "router")
    }
    assert not any(row.get("error") for row in doc["roles"])
    _no_tunnel_port_or_library_noise(r, ports)


def test_role_down_behind_tunnel_pairs_fails_the_pair_naming_each_worker_exit_1(role_down_inventory):
    """Like final-health: the canary was sent and refused, a failed check (1), each worker named by its address."""
    tmp, ports, inv = role_down_inventory
    r = pdctl([*HOST_COMMANDS["verify pairs"], "-i", str(inv), "--json"], state=tmp, timeout=120)
    assert r.code == 1, r.output
    doc = _one_document(r)
    assert doc["ok"] is False and doc["exit_code"] == 1 and doc["verdict"]["failed"] == ["prefill[0] -> decode[0]"]
    assert doc["prefills"] == [f"prefill[0]@gpu1:{ports['prefill']}"]
    assert doc["decodes"] == [f"decode[0]@gpu1:{ports['decode']}"]
    for role in ("prefill", "decode"):
        assert f"connection refused on gpu1 at 127.0.0.1:{ports[role]}" in doc["pairs"][0]["found"]
    _no_tunnel_port_or_library_noise(r, ports)


def test_role_down_behind_tunnel_storm_exit_3_before_any_load_naming_the_router(role_down_inventory):
    tmp, ports, inv = role_down_inventory
    r = pdctl([*HOST_COMMANDS["storm"], "-i", str(inv), "--json"], state=tmp, timeout=120)
    _no_tunnel_port_or_library_noise(r, ports)
    err = _error_doc(r, 3, "unreachable")
    assert f"router[0]@gpu1:{ports['router']}" in err["message"], err


def _with_reader_gone(args: list[str], state, env: dict, read: int) -> tuple[int, str]:
    """Run pdctl with its stdout a pipe whose reader reads `read` bytes and then closes it (`| head -c N`)."""
    import os
    import subprocess

    from tests.e2e.helpers import REPO

    e = {**os.environ, "XDG_STATE_HOME": str(state), "COLUMNS": "80", **env}
    p = subprocess.Popen(
        [sys.executable, "-m", "pdctl", *args], cwd=REPO, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    p.stdout.read(read)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.stderr.close()
    return p.wait(60), err


@pytest.mark.parametrize("read", [0, 100], ids=["closed-at-once", "after-100-bytes"])
def test_a_reader_that_goes_away_leaves_the_verdict_as_exit_status(tmp_path, read):
    """`pdctl ... | head -1`: the rest of the output is dropped quietly, and the exit status is the command's verdict
    whatever the output's size (a small one used to fail on its last flush with exit 1, "a check failed")."""
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = write_inventory(tmp_path / "inv.yaml", local_inventory("gone", ports))
    audit = tmp_path / "audit.jsonl"
    audit.write_text("".join(f"not a record {i}\n" for i in range(5000)))  # ~300 KB of history: over a pipe's size
    env = {"PDCTL_AUDIT_LOG": str(audit)}
    cases = {
        ("render", "-i", str(inv)): 0,
        ("render", "-i", str(inv), "--json"): 0,
        ("history", "-n", "5000"): 0,
        ("history", "-n", "5000", "--json"): 0,
        ("verify", "final-health", "-i", str(inv)): 1,
        ("status", "-i", str(inv), "--json"): 1,
    }
    for args, verdict in cases.items():
        code, err = _with_reader_gone(list(args), tmp_path, env, read)
        assert (code, "Traceback" in err, "error:" in err) == (verdict, False, False), (args, code, err)


def test_history_since_after_until_is_a_usage_error(tmp_path):
    """An empty window is a mistake, not "no records" (a time ago counts back from now: 2h is after 3h)."""
    error = _error_doc(pdctl(["history", "--since", "2h", "--until", "3h", "--json"], state=tmp_path), 2, "usage")
    assert error["message"].startswith("--since '2h' is after --until '3h'")
    assert pdctl(["history", "--since", "3h", "--until", "2h"], state=tmp_path).code == 0


def test_status_with_a_key_file_missing_says_to_fix_it_not_to_retry(tmp_path):
    """A host whose SSH key file does not exist: every role unknown, exit 2 naming the file, and the next step is
    to fix it (a retry cannot help)."""
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = write_inventory(
        tmp_path / "inv.yaml",
        local_inventory(
            "nokey",
            ports,
            host={
                "transport": "ssh",
                "address": "127.0.0.1",
                "port": closed_port(),
                "key": str(tmp_path / "nokey"),
                "http": "tunnel",
                "connect_timeout": 2,
                "service_manager": "pidfile",
            },
        ),
    )
    r = pdctl(["status", "-i", str(inv)], state=tmp_path, env={"COLUMNS": "80"})
    assert r.code == 2 and str(tmp_path / "nokey") in r.stderr, r.output
    assert "next: fix what the error below names" in r.stdout and "retry" not in r.stdout, r.stdout


def test_logs_of_a_role_never_started_says_no_log_file_and_where_exit_1(tmp_path):
    """Nothing deployed: the role's log file does not exist. Said, with the path looked at, exit 1 (the host
    answered: not unknown); an empty screen and exit 0 said neither. An existing empty log still prints nothing."""
    from tests.e2e.helpers import local_inventory, write_inventory
    from tests.fixtures.net import free_port

    ports = {k: free_port() for k in ("prefill", "bootstrap", "decode", "router", "prometheus")}
    inv = write_inventory(tmp_path / "inv.yaml", local_inventory("nolog", ports))
    r = pdctl(["logs", "decode", "-i", str(inv)], state=tmp_path / "state", timeout=60)
    assert r.code == 1, r.output
    assert r.stdout == "" and "Traceback" not in r.output
    log = tmp_path / "state" / "pdctl" / "pdctl-nolog-decode-0.log"
    assert r.stderr.startswith("error: ") and "no log file" in r.stderr and str(log) in r.stderr, r.stderr
    assert "hint: " in r.stderr

    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    r = pdctl(["logs", "decode", "-i", str(inv)], state=tmp_path / "state", timeout=60)
    assert r.code == 0 and r.stderr == "", r.output


def test_logs_mask_every_secret_the_inventory_declares_not_only_the_roles_own(tmp_path):
    """A prefill's API token, or the router's --api-key, can reach the decode's or the router's log (a peer quotes
    it): `logs` masks every declared secret, as playbook output does."""
    from tests.e2e.helpers import local_inventory, write_inventory
    from tests.fixtures.net import free_port

    ports = {k: free_port() for k in ("prefill", "bootstrap", "decode", "router", "prometheus")}
    data = local_inventory("maskall", ports, prefill_env={"API_TOKEN": "s3cr3tvalue"})
    data["roles"]["router"][0]["args"]["--api-key"] = "routerkey123"
    inv = write_inventory(tmp_path / "inv.yaml", data)
    state = tmp_path / "state" / "pdctl"
    state.mkdir(parents=True)
    for role in ("decode", "router"):
        (state / f"pdctl-maskall-{role}-0.log").write_text("peer said s3cr3tvalue with key routerkey123\n")
    for role in ("decode", "router"):
        r = pdctl(["logs", role, "-i", str(inv)], state=tmp_path / "state", timeout=60)
        assert r.code == 0, r.output
        assert "s3cr3tvalue" not in r.stdout and "routerkey123" not in r.stdout and "peer said" in r.stdout, r.stdout
