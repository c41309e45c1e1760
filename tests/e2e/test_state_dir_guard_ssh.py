"""The host state_dir check over a real sshd (issue 28, S4, second re-pass): the same POSIX sh walk runs through the
SSH transport as through the local one (tests/unit/test_state_dir_guard.py): another user's link in a sticky
world-writable directory on the way is refused naming the host's field; a private path is made and accepted."""

from __future__ import annotations

import os

import pytest

from pdctl.services.state_dir_guard import StateDirRefused, ensure_state_dir
from pdctl.transport.ssh import SshTransport

pytestmark = pytest.mark.e2e


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a link to another user")
def test_the_walk_over_ssh_refuses_a_planted_link_and_makes_a_private_path(sshd, tmp_path):
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    victim = tmp_path / "victim"
    victim.mkdir()
    (sticky / "pdir").symlink_to(victim)
    os.lchown(sticky / "pdir", 65534, 65534)
    t = SshTransport("gpu-test", sshd.make_host())
    try:
        with pytest.raises(StateDirRefused, match=rf"^hosts\.gpu-test\.state_dir {sticky}/pdir/st: goes through "):
            ensure_state_dir(t, f"{sticky}/pdir/st")
        assert list(victim.iterdir()) == []
        ensure_state_dir(t, f"{tmp_path}/remote/state")
        assert (tmp_path / "remote" / "state").is_dir()
    finally:
        t.close()
