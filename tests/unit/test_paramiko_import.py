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
