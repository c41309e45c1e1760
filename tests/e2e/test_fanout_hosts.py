"""Fan-out over several SSH hosts (issue 14, item 1), on three real sshds: one SSH connection per host, and a host whose
commands hang is "unknown" while the other hosts' rows come back (in inventory order) before its timeout expires. The
order is read from one log that the three sshds' ForceCommand wrappers share: each host's /proc read is logged when it
starts and when it ends, and pdctl's kill of the hung command is logged when it arrives. No time is asserted beyond a
generous bound on the whole run."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from pdctl.services.pidfile import parse_proc_stat_starttime
from tests.e2e.helpers import pdctl, write_inventory
from tests.e2e.test_ssh_faults import _kill_recorded
from tests.fixtures.net import free_port
from tests.fixtures.sshd import running_sshd, write_script

pytestmark = pytest.mark.e2e

SFTP_SERVER = "/usr/lib/openssh/sftp-server"
HUNG_TIMEOUT = 5  # command_timeout of the host that hangs: the others must answer within it
HOSTS = ("gpu-hung", "gpu-a", "gpu-b")
#: role instances, in inventory order, and their hosts: the hung host comes first, so a serial loop would wait on it
PLACEMENT = [
    ("prefill", 0, "gpu-hung"),
    ("prefill", 1, "gpu-a"),
    ("decode", 0, "gpu-a"),
    ("decode", 1, "gpu-b"),
    ("router", 0, "gpu-b"),
]


@pytest.fixture(scope="module")
def three_hosts(tmp_path_factory):
    """Three sshds logging to one shared file; gpu-hung's /proc reads hang while its `hang` file exists. Each host
    has its own state_dir with a real long-running process recorded as each of its role instances' pidfile."""
    if not os.path.exists(SFTP_SERVER):
        pytest.skip(f"{SFTP_SERVER} missing")
    wd = tmp_path_factory.mktemp("fanout-hosts")
    log, pids = wd / "commands.log", wd / "hung.pids"
    procs: list[subprocess.Popen] = []
    try:
        with contextlib.ExitStack() as stack:
            servers = {}
            for name in HOSTS:
                hang = wd / name / "hang"
                wrapper = write_script(
                    wd / f"{name}-force.sh",
                    f"""#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  *sftp*) exec {SFTP_SERVER} ;;
  */proc/*)
    if [ -e {hang} ]; then
      echo "{name} hang" >> {log}; echo $$ >> {pids}; printf 'PDCTL-PID %s\\n' $$ >&2; exec sleep 120
    fi
    echo "{name} proc-start" >> {log}; /bin/sh -c "$SSH_ORIGINAL_COMMAND"; rc=$?
    echo "{name} proc-end" >> {log}; exit $rc ;;
  *kill*) echo "{name} kill" >> {log} ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
""",
                )
                servers[name] = stack.enter_context(
                    running_sshd(wd / name, log_level="VERBOSE", extra_config=(f"ForceCommand {wrapper}",))
                )
            hosts = {}
            for name, s in servers.items():
                state = wd / name / "remote-state"
                state.mkdir()
                hosts[name] = {
                    "transport": "ssh",
                    "address": s.address,
                    "port": s.port,
                    "user": s.user,
                    "key": s.key_path,
                    "known_hosts": s.known_hosts,
                    "ssh_config": "none",
                    "connect_timeout": 5,
                    "command_timeout": HUNG_TIMEOUT if name == "gpu-hung" else 30,
                    "http": "tunnel",
                    "service_manager": "pidfile",
                    "state_dir": str(state),
                }
            roles: dict[str, list] = {"prefill": [], "decode": [], "router": []}
            for role, i, host in PLACEMENT:
                p = subprocess.Popen(["sleep", "600"], start_new_session=True)
                procs.append(p)
                ticks = parse_proc_stat_starttime(Path(f"/proc/{p.pid}/stat").read_text())
                (wd / host / "remote-state" / f"pdctl-fan-{role}-{i}.pid").write_text(
                    json.dumps({"pid": p.pid, "start_ticks": ticks, "started_at": time.time()}) + "\n"
                )
                inst = {"host": host, "port": free_port(), "listen_host": "0.0.0.0"}
                if role == "prefill":
                    inst["bootstrap_port"] = free_port()
                roles[role].append(inst)
            inv = write_inventory(wd / "inv.yaml", {"name": "fan", "engine": "bundled", "hosts": hosts, "roles": roles})
            yield {
                "wd": wd,
                "inv": inv,
                "log": log,
                "servers": servers,
                "procs": procs,
                "hang": wd / "gpu-hung" / "hang",
            }
    finally:
        _kill_recorded(pids)
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def _accepted(server) -> int:
    return Path(server.log_path).read_text(errors="replace").count("Accepted publickey")


