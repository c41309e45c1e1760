"""The resident pdctl (pdctl/resident.py) with real processes: a `pdctl verify` forked from it answers as a run of
its own would (output, exit codes, --json), and the resident keeps pdctl's rules: signals reach the run, a client
that goes away has its run hung up, another user is turned away, `pdctl ssh --close` and idle expiry end it, and
PDCTL_RESIDENT=0 never asks it. Its start-up from a kept SSH run is tested in test_ssh_keep.py."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, write_inventory
from tests.fixtures.keepers import UNIX_PEER, as_nobody, new_control, pid_alive, wait_until
from tests.fixtures.net import closed_port, free_port

pytestmark = pytest.mark.e2e


class Resident:
    def __init__(self, control, state: Path):
        self.control, self.state = control, state
        self.env = {**os.environ, "XDG_RUNTIME_DIR": control.runtime, "XDG_STATE_HOME": str(state),
                    "COLUMNS": "80", "PDCTL_OPERATOR": "test-operator"}
        self.env.pop("PDCTL_RESIDENT", None)

    def python(self, code: str) -> str:
        p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=self.env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout

    def start(self, keep: float) -> None:
        self.control.dir.mkdir(mode=0o700, exist_ok=True)
        self.python(f"from pdctl.resident_client import start_resident; start_resident({keep})")
        assert wait_until(lambda: self.info() is not None, 30), self.log()

    def info(self) -> dict | None:
        """What the resident serving this code says (None: none answers)."""
        out = self.python("import json; from pdctl.ops.ssh_keep import resident_pdctls; "
                          "print(json.dumps([r.__dict__ for r in resident_pdctls() if r.current]))")
        found = json.loads(out)
        return found[0] if found else None

    def log(self) -> str:
        return "".join(p.read_text() for p in self.control.dir.glob("resident-*.log"))

    def pdctl(self, *args: str, resident: bool = True, **kw) -> subprocess.CompletedProcess:
        env = self.env if resident else {**self.env, "PDCTL_RESIDENT": "0"}
        kw.setdefault("cwd", REPO)
        return subprocess.run([sys.executable, "-m", "pdctl", *args], env=env, capture_output=True, text=True,
                              timeout=120, **kw)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "pdctl", *args], cwd=REPO, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def resident(tmp_path):
    control = new_control()
    r = Resident(control, tmp_path / "state")
    try:
        r.start(keep=120)
        yield r
    finally:
        control.cleanup()


def _no_latency(doc):
    if isinstance(doc, dict):
        return {k: _no_latency(v) for k, v in doc.items() if k not in ("latency_ms", "elapsed_s", "duration_s")}
    if isinstance(doc, list):
        return [_no_latency(v) for v in doc]
    return doc


def _ssh_inventory(name: str) -> dict:
    """An inventory of one SSH host where no sshd listens (nothing here connects to it)."""
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    return local_inventory(name, ports, host={"transport": "ssh", "address": "127.0.0.1", "port": closed_port(),
                                              "http": "tunnel"})


@pytest.fixture
def nothing_running(tmp_path):
    """An inventory of roles on ports where nothing listens: final-health fails fast (exit 1)."""
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    return write_inventory(tmp_path / "inv.yaml", local_inventory("resident", ports, host={
        "transport": "local", "service_manager": "pidfile", "python": sys.executable,
        "state_dir": str(tmp_path / "remote")}))


def test_a_verify_run_is_forked_by_the_resident_and_answers_as_its_own_run_would(resident, nothing_running):
    before = resident.info()["served"]
    served = resident.pdctl("verify", "final-health", "-i", str(nothing_running), "--json")
    assert resident.info()["served"] == before + 1
    alone = resident.pdctl("verify", "final-health", "-i", str(nothing_running), "--json", resident=False)
    assert resident.info()["served"] == before + 1                 # PDCTL_RESIDENT=0: not asked
    assert served.returncode == alone.returncode == 1, served.stderr
    assert _no_latency(json.loads(served.stdout)) == _no_latency(json.loads(alone.stdout))
    screen = resident.pdctl("verify", "final-health", "-i", str(nothing_running))
    assert screen.returncode == 1 and screen.stdout.startswith("final-health: FAIL"), screen.stdout
    assert max(len(line) for line in screen.stdout.splitlines()) <= 80       # the caller's COLUMNS


def test_usage_errors_and_help_are_the_same_through_the_resident(resident):
    for args in (["verify", "final-health", "--layer", "bogus"], ["verify", "--help"], ["verify", "nosuch"]):
        served, alone = resident.pdctl(*args), resident.pdctl(*args, resident=False)
        assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    assert resident.info()["served"] == 3
    other = resident.pdctl("history", "--json")     # only `verify` is served: the rest runs on its own
    assert other.returncode == 0 and resident.info()["served"] == 3


def test_the_run_gets_the_callers_directory_environment_and_streams(resident, nothing_running, tmp_path):
    (tmp_path / "work").mkdir()
    os.link(nothing_running, tmp_path / "work" / "here.yaml")
    r = resident.pdctl("verify", "final-health", "-i", "here.yaml", "--json", cwd=tmp_path / "work")
    assert r.returncode == 1 and json.loads(r.stdout)["inventory"] == "resident"
    assert resident.info()["served"] == 1
    # an environment value only the caller has reaches the run: a bad PDCTL_SSH_KEEP is its usage error
    ssh = write_inventory(tmp_path / "work" / "ssh.yaml", _ssh_inventory("env"))
    bad = subprocess.run([sys.executable, "-m", "pdctl", "verify", "final-health", "-i", str(ssh)],
                         cwd=tmp_path / "work", env={**resident.env, "PDCTL_SSH_KEEP": "soon"}, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "PDCTL_SSH_KEEP='soon'" in bad.stderr, bad.stderr
    assert resident.info()["served"] == 2


@pytest.fixture
def silent_router_listener(tmp_path):
    """An inventory whose router port accepts connections and never answers: final-health waits on it; and that
    port's listening socket (closing it resets the waiting probe: the run ends with its findings)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    ports = {k: closed_port() for k in ("prefill", "decode", "bootstrap", "prometheus")}
    ports["router"] = listener.getsockname()[1]
    inv = write_inventory(tmp_path / "silent.yaml", local_inventory("silent", ports, host={
        "transport": "local", "service_manager": "pidfile", "python": sys.executable,
        "state_dir": str(tmp_path / "remote")}))
    try:
        yield inv, listener
    finally:
        listener.close()


