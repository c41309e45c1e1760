"""Kept SSH connections (keep_connection) against a real sshd whose log counts every accepted connection: separate
pdctl processes share one connection through a keeper, which `pdctl ssh --close` and idle expiry end. No mocks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, pdctl, write_inventory
from tests.fixtures.keepers import control, vsshd  # noqa: F401 (fixtures)
from tests.fixtures.keepers import accepted, drive, driver_cmd, kept_host, pid_alive, wait_until
from tests.fixtures.net import closed_port, free_port, wait_port

pytestmark = pytest.mark.e2e


def test_warm_runs_reuse_one_connection_without_importing_paramiko(vsshd, control):
    host = kept_host(vsshd)
    before = accepted(vsshd)
    runs = [drive(control, host, "result = t.run('echo warm-$((20+1))', timeout=10).stdout") for _ in range(3)]
    assert [r.get("value") for r in runs] == ["warm-21\n"] * 3, runs
    assert accepted(vsshd) - before == 1  # one SSH connection for three processes
    assert [r["paramiko"] for r in runs] == [False] * 3  # the keeper holds paramiko, not the client
    info = control.info()
    assert info["connected"] and info["requests"] >= 3 and pid_alive(info["pid"])


def test_unkept_host_still_connects_per_process(vsshd, control):
    host = kept_host(vsshd, keep=0)
    before = accepted(vsshd)
    runs = [drive(control, host, "result = t.run('echo cold', timeout=10).stdout") for _ in range(2)]
    assert [r.get("value") for r in runs] == ["cold\n"] * 2
    assert accepted(vsshd) - before == 2 and all(r["paramiko"] for r in runs)
    assert control.sockets() == [] and control.keeper_pids() == []


def test_files_env_and_errors_cross_the_keeper(vsshd, control, tmp_path):
    host = kept_host(vsshd)
    path = tmp_path / "deep" / "f.bin"
    assert drive(control, host, f"result = t.put_file({str(path)!r}, b'\\x00bin\\xff', mode=0o600)") == {
        "value": None,
        "paramiko": False,
    }
    assert path.read_bytes() == b"\x00bin\xff" and (path.stat().st_mode & 0o777) == 0o600
    assert drive(control, host, f"result = t.read_file({str(path)!r}) == b'\\x00bin\\xff'")["value"] is True
    assert drive(control, host, f"result = t.read_file({str(tmp_path / 'missing')!r})")["value"] is None
    r = drive(control, host, "result = t.run('printf %s \"$A\"', timeout=10, env={'A': \"it's $HOME\"}).stdout")
    assert r["value"] == "it's $HOME"
    bad = drive(control, host, "result = t.run('true', timeout=10, env={'1BAD': 'x'})")["error"]
    assert bad["type"] == "ValueError"  # as SshTransport raises it, not "unknown"
    slow = drive(control, host, "result = t.run('sleep 31337', timeout=1).timed_out")
    assert slow["value"] is True


def test_parallel_threads_of_one_process_share_the_keeper(vsshd, control):
    host = kept_host(vsshd)
    before = accepted(vsshd)
    code = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "result = list(ThreadPoolExecutor(8).map(lambda i: t.run(f'echo {i}', timeout=10).stdout, range(24)))"
    )
    assert drive(control, host, code)["value"] == [f"{i}\n" for i in range(24)]
    assert accepted(vsshd) - before == 1


def test_processes_starting_at_once_share_one_keeper(vsshd, control):
    host = kept_host(vsshd)
    before = accepted(vsshd)
    env = {**os.environ, **control.env}
    procs = [
        subprocess.Popen(
            driver_cmd(host, f"result = t.run('echo {i}', timeout=10).stdout"),
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [o[0].strip().startswith('{"value": "') for o in outs] == [True] * 4, outs
    assert accepted(vsshd) - before == 1
    assert len(control.sockets()) == 1 and len(control.keeper_pids()) == 1


@pytest.fixture
def http_server(tmp_path):
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "health").write_text("ok-through-keeper")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", str(tmp_path / "www")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, proc=proc)
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_tunnel_is_the_keepers_and_outlives_the_process(vsshd, control, http_server):
    host = kept_host(vsshd, http="tunnel")
    get = (
        "import httpx\n"
        f"url = t.http_base_url({http_server})\n"
        "result = [url, httpx.get(url + '/health', timeout=10).text]"
    )
    first = drive(control, host, get)["value"]
    second = drive(control, host, get)["value"]
    assert first[1] == second[1] == "ok-through-keeper"
    assert first[0] == second[0] and first[0] != f"http://127.0.0.1:{http_server}"  # one forwarder, kept
    why = (
        "import httpx, time\n"
        f"url, since = t.http_base_url({closed_port()}), time.monotonic()\n"
        "try:\n    httpx.get(url + '/health', timeout=5)\nexcept httpx.HTTPError:\n    pass\n"
        "result = t.tunnel_failure(url, since)"
    )
    assert drive(control, host, why)["value"] == "connection refused"


def test_pdctl_runs_share_the_connection_until_ssh_close(vsshd, control, tmp_path):
    host = kept_host(vsshd, http="tunnel", state_dir=str(tmp_path / "remote"), python=sys.executable)
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = write_inventory(tmp_path / "inv.yaml", local_inventory("keep", ports, host=host))
    before = accepted(vsshd)
    for _ in range(2):
        r = pdctl(["status", "-i", str(inv), "--json"], state=tmp_path, env=control.env)
        assert r.code == 1 and {x["state"] for x in r.json()["roles"]} == {"stopped"}, r.output
    assert accepted(vsshd) - before == 1
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pdctl", "status", "-i", str(inv)],
        cwd=REPO,
        env={**os.environ, **control.env, "XDG_STATE_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imports.returncode == 1 and "paramiko" not in imports.stderr and "pdctl.transport.kept" in imports.stderr

    listed = pdctl(["ssh", "-i", str(inv), "--json"], state=tmp_path, env=control.env)
    assert listed.code == 0, listed.output
    (row,) = listed.json()["connections"]
    pid, sock = row["pid"], row["socket"]
    assert (row["host"], row["state"], row["keep"]) == ("local", "kept", 60.0) and pid_alive(pid)
    screen = pdctl(["ssh", "-i", str(inv)], state=tmp_path, env={**control.env, "COLUMNS": "80"})
    assert screen.code == 0 and str(pid) in screen.stdout and Path(sock).name in screen.stdout
    assert max(map(len, screen.stdout.splitlines())) <= 80

    closed = pdctl(["ssh", "--close", "-i", str(inv)], state=tmp_path, env=control.env)
    assert closed.code == 0 and f"closed local (keeper pid {pid})" in closed.stdout, closed.output
    assert not pid_alive(pid) and not os.path.exists(sock)
    again = pdctl(["ssh", "--close", "-i", str(inv), "--json"], state=tmp_path, env=control.env)
    assert again.code == 0 and again.json()["closed"][0]["state"] == "none"
    assert pdctl(["status", "-i", str(inv)], state=tmp_path, env=control.env).code == 1
    assert accepted(vsshd) - before == 2  # after --close the next run connects again

    unknown = pdctl(["ssh", "--close", "nosuch", "-i", str(inv), "--json"], state=tmp_path, env=control.env)
    assert unknown.code == 2 and "unknown host 'nosuch'" in unknown.json()["error"]["message"]


def test_idle_keeper_expires_and_removes_its_socket(vsshd, control):
    host = kept_host(vsshd, keep=5)  # the shortest keep the inventory takes
    assert drive(control, host, "result = t.run('echo once', timeout=10).stdout")["value"] == "once\n"
    info = control.info()
    assert info["keep"] == 5 and 0 < info["expires_in"] <= 5
    assert wait_until(lambda: not pid_alive(info["pid"]) and not control.sockets(), limit=25)
    before = accepted(vsshd)
    assert drive(control, host, "result = t.run('echo later', timeout=10).stdout")["value"] == "later\n"
    assert accepted(vsshd) - before == 1


def test_env_turns_keeping_on_and_off_and_is_checked(vsshd, control, tmp_path):
    host = kept_host(vsshd, keep=0, http="tunnel")
    assert (
        drive(control, host, "result = t.run('true', timeout=10).ok", env={"PDCTL_SSH_KEEP": "30"})["paramiko"] is False
    )
    assert control.info()["keep"] == 30
    assert (
        drive(control, kept_host(vsshd), "result = t.run('true', timeout=10).ok", env={"PDCTL_SSH_KEEP": "0"})[
            "paramiko"
        ]
        is True
    )
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = write_inventory(tmp_path / "inv.yaml", local_inventory("keep", ports, host=host))
    r = pdctl(["status", "-i", str(inv), "--json"], state=tmp_path, env={**control.env, "PDCTL_SSH_KEEP": "soon"})
    assert r.code == 2 and "PDCTL_SSH_KEEP='soon'" in r.json()["error"]["message"], r.output


def test_a_keeper_whose_host_refused_is_shown_not_connected(control, tmp_path):
    """A kept host that refuses: its keeper stays (it retries), but the screen must not show a plain "kept"
    while --json says "connected": false; the state says not connected, at 80 columns."""
    host = {
        "transport": "ssh",
        "address": "127.0.0.1",
        "port": closed_port(),
        "user": "root",
        "connect_timeout": 3,
        "known_hosts": str(tmp_path / "kh"),
        "ssh_config": "none",
        "http": "tunnel",
    }
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    data = local_inventory("refused", ports, host=host)
    data["hosts"] = {"gpu1": host}
    for role in ("prefill", "decode", "router"):
        data["roles"][role][0]["host"] = "gpu1"
    inv = write_inventory(tmp_path / "inv.yaml", data)
    env = {**control.env, "PDCTL_SSH_KEEP": "30", "COLUMNS": "80"}
    try:
        assert pdctl(["status", "-i", str(inv)], state=tmp_path, env=env, timeout=120).code == 3
        listed = pdctl(["ssh", "-i", str(inv), "--json"], state=tmp_path, env=env)
        (row,) = listed.json()["connections"]
        if row["state"] != "kept":
            pytest.skip(f"no keeper left running for a refusing host (state {row['state']})")
        assert row["connected"] is False, row
        screen = pdctl(["ssh", "-i", str(inv)], state=tmp_path, env=env)
        assert screen.code == 0, screen.output
        (line,) = [x for x in screen.stdout.splitlines() if x.startswith("gpu1")] or [screen.stdout]
        assert "kept, not connected" in line and str(row["pid"]) in screen.stdout, screen.stdout
        assert max(map(len, screen.stdout.splitlines())) <= 80, screen.stdout
    finally:
        pdctl(["ssh", "--close", "-i", str(inv)], state=tmp_path, env=env)
