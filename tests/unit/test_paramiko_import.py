"""paramiko is imported without `invoke` (~70 ms of a cold SSH run), and ssh_config's `Match exec` still works:
invoke is handed to paramiko for a file that has one. Each case in a fresh interpreter, on real files."""

from __future__ import annotations

import json
import subprocess
import sys

_CODE = """
import json, sys
from pdctl.transport.known_hosts import ssh_config_for
cfg = ssh_config_for(sys.argv[1], "'gpu'", "gpu-alias")
print(json.dumps({"hostname": cfg.get("hostname"), "invoke": "invoke" in sys.modules}))
"""


def _lookup(tmp_path, text: str) -> dict:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    p = subprocess.run([sys.executable, "-c", _CODE, str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_a_plain_ssh_config_loads_paramiko_without_invoke(tmp_path):
    assert _lookup(tmp_path, "Host gpu-alias\n  HostName 10.0.0.7\n") == {"hostname": "10.0.0.7", "invoke": False}


def test_match_exec_is_still_run(tmp_path):
    text = 'Match exec "false"\n  HostName 10.0.0.1\nMatch exec "true"\n  HostName 10.0.0.2\n'
    assert _lookup(tmp_path, text) == {"hostname": "10.0.0.2", "invoke": True}


_LATE = """
import sys
from pdctl.errors import UsageError
from pdctl.transport.known_hosts import ssh_config_for
ssh_config_for(sys.argv[1], "'a'", "gpu-alias")  # loads paramiko without invoke
try:
    ssh_config_for(sys.argv[2], "'b'", "gpu-alias")
except UsageError as e:
    print(e.message)
"""


def test_match_exec_read_after_paramiko_loaded_without_invoke_is_refused_by_name(tmp_path):
    """paramiko's own state is never patched: the file that needs invoke is named, not misread."""
    plain, late = tmp_path / "plain", tmp_path / "late"
    plain.write_text("Host gpu-alias\n  HostName 10.0.0.7\n")
    late.write_text('Match exec "true"\n  HostName 10.0.0.2\n')
    p = subprocess.run([sys.executable, "-c", _LATE, str(plain), str(late)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert f"host 'b': cannot read ssh_config {late}: it has a `Match exec` line" in p.stdout


_POOL = """
import json, sys
from pdctl.inventory_hosts import SshHost
from pdctl.transport.connect import TransportPool
from pdctl.transport.known_hosts import ssh_config_for
from pdctl.transport.paramiko_import import import_paramiko
hosts = {
    "a": SshHost(address="10.0.0.1", ssh_config="none"),
    "b": SshHost(address="gpu-alias", ssh_config=sys.argv[1]),
}
with TransportPool(hosts):
    import_paramiko()  # what host a's connect does first, reading no ssh_config: it must not hold invoke off now
    cfg = ssh_config_for(sys.argv[1], "'b'", "gpu-alias")
print(json.dumps({"hostname": cfg.get("hostname"), "invoke": "invoke" in sys.modules}))
"""


def test_a_pool_with_a_match_exec_config_anywhere_loads_paramiko_with_invoke_first(tmp_path):
    """Hosts connect in parallel, in any order: a host that reads no ssh_config may load paramiko before the host
    whose ssh_config has `Match exec` is read. The pool looks at every SSH host's ssh_config before any connects."""
    late = tmp_path / "late"
    late.write_text('Match exec "true"\n  HostName 10.0.0.2\n')
    p = subprocess.run([sys.executable, "-c", _POOL, str(late)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"hostname": "10.0.0.2", "invoke": True}


def test_the_pools_look_at_ssh_configs_never_opens_a_fifo_or_reads_a_device(tmp_path):
    """A FIFO nobody writes to would block an open() forever and /dev/zero never ends: the pool's look is the safe
    read every SSH file gets, and a file it refuses is left to the host's own connect to name (exit 2 there)."""
    import os

    fifo = tmp_path / "ssh_config-pipe"
    os.mkfifo(fifo)
    code = (
        "import sys\n"
        "from pdctl.inventory_hosts import SshHost\n"
        "from pdctl.transport.connect import TransportPool\n"
        "hosts = {'a': SshHost(address='10.0.0.1', ssh_config=sys.argv[1]), "
        "'b': SshHost(address='10.0.0.2', ssh_config='/dev/zero')}\n"
        "with TransportPool(hosts):\n"
        "    print('made')\n"
    )
    p = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.strip() == "made", p.stderr
