"""SshTransport against a real sshd on 127.0.0.1 (tests/fixtures/sshd.py). No mocks."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pdctl.errors import HostKeyRefused, UnreachableError
from pdctl.transport.connect import TransportPool, connect
from pdctl.transport.ssh import SshTransport
from tests.fixtures.net import closed_port, free_port, wait_port

pytestmark = pytest.mark.e2e


@pytest.fixture
def ssh(sshd):
    t = SshTransport("gpu-test", sshd.make_host())
    yield t
    t.close()


def test_run_returns_exit_code_and_output(ssh):
    r = ssh.run("echo hello; echo oops >&2; exit 7", timeout=10)
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (7, "hello\n", "oops\n", False)
    r = ssh.run('printf "%s|%s" "$A" "$B"', timeout=10, env={"A": "x y $HOME", "B": "it's"})
    assert r.ok and r.stdout == "x y $HOME|it's"


def test_connection_is_reused(ssh):
    c1 = ssh.open()
    ssh.run("true", timeout=10)
    assert ssh.open() is c1 and ssh.open().get_transport() is c1.get_transport()


def test_overrunning_command_times_out_and_is_killed(ssh):
    t0 = time.monotonic()
    r = ssh.run("sleep 31337; echo never", timeout=1.0)
    assert r.timed_out and not r.ok and "never" not in r.stdout
    assert time.monotonic() - t0 < 5
    deadline = time.monotonic() + 5
    while True:  # the remote process group was killed
        left = ssh.run("pgrep -f 'sleep [3]1337' || true", timeout=10).stdout.strip()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert left == ""


def test_put_file_and_read_file_roundtrip(ssh, tmp_path):
    path = str(tmp_path / "deep" / "dir" / "unit.txt")
    ssh.put_file(path, "line 1\nünïcode\n", mode=0o600)
    assert ssh.read_file(path) == "line 1\nünïcode\n".encode()
    assert (Path(path).stat().st_mode & 0o777) == 0o600
    ssh.put_file(path, b"\x00binary")
    assert ssh.read_file(path) == b"\x00binary"
    assert sorted(p.name for p in Path(path).parent.iterdir()) == ["unit.txt"]
    assert ssh.read_file(str(tmp_path / "missing")) is None


def _serve_files(tmp_path, protocol: str):
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "health").write_text("ok-from-remote")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "-d",
            str(tmp_path / "www"),
            "--protocol",
            protocol,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, proc=proc)
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def http_server(tmp_path):
    yield from _serve_files(tmp_path, "HTTP/1.0")


@pytest.fixture
def keep_alive_server(tmp_path):
    yield from _serve_files(tmp_path, "HTTP/1.1")


def test_http_through_tunnel(sshd, http_server):
    with SshTransport("gpu-test", sshd.make_host(http="tunnel")) as t:
        url = t.http_base_url(http_server)
        assert url.startswith("http://127.0.0.1:") and not url.endswith(f":{http_server}")
        assert t.http_base_url(http_server) == url  # one forwarder per remote port
        with httpx.Client(timeout=10) as client:
            for _ in range(3):
                r = client.get(url + "/health")
                assert r.status_code == 200 and r.text == "ok-from-remote"
        local_port = int(url.rsplit(":", 1)[1])
    with pytest.raises(httpx.ConnectError):  # close() tore the forwarder down
        httpx.get(f"http://127.0.0.1:{local_port}/health", timeout=2)


def test_pooled_http_through_tunnel_keeps_one_connection_and_drops_it_with_the_tunnel(sshd, keep_alive_server):
    from pdctl.checks.http_util import client, describe_error
    from tests.fixtures.http_servers import close_http_client

    close_http_client()
    try:
        with SshTransport("gpu-test", sshd.make_host(http="tunnel")) as t:
            url = t.http_base_url(keep_alive_server)
            local_ports = set()
            for _ in range(3):
                r = client().get(url + "/health", timeout=10)
                assert r.status_code == 200 and r.text == "ok-from-remote"
                local_ports.add(r.extensions["network_stream"].get_extra_info("client_addr")[1])
            assert len(local_ports) == 1  # one connection (one SSH channel) served the three requests
        # the forwarder is gone: its pooled connection is seen closed and dropped, and the port now refuses
        with pytest.raises(httpx.ConnectError) as ei:
            client().get(url + "/health", timeout=2)
        assert describe_error(ei.value, 2) == "connection refused"
    finally:
        close_http_client()


def test_http_direct(sshd):
    t = SshTransport("gpu-test", sshd.make_host(http="direct"))
    assert t.http_base_url(30000) == "http://127.0.0.1:30000"
    assert t.http_base_url(30000, host="10.0.0.9") == "http://10.0.0.9:30000"


def test_unknown_host_key_refused(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = SshTransport("gpu-new", sshd.make_host(known_hosts=str(empty)))
    with pytest.raises(HostKeyRefused) as ei:
        t.run("true", timeout=10)
    err = ei.value
    assert err.exit_code == 4
    assert "gpu-new" in err.message and f"127.0.0.1:{sshd.port}" in err.message
    assert sshd.host_key_fingerprint in err.message
    assert "accept_new_host_key: true" in err.hint
    assert empty.read_text() == ""


def test_unknown_host_key_accepted_when_asked_and_recorded(sshd, tmp_path):
    kh = tmp_path / "ssh" / "known_hosts"  # parent does not exist yet
    with SshTransport("gpu-new", sshd.make_host(known_hosts=str(kh), accept_new_host_key=True)) as t:
        assert t.run("echo in", timeout=10).stdout == "in\n"
    assert kh.read_text().split() == sshd.host_key_line.split()
    with SshTransport("gpu-new", sshd.make_host(known_hosts=str(kh))) as t:  # now known: no accept-new needed
        assert t.run("true", timeout=10).ok


@pytest.mark.parametrize("kind", ["ed25519", "rsa"])
def test_changed_host_key_always_refused(sshd, tmp_path, kind):
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(other)], check=True)
    typ, b64 = Path(str(other) + ".pub").read_text().split()[:2]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {typ} {b64}\n")
    before = kh.read_text()
    t = SshTransport("gpu-moved", sshd.make_host(known_hosts=str(kh), accept_new_host_key=True))
    with pytest.raises(HostKeyRefused) as ei:
        t.run("true", timeout=10)
    assert ei.value.exit_code == 4
    assert "CHANGED" in ei.value.message and sshd.host_key_fingerprint in ei.value.message
    assert "gpu-moved" in ei.value.message and "ssh-keygen -R" in ei.value.hint
    assert kh.read_text() == before


def test_unreachable_host_names_it_within_connect_timeout(sshd):
    port = closed_port()
    t = SshTransport("gpu-down", sshd.make_host(port=port, connect_timeout=3))
    t0 = time.monotonic()
    with pytest.raises(UnreachableError) as ei:
        t.run("true", timeout=10)
    assert time.monotonic() - t0 < 3.5
    err = ei.value
    assert err.exit_code == 3 and err.target == "gpu-down"
    assert "gpu-down" in err.message and f"127.0.0.1:{port}" in err.message and "refused" in err.message.lower()


def test_auth_failure_is_unreachable(sshd, tmp_path):
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    t = SshTransport("gpu-auth", sshd.make_host(key=str(key)))
    with pytest.raises(UnreachableError) as ei:
        t.run("true", timeout=10)
    assert ei.value.target == "gpu-auth" and "authentication failed" in ei.value.message


def test_ssh_config_is_honoured(sshd, tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host gpu-alias\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.key_path}\n"
    )
    host = sshd.make_host(address="gpu-alias", port=22, user=None, key=None, ssh_config=str(cfg))
    with SshTransport("gpu-aliased", host) as t:
        assert (t.target.address, t.target.port, t.target.key_files) == ("127.0.0.1", sshd.port, (sshd.key_path,))
        assert t.run("echo via-config", timeout=10).stdout == "via-config\n"


def test_pool_caches_one_transport_per_host(sshd):
    with TransportPool({"gpu": sshd.make_host()}) as pool:
        t = pool.get("gpu")
        assert pool.get("gpu") is t and t.run("true", timeout=10).ok
    assert t._client is None  # closed with the pool
    t2 = connect("gpu", sshd.make_host(), eager=True)
    try:
        assert t2._client is not None
    finally:
        t2.close()


def test_parallel_commands_share_the_connection(ssh):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as ex:
        results = list(ex.map(lambda i: ssh.run(f"echo {i}", timeout=10), range(16)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(16)]
