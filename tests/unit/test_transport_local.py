"""LocalTransport on real subprocesses."""

from __future__ import annotations

import os
import time

from pdctl.inventory import Host
from pdctl.services.connect import default_state_dir, service_manager
from pdctl.services.pidfile import PidfileManager
from pdctl.transport.connect import TransportPool, connect
from pdctl.transport.local import LocalTransport


def test_run_exit_codes_and_env():
    t = LocalTransport()
    r = t.run("echo out; echo err >&2; exit 3", timeout=5)
    assert (r.exit_code, r.stdout, r.stderr, r.ok, r.timed_out) == (3, "out\n", "err\n", False, False)
    assert t.run('printf %s "$PDCTL_X"', timeout=5, env={"PDCTL_X": "a b"}).stdout == "a b"


def test_timeout_kills_the_process_group(tmp_path):
    t = LocalTransport()
    marker = tmp_path / "child.pid"
    t0 = time.monotonic()
    r = t.run(f"sleep 30 & echo $! > {marker}; wait", timeout=0.5)
    assert r.timed_out and not r.ok
    assert time.monotonic() - t0 < 5
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                break
        time.sleep(0.02)
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] == "Z"


def test_put_and_read_file_atomic(tmp_path):
    t = LocalTransport()
    p = tmp_path / "a" / "b" / "f.txt"
    t.put_file(str(p), "one", mode=0o600)
    assert t.read_file(str(p)) == b"one" and (p.stat().st_mode & 0o777) == 0o600
    t.put_file(str(p), "two")
    assert t.read_file(str(p)) == b"two"
    assert [x.name for x in p.parent.iterdir()] == ["f.txt"]  # no temp files left
    assert t.read_file(str(tmp_path / "missing")) is None


def test_http_base_url_and_connect(xdg_state):
    t = connect("local", Host())
    assert isinstance(t, LocalTransport) and t.http_base_url(30000) == "http://127.0.0.1:30000"
    with TransportPool({"local": Host()}) as pool:
        assert pool.get("local") is pool.get("local")
    m = service_manager(Host(), t)
    assert isinstance(m, PidfileManager) and m.state_dir == str(xdg_state / "pdctl")
    assert default_state_dir(Host(transport="ssh")) == "/var/lib/pdctl"
    assert default_state_dir(Host(state_dir="/srv/x")) == "/srv/x"