@pytest.fixture
def silent_router(silent_router_listener):
    return silent_router_listener[0]


def _running_run(resident) -> int:
    """The pid of the run the resident is serving now (its one child)."""
    pid = resident.info()["pid"]
    assert wait_until(lambda: resident.info()["running"] == 1, 30)
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def test_ctrl_c_reaches_the_run_and_its_exit_is_the_callers(resident, silent_router):
    client = resident.popen("verify", "final-health", "-i", str(silent_router))
    try:
        run = _running_run(resident)
        time.sleep(0.5)   # past the start of its layers
        client.send_signal(signal.SIGINT)
        out, err = client.communicate(timeout=60)
    finally:
        client.kill()
    assert client.returncode == 130, err
    assert "interrupted" in (out + err).lower()
    assert wait_until(lambda: not pid_alive(run), 10)
    assert resident.info()["running"] == 0


@pytest.mark.parametrize("resident_serves", [True, False], ids=["resident", "own-process"])
def test_signals_the_caller_ignores_stay_ignored(resident, silent_router_listener, resident_serves):
    """`nohup pdctl ...` (SIGHUP ignored) and a script's background job (SIGINT ignored): neither signal stops the
    run, whether the resident forked it or it runs in its own process; it ends with its findings."""
    inv, listener = silent_router_listener

    def ignore():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    env = resident.env if resident_serves else {**resident.env, "PDCTL_RESIDENT": "0"}
    client = subprocess.Popen([sys.executable, "-m", "pdctl", "verify", "final-health", "-i", str(inv)], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore)
    try:
        if resident_serves:
            _running_run(resident)
        assert select.select([listener], [], [], 30)[0], "the run never reached the router"
        client.send_signal(signal.SIGHUP)
        client.send_signal(signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):   # a bounded wait: the run goes on
            client.wait(1)
        listener.close()   # the router goes away: the run ends with its findings
        out, err = client.communicate(timeout=60)
    finally:
        client.kill()
    assert client.returncode == 1, (client.returncode, err)
    assert "interrupted" not in (out + err).lower() and "FAIL" in out
    assert resident.info()["served"] == (1 if resident_serves else 0)


