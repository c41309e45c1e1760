"""Faults on the SSH path, each reproduced with real parts (issue 9, item 1): a listener that never speaks SSH, a
ProxyCommand that never yields SSH, an sshd whose commands reading /proc hang, an sshd whose SFTP subsystem hangs,
a key file that does not exist. Each is "unknown"/unreachable in one line, bounded in time, never "stopped", never a
traceback. Timeouts are 2 s so the file stays fast."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pdctl.errors import UnreachableError
from pdctl.services.pidfile import parse_proc_stat_starttime
from pdctl.transport.ssh import SshTransport
from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.net import free_port
from tests.fixtures.sshd import running_sshd, write_script

pytestmark = pytest.mark.e2e

T = 2  # connect_timeout and command_timeout of every faulty host, seconds
ROLES = ("prefill", "decode", "router")


def _kill_recorded(pids_file: Path) -> None:
    """Kill the hung processes the fault scripts recorded (by pid: only what this test made hang)."""
    if not pids_file.exists():
        return
    for line in pids_file.read_text().split():
        try:
            os.kill(int(line), signal.SIGKILL)
        except (ValueError, OSError):
            pass


@pytest.fixture(scope="module")
def hung_proc_sshd(tmp_path_factory):
    """An sshd where every command that reads /proc hangs (after telling pdctl its pid, as pdctl's own preamble
    does, so pdctl's timeout kill reaches it); everything else, SFTP included, works."""
    wd = tmp_path_factory.mktemp("sshd-hung-proc")
    pids = wd / "hung.pids"
    wrapper = write_script(
        wd / "force.sh",
        f"""#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  *sftp*) exec /usr/lib/openssh/sftp-server ;;   # the subsystem arrives as its configured command
  */proc/*) echo $$ >> {pids}; printf 'PDCTL-PID %s\\n' $$ >&2; exec sleep 120 ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
""",
    )
    if not os.path.exists("/usr/lib/openssh/sftp-server"):
        pytest.skip("/usr/lib/openssh/sftp-server missing")
    try:
        with running_sshd(wd, extra_config=(f"ForceCommand {wrapper}",)) as server:
            server.extra["pids"] = pids
            yield server
    finally:
        _kill_recorded(pids)


@pytest.fixture(scope="module")
def hung_kill_sshd(tmp_path_factory):
    """An sshd that answers reads but hangs every pdctl command that sends a signal (`kill`), as a host whose
    kill blocks would. pdctl's own timeout kill (sent bare, without pdctl's PDCTL-PID preamble) still runs."""
    wd = tmp_path_factory.mktemp("sshd-hung-kill")
    pids = wd / "hung.pids"
    wrapper = write_script(
        wd / "force.sh",
        f"""#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  *sftp*) exec /usr/lib/openssh/sftp-server ;;
  printf*kill*) echo $$ >> {pids}; printf 'PDCTL-PID %s\\n' $$ >&2; exec sleep 120 ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
""",
    )
    if not os.path.exists("/usr/lib/openssh/sftp-server"):
        pytest.skip("/usr/lib/openssh/sftp-server missing")
    try:
        with running_sshd(wd, extra_config=(f"ForceCommand {wrapper}",)) as server:
            server.extra["pids"] = pids
            yield server
    finally:
        _kill_recorded(pids)


@pytest.fixture(scope="module")
def hung_sftp_sshd(tmp_path_factory):
    """An sshd whose SFTP subsystem starts and never answers; commands work."""
    wd = tmp_path_factory.mktemp("sshd-hung-sftp")
    pids = wd / "hung.pids"
    sftp = write_script(wd / "hang-sftp.sh", f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 120\n")
    try:
        with running_sshd(wd, sftp=sftp) as server:
            server.extra["pids"] = pids
            yield server
    finally:
        _kill_recorded(pids)


@pytest.fixture
def silent_listener():
    """A TCP port that accepts connections and never says a word (a wedged sshd, a firewall's tarpit)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        th.join(timeout=2)
        for c in held:
            c.close()
        srv.close()


def _host(server, tmp: Path, **over) -> dict:
    host = {
        "transport": "ssh",
        "address": "127.0.0.1",
        "port": server.port if server else 22,
        "user": server.user if server else "root",
        "connect_timeout": T,
        "command_timeout": T,
        "key": server.key_path if server else None,
        "known_hosts": server.known_hosts if server else str(tmp / "known_hosts"),
        "ssh_config": "none",
        "http": "tunnel",
        "service_manager": "pidfile",
        "state_dir": str(tmp / "remote-state"),
    }
    host.update(over)
    return {k: v for k, v in host.items() if v is not None}


def _inventory(tmp: Path, name: str, host: dict, host_name: str = "gpu-hung") -> Path:
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    data = local_inventory(name, ports, host=host)
    data["hosts"] = {host_name: host}
    for role in ROLES:
        data["roles"][role][0]["host"] = host_name
    return write_inventory(tmp / f"{name}.yaml", data)


@pytest.fixture
def running_roles(tmp_path):
    """Three real long-running processes recorded as the roles' pidfiles under tmp/remote-state (the sshd runs on
    this machine, so they are the "remote" processes). Killed by pid at the end."""
    state = tmp_path / "remote-state"
    state.mkdir()
    procs = [subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in ROLES]
    try:
        for role, p in zip(ROLES, procs):
            ticks = parse_proc_stat_starttime(Path(f"/proc/{p.pid}/stat").read_text())
            (state / f"pdctl-faults-{role}-0.pid").write_text(
                json.dumps({"pid": p.pid, "start_ticks": ticks, "started_at": time.time()}) + "\n"
            )
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def _timed_pdctl(args: list[str], tmp: Path):
    t0 = time.monotonic()
    r = pdctl(args, state=tmp, timeout=120)
    return r, time.monotonic() - t0


def _assert_one_clean_error(r, *needles: str) -> None:
    assert "Traceback" not in r.output and "paramiko" not in r.output, r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, r.stderr
    for n in needles:
        assert n in errors[0], r.stderr


# -- (b) commands that hang: unknown, exit 3, never "stopped" ---------------------------------------------------------
def test_status_over_a_host_whose_proc_reads_hang_is_unknown_not_stopped(sshd, hung_proc_sshd, running_roles, tmp_path):
    healthy = _inventory(tmp_path, "faults", _host(sshd, tmp_path), host_name="gpu-ok")
    r = pdctl(["status", "-i", str(healthy), "--json"], state=tmp_path)
    assert r.code == 0, r.output  # the same pidfiles over a sound sshd: all running
    assert {x["state"] for x in r.json()["roles"]} == {"running"}

    hung = _inventory(tmp_path, "faults", _host(hung_proc_sshd, tmp_path))
    r, took = _timed_pdctl(["status", "-i", str(hung)], tmp_path)
    assert r.code == 3, r.output
    assert took < 20, took
    assert "stopped" not in r.output and "pdctl deploy" not in r.output and "running" not in r.stdout
    assert r.stdout.count("unknown") >= 3, r.stdout
    _assert_one_clean_error(r, "unknown: gpu-hung did not answer within 2 s", "/proc/")
    j = pdctl(["status", "-i", str(hung), "--json"], state=tmp_path)
    assert j.code == 3 and {x["state"] for x in j.json()["roles"]} == {"unknown"}, j.output
    assert all(p.poll() is None for p in running_roles)  # nothing was touched
    # pdctl killed its hung probes (by the pid its preamble printed), they did not pile up
    left = [
        int(x)
        for x in hung_proc_sshd.extra["pids"].read_text().split()
        if Path(f"/proc/{x}").exists() and "sleep" in Path(f"/proc/{x}/cmdline").read_text()
    ]
    assert left == [], left


def test_final_health_flags_over_hung_proc_is_unknown_not_no_live_process(hung_proc_sshd, running_roles, tmp_path):
    hung = _inventory(tmp_path, "faults", _host(hung_proc_sshd, tmp_path))
    r, took = _timed_pdctl(["verify", "final-health", "-i", str(hung), "--layer", "flags"], tmp_path)
    assert r.code == 3, r.output
    assert took < 20, took
    assert "no live main process" not in r.output
    _assert_one_clean_error(r, "unknown: gpu-hung did not answer within 2 s")


def test_restart_over_a_host_whose_kill_hangs_is_unknown_and_never_says_sigkill_was_survived(
    hung_kill_sshd, running_roles, tmp_path
):
    inv = _inventory(tmp_path, "faults", _host(hung_kill_sshd, tmp_path))
    for role in ROLES:  # installed, as a restart requires before it stops anything
        (tmp_path / "remote-state" / f"pdctl-faults-{role}-0.json").write_text(json.dumps({"argv": ["sleep", "600"]}))
    decode = running_roles[1]  # the co-restart stops the decodes first (until the prefills are back)
    r, took = _timed_pdctl(["restart", "--pair", "--no-verify", "-i", str(inv)], tmp_path)
    assert r.code == 3, r.output
    assert took < 30, took
    assert "survived SIGKILL" not in r.output and "Traceback" not in r.output
    _assert_one_clean_error(r, "unknown: gpu-hung did not answer within 2 s", f"kill -TERM {decode.pid}")
    assert "do not redeploy or restart on this result" in r.stderr  # the hint of an unknown, not "restart"
    assert all(p.poll() is None for p in running_roles)  # no signal reached them: nothing was concluded
    assert (tmp_path / "remote-state" / "pdctl-faults-decode-0.pid").exists()


def test_restart_pair_over_a_host_whose_proc_reads_hang_is_unknown_and_stops_nothing(
    hung_proc_sshd, running_roles, tmp_path
):
    """The issue's `restart --pair` that ended in `lock: timed out creating ...` exit 1: the hang is the host's
    /proc reads (every role's status), so it is unknown (exit 3) naming the host, and no role is stopped."""
    inv = _inventory(tmp_path, "faults", _host(hung_proc_sshd, tmp_path))
    remote = tmp_path / "remote-state"
    for role in ROLES:  # installed, as a restart requires before it stops anything
        (remote / f"pdctl-faults-{role}-0.json").write_text(json.dumps({"argv": ["sleep", "600"]}))
    pidfiles = {role: (remote / f"pdctl-faults-{role}-0.pid").read_text() for role in ROLES}
    r, took = _timed_pdctl(["restart", "--pair", "--no-verify", "-i", str(inv)], tmp_path)
    assert r.code == 3, r.output
    assert took < 30, took
    assert "lock: timed out" not in r.output and "survived SIGKILL" not in r.output
    _assert_one_clean_error(r, "unknown: gpu-hung did not answer within 2 s")
    assert all(p.poll() is None for p in running_roles)  # no role stopped
    assert {role: (remote / f"pdctl-faults-{role}-0.pid").read_text() for role in ROLES} == pidfiles
    assert not list(remote.glob("locks/*.lock"))  # the lock it took is released


# -- (c) SFTP that hangs: bounded, unknown -------------------------------------------------------------------------
def test_hung_sftp_read_and_write_are_bounded_and_unknown(hung_sftp_sshd, tmp_path):
    t = SshTransport("gpu-sftp", hung_sftp_sshd.make_host(connect_timeout=T, command_timeout=T))
    try:
        assert t.run("echo alive", timeout=5).stdout == "alive\n"  # the host itself answers commands
        t0 = time.monotonic()
        with pytest.raises(UnreachableError, match=r"unknown: gpu-sftp did not answer within 1\.5 s") as e:
            t.read_file(str(tmp_path / "x.pid"), timeout=1.5)
        assert time.monotonic() - t0 < 6 and e.value.exit_code == 3
        t0 = time.monotonic()
        with pytest.raises(UnreachableError, match="did not answer within 2 s"):
            t.put_file(str(tmp_path / "spec.json"), "{}")
        assert time.monotonic() - t0 < 8
        assert not (tmp_path / "spec.json").exists()
    finally:
        t.close()


def test_status_over_hung_sftp_is_unknown_in_bounded_time(hung_sftp_sshd, running_roles, tmp_path):
    inv = _inventory(tmp_path, "faults", _host(hung_sftp_sshd, tmp_path), host_name="gpu-sftp")
    r, took = _timed_pdctl(["status", "-i", str(inv)], tmp_path)
    assert r.code == 3, r.output
    assert took < 20, took
    assert "stopped" not in r.output and "no pidfile" not in r.output and "pdctl deploy" not in r.output
    _assert_one_clean_error(r, "unknown: gpu-sftp did not answer within 2 s", "SFTP")


# -- (a) no SSH answer at all: one line, no traceback, bounded -------------------------------------------------------
def test_listener_that_never_speaks_ssh_is_one_line_exit_3(silent_listener, tmp_path):
    inv = _inventory(tmp_path, "silent", _host(None, tmp_path, port=silent_listener), host_name="gpu-silent")
    r, took = _timed_pdctl(["status", "-i", str(inv)], tmp_path)
    assert r.code == 3, r.output
    assert took < 12, took
    _assert_one_clean_error(r, "gpu-silent", f"127.0.0.1:{silent_listener}", "no SSH answer within 2 s")
    assert "No existing session" not in r.output and "stopped" not in r.output


def test_callers_waiting_on_a_failing_connect_share_its_failure(silent_listener, tmp_path):
    from pdctl.inventory import Host

    host = Host(**_host(None, tmp_path, port=silent_listener))
    t = SshTransport("gpu-silent", host)
    errors: list[Exception] = []

    def ask() -> None:
        try:
            t.run("true", timeout=T)
        except UnreachableError as e:
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    took = time.monotonic() - t0
    t.close()
    assert len(errors) == 3 and all("no SSH answer within 2 s" in e.message for e in errors), errors
    assert took < 2 * T, took  # one connect_timeout, not one per waiting caller


def test_proxy_command_that_never_yields_ssh_names_the_hop(tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host 10.255.0.9\n    ProxyCommand sleep 30\n")
    inv = _inventory(
        tmp_path, "proxied", _host(None, tmp_path, address="10.255.0.9", ssh_config=str(cfg)), host_name="gpu-behind"
    )
    r, took = _timed_pdctl(["status", "-i", str(inv)], tmp_path)
    assert r.code == 3, r.output
    assert took < 12, took
    _assert_one_clean_error(r, "gpu-behind", "via ProxyCommand 'sleep 30'", "no SSH answer within 2 s")


def test_jump_host_that_never_speaks_ssh_names_host_and_hop(sshd, silent_listener, tmp_path):
    hop = f"127.0.0.1:{silent_listener}"
    inv = _inventory(tmp_path, "jumped", _host(sshd, tmp_path, proxy_jump=hop), host_name="gpu-far")
    r, took = _timed_pdctl(["status", "-i", str(inv)], tmp_path)
    assert r.code == 3, r.output
    assert took < 12, took
    _assert_one_clean_error(r, "gpu-far", "jump 127.0.0.1", f"127.0.0.1:{silent_listener}", "no SSH answer within 2 s")


# -- (d) a key file that does not exist: one line naming host and file -------------------------------------------------
def test_missing_key_file_is_one_line_naming_host_and_file(sshd, tmp_path):
    missing = tmp_path / "keys" / "id_gone"
    inv = _inventory(tmp_path, "nokey", _host(sshd, tmp_path, key=str(missing)), host_name="gpu-nokey")
    r = pdctl(["status", "-i", str(inv)], state=tmp_path)
    assert r.code == 2, r.output
    assert "FileNotFoundError" not in r.output and "Errno" not in r.output
    _assert_one_clean_error(r, "gpu-nokey", str(missing), "does not exist")


# -- (e) SSH files that are no text file: a FIFO, /dev/zero, binary; exit 2 in one line naming host and file -----------
@pytest.mark.parametrize(
    "field, kind",
    [
        ("ssh_config", "fifo"),
        ("ssh_config", "device"),
        ("ssh_config", "binary"),
        ("known_hosts", "fifo"),
        ("known_hosts", "device"),
        ("key", "fifo"),
        ("key", "device"),
        ("key", "binary"),
    ],
)
def test_ssh_file_that_is_no_text_file_is_exit_2_naming_host_and_file(sshd, tmp_path, field, kind):
    if kind == "fifo":
        path = tmp_path / f"{field}-pipe"
        os.mkfifo(path)  # nobody writes to it: opening it for reading would block forever
    elif kind == "device":
        path = Path("/dev/zero")
    else:
        path = tmp_path / f"{field}-binary"
        path.write_bytes(bytes(range(256)) * 8)
    inv = _inventory(tmp_path, "badfile", _host(sshd, tmp_path, **{field: str(path)}), host_name="gpu-file")
    r, took = _timed_pdctl(["status", "-i", str(inv)], tmp_path)
    assert r.code == 2, r.output
    assert took < 20, took
    assert "unexpected" not in r.output and "pdctl bug" not in r.output
    _assert_one_clean_error(r, "host 'gpu-file'", str(path))
