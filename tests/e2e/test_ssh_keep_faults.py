"""Kept SSH connections under faults and strangers, with real parts: another uid (`nobody`) on the socket and on a
kept forwarder, an unknown host key, a control directory with the wrong mode or owner, a keeper killed -9 between
runs and in the middle of a request. Each is refused or "unknown", never a wrong answer."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, pdctl, write_inventory
from tests.fixtures.keepers import control, vsshd  # noqa: F401 (fixtures)
from tests.fixtures.keepers import UNIX_PEER, accepted, as_nobody, drive, driver_cmd, kept_host, pid_alive, wait_until
from tests.fixtures.net import free_port, wait_port

pytestmark = pytest.mark.e2e


def _keeper(control, host) -> dict:
    assert drive(control, host, "result = t.run('true', timeout=10).ok")["value"] is True
    return control.info()


def test_another_user_is_stopped_by_the_directory_and_by_the_peer_check(vsshd, control):
    info = _keeper(control, kept_host(vsshd))
    sock = info["socket"]
    assert (os.stat(sock).st_mode & 0o777) == 0o600 and (control.dir.stat().st_mode & 0o777) == 0o700
    assert as_nobody(UNIX_PEER, sock) == {"connect": "PermissionError"}  # 0700 directory, 0600 socket
    # open both up, as a mistaken chmod would: the keeper's SO_PEERCRED check still turns nobody away
    for d in (control.runtime, control.dir):  # mkdtemp made the runtime dir 0700 too
        os.chmod(d, 0o711)
    os.chmod(sock, 0o666)
    seen = as_nobody(UNIX_PEER, sock)
    assert set(seen) == {"frame", "then"} and "hello" not in (seen["frame"] or {}), seen
    assert "uid" in seen["frame"]["refused"] and seen["then"] == 0, seen
    log = Path(sock).with_suffix(".log").read_text()
    assert f"refused a connection from uid {pwd.getpwnam('nobody').pw_uid}" in log
    os.chmod(control.dir, 0o700)
    assert (
        drive(control, kept_host(vsshd), "result = t.run('echo still-mine', timeout=10).stdout")["value"]
        == "still-mine\n"
    )


_TCP_GET = """
import json, sys, urllib.request
try:
    print(json.dumps({"body": urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__}))
"""


def test_a_kept_forwarder_serves_only_its_user(vsshd, control, tmp_path):
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "health").write_text("secret-side")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", str(tmp_path / "www")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, proc=server)
        code = (
            "import urllib.request\n"
            f"url = t.http_base_url({port}) + '/health'\n"
            "result = [url, urllib.request.urlopen(url, timeout=10).read().decode()]"
        )
        url, body = drive(control, kept_host(vsshd, http="tunnel"), code)["value"]
        assert body == "secret-side"
        stranger = as_nobody(_TCP_GET, url)
        assert "body" not in stranger, stranger  # the connection is closed before anything is forwarded
    finally:
        server.kill()
        server.wait(timeout=10)
    log = next(control.dir.glob("*.log")).read_text()
    assert f"refused a forwarded connection from uid {pwd.getpwnam('nobody').pw_uid}" in log


def test_unknown_host_key_is_still_refused_through_the_keeper(vsshd, control, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = kept_host(vsshd, known_hosts=str(empty), http="tunnel", state_dir=str(tmp_path / "remote"))
    err = drive(control, host, "result = t.run('true', timeout=10)")["error"]
    assert (err["type"], err["exit_code"]) == ("HostKeyRefused", 4), err
    assert vsshd.host_key_fingerprint in err["message"] and empty.read_text() == ""
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = write_inventory(tmp_path / "inv.yaml", local_inventory("keep", ports, host=host))
    r = pdctl(["status", "-i", str(inv)], state=tmp_path, env=control.env)
    assert r.code == 4 and vsshd.host_key_fingerprint in r.stderr and "Traceback" not in r.output, r.output


@pytest.mark.parametrize(
    "mode, owner, needle", [(0o755, None, "has mode 0755, not 0700"), (0o700, "nobody", "belongs to uid")]
)
def test_a_control_directory_not_private_to_this_user_is_refused(vsshd, control, mode, owner, needle):
    control.dir.mkdir(mode=mode)
    os.chmod(control.dir, mode)
    if owner:
        if os.getuid() != 0:
            pytest.skip("needs root to chown")
        os.chown(control.dir, pwd.getpwnam(owner).pw_uid, -1)
    before = accepted(vsshd)
    err = drive(control, kept_host(vsshd), "result = t.run('true', timeout=10)")["error"]
    assert (err["type"], err["exit_code"]) == ("RefusedError", 4), err
    assert str(control.dir) in err["message"] and needle in err["message"]
    assert accepted(vsshd) == before and control.keeper_pids() == []


def test_a_keeper_killed_between_runs_is_replaced(vsshd, control):
    host = kept_host(vsshd)
    first = _keeper(control, host)
    os.kill(first["pid"], signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(first["pid"]))
    assert os.path.exists(first["socket"])  # left behind by kill -9
    before = accepted(vsshd)
    assert drive(control, host, "result = t.run('echo fresh', timeout=10).stdout")["value"] == "fresh\n"
    second = control.info()
    assert second["pid"] != first["pid"] and accepted(vsshd) - before == 1


def test_a_keeper_killed_mid_request_leaves_it_unknown(vsshd, control):
    host = kept_host(vsshd)
    _keeper(control, host)
    pid = control.info()["pid"]
    env = {**os.environ, **control.env}
    proc = subprocess.Popen(
        driver_cmd(host, "result = t.run('sleep 4242; echo done', timeout=60).stdout"),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    remote: list[int] = []
    try:
        assert wait_until(lambda: control.info()["running"] == 1, limit=30)
        # the shell and its `sleep 4242` child (argv "sleep\0" "4242"), once both exist
        assert wait_until(lambda: len(_remote_pids(vsshd, "4242")) >= 2, limit=30)
        remote = _remote_pids(vsshd, "4242")
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        for p in remote:  # the remote command outlives its connection: it was this test's, by pid
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    result = json.loads(out)
    assert "value" not in result, result  # never "done", never a made-up exit code
    assert result["error"]["exit_code"] == 3 and result["error"]["message"].startswith("unknown: gpu"), result
    assert drive(control, host, "result = t.run('echo next', timeout=10).stdout")["value"] == "next\n"
    assert control.info()["pid"] != pid


def _remote_pids(sshd, marker: str) -> list[int]:
    """The processes of a remote command (their command line has `marker`) running under the test's sshd on this
    machine: only those descending from that sshd, so that nothing else is ever killed."""

    def parent(pid: str) -> str:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1]
        except (OSError, IndexError):
            return "0"

    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or marker.encode() not in (proc / "cmdline").read_bytes():
                continue
        except OSError:
            continue
        pid = proc.name
        while pid not in ("0", "1", str(sshd.pid)):
            pid = parent(pid)
        if pid == str(sshd.pid):
            found.append(int(proc.name))
    return found