def test_a_client_killed_has_its_run_hung_up(resident, silent_router):
    client = resident.popen("verify", "final-health", "-i", str(silent_router))
    try:
        run = _running_run(resident)
        client.kill()
        client.wait(30)
        assert wait_until(lambda: not pid_alive(run), 15)     # SIGHUP, as a closed terminal
    finally:
        client.kill()
    assert wait_until(lambda: resident.info()["running"] == 0, 10)


def test_another_user_is_stopped_by_the_directory_and_by_the_peer_check(resident):
    sock = resident.info()["socket"]
    assert os.stat(sock).st_mode & 0o777 == 0o600
    assert as_nobody(UNIX_PEER, sock) == {"connect": "PermissionError"}
    for d in (resident.control.runtime, resident.control.dir):
        os.chmod(d, 0o711)
    os.chmod(sock, 0o666)
    seen = as_nobody(UNIX_PEER, sock)
    assert "hello" not in (seen["frame"] or {}) and "uid" in seen["frame"]["refused"] and seen["then"] == 0, seen
    assert f"refused a connection from uid {__import__('pwd').getpwnam('nobody').pw_uid}" in resident.log()


def test_ssh_close_and_idle_expiry_end_it(resident, tmp_path):
    inv = write_inventory(tmp_path / "ssh.yaml", _ssh_inventory("closing"))
    pid = resident.info()["pid"]
    # one left from code since changed: another stamp's socket in the same directory
    old_sock = str(resident.control.dir / "resident-0000000000000000.sock")
    subprocess.run([sys.executable, "-m", "pdctl.resident", json.dumps({"socket": old_sock, "keep": 60})],
                   cwd=REPO, env=resident.env, check=True, timeout=30)
    assert wait_until(lambda: os.path.exists(old_sock), 30)
    listed = resident.pdctl("ssh", "-i", str(inv), "--json")
    found = {r["socket"]: (r["pid"], r["current"]) for r in json.loads(listed.stdout)["residents"]}
    assert found[resident.info()["socket"]] == (pid, True) and found[old_sock][1] is False, found
    old_pid = found[old_sock][0]
    screen = resident.pdctl("ssh", "-i", str(inv))
    assert "resident pdctl (older pdctl code)" in screen.stdout and max(map(len, screen.stdout.splitlines())) <= 80
    one_host = resident.pdctl("ssh", "--close", "local", "-i", str(inv))   # that host's keeper only
    assert one_host.returncode == 0 and "resident" not in one_host.stdout and pid_alive(pid), one_host.stdout
    closed = resident.pdctl("ssh", "--close", "-i", str(inv))
    for p in (pid, old_pid):
        assert closed.returncode == 0 and f"closed the resident pdctl (pid {p})" in closed.stdout, closed.stdout
        assert not pid_alive(p)
    assert resident.info() is None
    resident.start(keep=1)
    pid = resident.info()["pid"]
    assert wait_until(lambda: not pid_alive(pid), 20), resident.log()
    assert "idle for 1 s" in resident.log()
