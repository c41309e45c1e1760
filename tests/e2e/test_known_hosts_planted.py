"""Accepting a new host key from a real sshd (tests/fixtures/sshd.py) never writes through a known_hosts planted by
someone else (issue 28, S4, "every file pdctl writes is opened safely"): a symlink in a 1777 directory pointing at a
file the test owns, or a hard link to it, is refused with exit 2 naming the host and the file; that file stays
unchanged and the connection is not made (no key is trusted that could not be recorded). No mocks."""

from __future__ import annotations

import os

import pytest

from pdctl.errors import UsageError
from pdctl.transport.ssh import SshTransport

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("planted", ["symlink", "hard link"])
def test_a_planted_known_hosts_refuses_the_new_key_and_the_connection(sshd, tmp_path, planted):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    kh = shared / "known_hosts"
    kh.symlink_to(victim) if planted == "symlink" else os.link(victim, kh)
    t = SshTransport("gpu-new", sshd.make_host(known_hosts=str(kh), accept_new_host_key=True))
    try:
        with pytest.raises(UsageError) as ei:
            t.run("true", timeout=10)
    finally:
        t.close()
    err = ei.value
    assert err.exit_code == 2
    assert err.message.startswith(f"host 'gpu-new' (127.0.0.1:{sshd.port}): cannot record its new host key")
    assert sshd.host_key_fingerprint in err.message and f"known_hosts {kh}:" in err.message
    assert victim.read_text() == "keep\n"