def _log(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _status(hosts, *extra: str):
    before = {n: _accepted(s) for n, s in hosts["servers"].items()}
    seen = len(_log(hosts["log"]))
    t0 = time.monotonic()
    r = pdctl(["status", "-i", str(hosts["inv"]), *extra], state=hosts["wd"], timeout=120)
    took = time.monotonic() - t0
    connections = {n: _accepted(s) - before[n] for n, s in hosts["servers"].items()}
    return r, took, connections, _log(hosts["log"])[seen:]


def test_status_over_three_hosts_opens_one_connection_per_host(three_hosts):
    three_hosts["hang"].unlink(missing_ok=True)
    r, _took, connections, logged = _status(three_hosts, "--json")
    assert r.code == 0, r.output
    doc = r.json()
    assert [(x["role"], x["index"], x["state"]) for x in doc["roles"]] == [
        (role, i, "running") for role, i, _h in PLACEMENT
    ]
    assert connections == {n: 1 for n in HOSTS}, connections  # one SSH connection per host
    on = {n: sum(h == n for _r, _i, h in PLACEMENT) for n in HOSTS}  # status reads /proc once per instance
    assert {n: logged.count(f"{n} proc-start") for n in HOSTS} == on, logged


def test_a_hung_host_is_unknown_and_the_others_answer_before_its_timeout(three_hosts):
    three_hosts["hang"].touch()
    try:
        r, took, connections, logged = _status(three_hosts, "--json")
    finally:
        three_hosts["hang"].unlink(missing_ok=True)
    assert r.code == 3, r.output
    doc = r.json()
    states = [(x["role"], x["index"], x["state"]) for x in doc["roles"]]
    assert states == [(role, i, "unknown" if h == "gpu-hung" else "running") for role, i, h in PLACEMENT], states
    assert "Traceback" not in r.output
    # the healthy hosts were asked while gpu-hung hung, and had answered before pdctl gave up on it (its kill)
    assert "gpu-hung hang" in logged and "gpu-hung kill" in logged, logged
    killed = logged.index("gpu-hung kill")
    for name in ("gpu-a", "gpu-b"):
        assert logged.index(f"{name} proc-end") < killed, logged
    assert connections == {n: 1 for n in HOSTS}, connections  # the kill went over the host's one connection
    assert took < HUNG_TIMEOUT + 30, took  # bounded: one host's timeout, no stall
    assert all(p.poll() is None for p in three_hosts["procs"])  # an unknown touches nothing


def test_the_screen_names_the_hung_host_and_shows_every_row(three_hosts):
    three_hosts["hang"].touch()
    try:
        r, _took, _connections, _logged = _status(three_hosts)
    finally:
        three_hosts["hang"].unlink(missing_ok=True)
    assert r.code == 3, r.output
    rows = [line for line in r.stdout.splitlines() if line.lstrip().startswith(("prefill[", "decode[", "router["))]
    assert len(rows) == len(PLACEMENT), r.stdout
    assert "unknown" in rows[0] and "gpu-hung" in rows[0], rows
    assert all("running" in row for row in rows[1:]), rows
    assert "stopped" not in r.output
    assert f"gpu-hung did not answer within {HUNG_TIMEOUT} s" in r.stderr, r.stderr
