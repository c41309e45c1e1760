"""Reaching a host through a bastion: inventory proxy_jump, ssh_config ProxyJump and ProxyCommand, against a real
sshd. The sshd logs every accepted login, so a jumped connection is seen as two logins (bastion, then target)."""

from __future__ import annotations

import pytest

from pdctl.errors import UnreachableError
from pdctl.transport.ssh import SshTransport
from tests.fixtures.net import closed_port
from tests.fixtures.sshd import running_sshd

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def chatty_sshd(tmp_path_factory):
    with running_sshd(tmp_path_factory.mktemp("sshd-info"), log_level="INFO") as server:
        yield server


def _logins(server) -> int:
    with open(server.log_path) as f:
        return sum("Accepted publickey" in line for line in f)


def _run_true(host) -> None:
    t = SshTransport("gpu", host)
    try:
        res = t.run("echo reached", timeout=20)
        assert res.ok and res.stdout.strip() == "reached", res
    finally:
        t.close()


def test_direct_connection_is_one_login(chatty_sshd):
    before = _logins(chatty_sshd)
    _run_true(chatty_sshd.make_host())
    assert _logins(chatty_sshd) - before == 1


def test_inventory_proxy_jump_goes_through_the_bastion(chatty_sshd):
    before = _logins(chatty_sshd)
    _run_true(chatty_sshd.make_host(proxy_jump=f"{chatty_sshd.user}@127.0.0.1:{chatty_sshd.port}"))
    assert _logins(chatty_sshd) - before == 2


def test_ssh_config_proxyjump_with_aliases(chatty_sshd, tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host bastion\n  HostName 127.0.0.1\n  Port {chatty_sshd.port}\n\n"
        f"Host gpu-behind\n  HostName 127.0.0.1\n  Port {chatty_sshd.port}\n  ProxyJump bastion\n"
    )
    before = _logins(chatty_sshd)
    _run_true(chatty_sshd.make_host(address="gpu-behind", port=22, ssh_config=str(cfg)))
    assert _logins(chatty_sshd) - before == 2


def test_ssh_config_proxycommand(chatty_sshd, tmp_path):
    marker = tmp_path / "proxy-used"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host gpu-cmd\n  HostName 127.0.0.1\n  Port {chatty_sshd.port}\n"
        f"  ProxyCommand sh -c 'touch {marker}; exec ssh -q -F /dev/null -i {chatty_sshd.key_path} "
        f"-o UserKnownHostsFile={chatty_sshd.known_hosts} -o StrictHostKeyChecking=yes "
        f"-p {chatty_sshd.port} -W %h:%p {chatty_sshd.user}@127.0.0.1'\n"
    )
    before = _logins(chatty_sshd)
    _run_true(chatty_sshd.make_host(address="gpu-cmd", port=22, ssh_config=str(cfg)))
    assert marker.exists()
    assert _logins(chatty_sshd) - before == 2


def test_unreachable_jump_names_the_host(chatty_sshd):
    host = chatty_sshd.make_host(proxy_jump=f"root@127.0.0.1:{closed_port()}", connect_timeout=3)
    with pytest.raises(UnreachableError) as e:
        SshTransport("gpu", host).run("true", timeout=10)
    assert "gpu" in e.value.message and e.value.exit_code == 3


def test_two_hops_in_ssh_j_order(chatty_sshd):
    from pdctl.transport.ssh import parse_jump

    # like ssh -J a,b: a is dialled first, b (the last hop) dials the target
    assert parse_jump("ua@a:1,ub@b:2") == ("ub", "b", 2, "ua@a:1")
    hop = f"{chatty_sshd.user}@127.0.0.1:{chatty_sshd.port}"
    before = _logins(chatty_sshd)
    _run_true(chatty_sshd.make_host(proxy_jump=f"{hop},{hop}"))
    assert _logins(chatty_sshd) - before == 3
