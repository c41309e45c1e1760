"""Interruptions leave a trace and a clean lock; an audit log that cannot be written refuses before acting.

A real `python -m pdctl` subprocess deploys an inventory whose "python" is a script that just sleeps: every role
starts (a real detached process under the pidfile manager) and never becomes ready, so deploy sits in "wait
prefill[0] ready" for as long as the test likes. The test signals it there, then reads what was left behind.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, pdctl, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e]

NAME = "sleepy"


def _inventory(tmp_path: Path, *, ready_timeout: float = 120) -> Path:
    fake = tmp_path / "fake-python"
    # a role process that runs and never answers; asked by deploy's lint probe (`-c`), it fails at once instead
    fake.write_text('#!/bin/sh\n[ "$1" = -c ] && exit 1\nexec sleep 120\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(NAME, ports, host={"transport": "local", "service_manager": "pidfile", "python": str(fake)})
    for role in ("prefill", "decode", "router"):
        inv["roles"][role][0]["ready_timeout"] = ready_timeout
    return write_inventory(tmp_path / "inv.yaml", inv)


def _env(state: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(state), "COLUMNS": "200", "PDCTL_OPERATOR": "test-operator"}


def _lock_dir(state: Path) -> Path:
    return state / "pdctl" / "locks" / f"{NAME}.lock"


def _prefill_pidfile(state: Path) -> Path:
    return state / "pdctl" / f"pdctl-{NAME}-prefill-0.pid"


def _records(state: Path) -> list[dict]:
    log = state / "pdctl" / "audit.jsonl"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _state_of(states: dict[str, str], role: str) -> str:
    (state,) = [v for k, v in states.items() if k.startswith(role + "@")]
    return state


def _wait_for(what, cond, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def _kill_roles(state: Path) -> None:
    """The role processes are detached (setsid: pid == process group); kill them by their pidfiles."""
    for pidfile in (state / "pdctl").glob("*.pid"):
        try:
            os.killpg(json.loads(pidfile.read_text())["pid"], signal.SIGKILL)
        except (ValueError, KeyError, ProcessLookupError, PermissionError):
            pass


@pytest.fixture
def sleepy(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        """`pdctl ARGS` in the background, stopped in the middle of waiting for prefill[0] to be ready."""
        p = subprocess.Popen(
            [sys.executable, "-m", "pdctl", *args],
            cwd=REPO,
            env=_env(state),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        procs.append(p)
        _wait_for(
            "prefill[0] started and the lock taken",
            lambda: (_prefill_pidfile(state).exists() and _lock_dir(state).exists()) or p.poll() is not None,
        )
        assert p.poll() is None, p.communicate()
        return p

    try:
        yield {"state": state, "inv": _inventory(tmp_path), "start": start, "tmp": tmp_path}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)
        _kill_roles(state)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_mid_deploy_releases_the_lock_and_audits_interrupted(sleepy, sig):
    st = sleepy["state"]
    p = sleepy["start"]("deploy", "-i", str(sleepy["inv"]))
    p.send_signal(sig)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 130, err
    assert f"interrupted by {sig.name}" in err and "Traceback" not in out + err
    assert not _lock_dir(st).exists()
    started, end = _records(st)
    assert started["action"] == end["action"] == "deploy" and started["result"] == "started"
    assert end["run"] == started["run"] and end["result"] == f"interrupted by {sig.name}"
    assert _state_of(end["roles"], "prefill[0]").startswith("running")  # the state it left, in the record
    hist = pdctl(["history"], state=st)
    assert f"interrupted: by {sig.name}" in hist.stdout and "unfinished" not in hist.stdout


def test_kill_9_leaves_an_unfinished_record_and_the_next_restart_takes_the_lock_over_saying_so(sleepy):
    st, inv = sleepy["state"], sleepy["inv"]
    p = sleepy["start"]("deploy", "-i", str(inv))
    killed = p.pid
    p.kill()
    p.communicate(timeout=30)
    (started,) = _records(st)
    assert started["result"] == "started" and started["action"] == "deploy"
    owner = json.loads((_lock_dir(st) / "owner.json").read_text())
    assert owner["pid"] == killed and owner["run"] == started["run"]
    hist = pdctl(["history"], state=st)
    assert "unfinished" in hist.stdout and "no end recorded" in hist.stdout
    status = pdctl(["status", "--json", "-i", str(inv)], state=st)  # any command that finds the lock says so
    (hazard,) = [h for h in json.loads(status.stdout)["hazards"] if "abandoned deployment lock" in h]
    assert f"pid {killed}" in hazard and "'deploy'" in hazard

    _inventory(sleepy["tmp"], ready_timeout=1)  # same inventory name (same lock); readiness now fails fast
    r = pdctl(["restart", "--pair", "--no-verify", "-i", str(inv)], state=st, timeout=60)
    assert r.code == 1, r.output  # prefill never gets ready: a StepFailed, not a hang
    assert "abandoned deployment lock" in r.stderr and f"pid {killed}" in r.stderr and "'deploy'" in r.stderr
    assert not _lock_dir(st).exists()
    recs = _records(st)
    takeover = next(x for x in recs if x["action"] == "lock takeover")
    assert takeover["previous"]["pid"] == killed and takeover["previous"]["action"] == "deploy"
    assert takeover["previous"]["run"] == started["run"] and takeover["args"]["by"] == "restart --pair"
    assert _state_of(takeover["roles_left"], "prefill[0]").startswith("running")
    restart = [x for x in recs if x["action"] == "restart --pair"]
    assert [x["result"] for x in restart][0] == "started" and restart[-1]["result"].startswith("StepFailed")
    assert takeover["run"] == restart[0]["run"]
    hist = pdctl(["history"], state=st).stdout
    assert "taken over" in hist and hist.count("unfinished") == 1  # the killed deploy, and only it


def _start_roles(sleepy) -> dict[str, int]:
    """Every role installed and running (real detached processes under the pidfile manager), as after a deploy;
    returns label -> pid."""
    from pdctl import launch
    from pdctl.inventory import load_inventory
    from pdctl.services.pidfile import PidfileManager
    from pdctl.transport.local import LocalTransport

    inv = load_inventory(sleepy["inv"])
    mgr = PidfileManager(LocalTransport("local"), str(sleepy["state"] / "pdctl"))
    for role, i, _ in inv.instances():
        mgr.install(launch.service_spec(inv, role, i, python=str(sleepy["tmp"] / "fake-python")))
        mgr.start(inv.service_name(role, i))
    return {inv.label(role, i): mgr.status(inv.service_name(role, i)).main_pid for role, i, _ in inv.instances()}


def _pid_of(state: Path, role: str) -> int | None:
    try:
        return json.loads((state / "pdctl" / f"pdctl-{NAME}-{role}-0.pid").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.mark.parametrize("command", [["restart", "--pair"], ["restart", "--role", "prefill", "--override-hazard"]])
def test_kill_9_mid_restart_then_status_names_the_abandoned_lock_and_what_the_restart_left(sleepy, command):
    """Issue 9 item 2: after kill -9 mid-restart, `status` must not say all is well. The pair restart holds the
    decodes stopped while the prefills restart (ordered_restart), so killed while prefill[0] comes back it leaves
    prefill new and decode stopped: the lock is the hazard and the headline says decode is down. A prefill
    restarted alone (overridden) and killed leaves the mixed lineage, prefill new under the old decode: the lock and
    that lineage are both hazards."""
    st, inv = sleepy["state"], sleepy["inv"]
    before = _start_roles(sleepy)
    first = pdctl(["status", "--json", "-i", str(inv)], state=st).json()
    assert first["hazards"] == [] and {r["state"] for r in first["roles"]} == {"running"}, first
    # the co-restart record a deploy would have left: the lineage judges who changed since it
    record = {r["label"]: {"role": r["role"], "pid": r["pid"], "start": r["started_at"]} for r in first["roles"]}
    (st / "pdctl" / "lineage").mkdir(exist_ok=True)
    (st / "pdctl" / "lineage" / f"{NAME}.json").write_text(json.dumps(record))

    p = subprocess.Popen(
        [sys.executable, "-m", "pdctl", *command, "--no-verify", "-i", str(inv)],
        cwd=REPO,
        env=_env(st),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    old_prefill = _pid_of(st, "prefill")
    try:
        _wait_for(
            "prefill[0] restarted under the lock",
            lambda: (
                p.poll() is not None or (_lock_dir(st).exists() and _pid_of(st, "prefill") not in (None, old_prefill))
            ),
        )
        assert p.poll() is None, p.communicate()
        killed = p.pid
        p.kill()
    finally:
        p.communicate(timeout=30)
    action = " ".join(command[:3]) if command[1] == "--role" else "restart --pair"
    (started,) = _records(st)
    assert started["result"] == "started" and started["action"] == action

    r = pdctl(["status", "--json", "-i", str(inv)], state=st)
    assert r.code == (1 if command[1] == "--pair" else 0), r.output
    rows = {x["label"].split("@")[0]: x for x in r.json()["roles"]}
    hazards = r.json()["hazards"]
    (lock,) = [h for h in hazards if "abandoned deployment lock" in h]
    assert f"pid {killed}" in lock and f"'{action}'" in lock and started["run"] in lock
    assert rows["prefill[0]"]["state"] == "running" and rows["prefill[0]"]["pid"] != old_prefill
    assert rows["router[0]"]["pid"] == before[next(k for k in before if k.startswith("router[0]"))]
    lineage = [h for h in hazards if h.startswith("restart lineage")]
    if command[1] == "--pair":
        assert rows["decode[0]"]["state"] == "stopped"  # held stopped until the prefills are back
        assert lineage == [], hazards  # no pair runs: nothing to judge, nothing invented
    else:
        assert rows["decode[0]"]["pid"] == before[next(k for k in before if k.startswith("decode[0]"))]
        (mixed,) = lineage
        assert "decode[0]" in mixed and f"unchanged (pid {rows['decode[0]']['pid']})" in mixed, mixed
        assert "prefill[0]" in mixed and "restarted" in mixed and "pdctl restart --pair" in mixed, mixed
    screen = pdctl(["status", "-i", str(inv)], state=st)  # the same hazards on screen
    assert "abandoned deployment lock" in screen.output and "all is well" not in screen.output
    assert ("restart lineage" in screen.output) == (command[1] != "--pair"), screen.output
    assert "unfinished" in pdctl(["history"], state=st).stdout


@pytest.mark.parametrize("kind", ["directory", "fifo"])
@pytest.mark.parametrize("command", [["restart", "--role", "router"], ["deploy"]])
def test_an_audit_log_that_cannot_be_written_refuses_before_anything_is_touched(sleepy, kind, command):
    st = sleepy["state"]
    log = sleepy["tmp"] / "audit-here"
    if kind == "directory":
        log.mkdir()
    else:
        os.mkfifo(log)
    r = pdctl([*command, "-i", str(sleepy["inv"])], state=st, env={"PDCTL_AUDIT_LOG": str(log)}, timeout=30)
    assert r.code == 2, r.output
    assert str(log) in r.stderr and "not a regular file" in r.stderr and "nothing was done" in r.stderr
    assert "Traceback" not in r.output
    assert not list((st / "pdctl").glob("*.pid")) and not list((st / "pdctl").glob("*.json"))  # nothing started
    assert not _lock_dir(st).exists()


def _procs_with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (the role's fake interpreter path), deploy's lint probe
    (`marker -c ...`, gone at once) left out: seeing it and signalling pdctl then interrupted deploy before the
    launch (a flake: "left no process")."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                argv = Path(f"/proc/{d}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            at = next((k for k, a in enumerate(argv) if marker in a), None)
            if at is None:
                continue
            after = argv[at].split(marker, 1)[1].lstrip("'\"")  # `sh -c "MARKER -c ..."` is the probe too
            if argv[at + 1 : at + 2] != ["-c"] and not after.startswith(" -c"):
                out.append(int(d))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_right_after_a_launch_never_leaves_a_running_role_recorded_as_stopped(sleepy, sig):
    """pdctl is signalled the moment prefill's process exists. A `getconf` that takes 1.5 s (a slow host) holds
    pdctl in its /proc probe after the launch, which is where the pidfile used to be written: the window is hit
    every time. The pidfile must already be there, written by the launching shell."""
    st, tmp = sleepy["state"], sleepy["tmp"]
    shims = tmp / "bin"
    shims.mkdir()
    real = subprocess.run(["sh", "-c", "command -v getconf"], capture_output=True, text=True).stdout.strip()
    (shims / "getconf").write_text(f'#!/bin/sh\nsleep 1.5\nexec {real} "$@"\n')
    (shims / "getconf").chmod(0o755)
    marker = str(tmp / "fake-python")
    # no exec: the role's main process keeps the marker; deploy's lint probe (`-c`) fails at once
    Path(marker).write_text('#!/bin/sh\n[ "$1" = -c ] && exit 1\nsleep 120\n')
    env = {**_env(st), "PATH": f"{shims}:{os.environ['PATH']}"}
    p = subprocess.Popen(
        [sys.executable, "-m", "pdctl", "deploy", "-i", str(sleepy["inv"])],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for("prefill's process", lambda: _procs_with(marker) or p.poll() is not None, timeout=30)
        assert p.poll() is None, p.communicate()
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
        assert "Traceback" not in out + err
        if sig == signal.SIGTERM:
            assert p.returncode == 130, err
        running = _procs_with(marker)
        assert running, "the interrupted launch left no process (then nothing is to be recorded)"
        r = pdctl(["status", "--json", "-i", str(sleepy["inv"])], state=st, timeout=60)
        (prefill,) = [x for x in r.json()["roles"] if x["label"].startswith("prefill[0]")]
        assert prefill["state"] == "running", prefill
        # the recorded pid is the role's process (a /proc read that lands mid-exec, or in the launching shell's
        # command substitution, sees other pids holding the marker for a moment: CI once did)
        _wait_for(
            f"pid {prefill['pid']} running the role's command (seen: {running})",
            lambda: prefill["pid"] in _procs_with(marker),
            timeout=10,
        )
        assert json.loads(_prefill_pidfile(st).read_text())["pid"] == prefill["pid"]
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=30)
        for pid in _procs_with(marker):
            try:
                os.killpg(pid, signal.SIGKILL)  # setsid: pid == group, the sleep child included
            except ProcessLookupError:
                pass


def test_a_restart_with_a_role_not_installed_stops_nothing(sleepy):
    """All three roles run (real detached processes under the pidfile manager); router's installed spec is gone.
    The restart refuses before the first stop, naming router and `pdctl deploy`."""
    from pdctl import launch
    from pdctl.inventory import load_inventory
    from pdctl.services.pidfile import PidfileManager
    from pdctl.transport.local import LocalTransport

    st = sleepy["state"]
    inv_path = _inventory(sleepy["tmp"], ready_timeout=1)  # were anything restarted, it would fail fast
    inv = load_inventory(inv_path)
    mgr = PidfileManager(LocalTransport("local"), str(st / "pdctl"))
    for role, i, _ in inv.instances():
        mgr.install(launch.service_spec(inv, role, i, python=str(sleepy["tmp"] / "fake-python")))
        mgr.start(inv.service_name(role, i))
    before = {p.name: json.loads(p.read_text())["pid"] for p in (st / "pdctl").glob("*.pid")}
    assert len(before) == 3
    (st / "pdctl" / f"{inv.service_name('router', 0)}.json").unlink()

    r = pdctl(["restart", "--pair", "--no-verify", "-i", str(inv_path)], state=st, timeout=60)
    assert r.code == 1, r.output
    assert "nothing was stopped" in r.stderr and "router[0]" in r.stderr and "is not installed" in r.stderr
    assert "pdctl deploy" in r.stderr and "Traceback" not in r.output
    after = {p.name: json.loads(p.read_text())["pid"] for p in (st / "pdctl").glob("*.pid")}
    assert after == before
    assert all(mgr.status(inv.service_name(role, i)).active for role, i, _ in inv.instances())
    assert not _lock_dir(st).exists()
    # what the restart warned of before the error is still said, on screen and in the error document
    warned = pdctl(
        ["restart", "--pair", "--no-verify", "--skip-lint", "--json", "-i", str(inv_path)], state=st, timeout=60
    )
    assert warned.code == 1 and "is not installed" in warned.json()["error"]["message"], warned.output
    assert any("lint skipped" in w for w in warned.json()["warnings"]), warned.stdout
    assert "lint skipped" in warned.stderr


@pytest.mark.parametrize("command", [["deploy"], ["restart", "--pair", "--no-verify"]])
def test_the_interrupt_message_lists_each_roles_state_as_the_record_does(sleepy, command):
    from pdctl import launch
    from pdctl.inventory import load_inventory
    from pdctl.services.pidfile import PidfileManager
    from pdctl.transport.local import LocalTransport

    st = sleepy["state"]
    inv = load_inventory(sleepy["inv"])
    mgr = PidfileManager(LocalTransport("local"), str(st / "pdctl"))
    for role, i, _ in inv.instances():  # installed (not running), as a restart needs
        mgr.install(launch.service_spec(inv, role, i, python=str(sleepy["tmp"] / "fake-python")))
    p = sleepy["start"](*command, "-i", str(sleepy["inv"]))
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 130, err
    end = _records(st)[-1]
    assert end["result"] == "interrupted by SIGTERM"
    shown = err[err.index("interrupted by SIGTERM") :]
    assert "state of each role now:" in shown
    for label, state in end["roles"].items():  # the same states on the screen as in the audit record
        assert f"  {label}: {state.split(' (')[0]}" in shown, (label, state, shown)
    assert _state_of(end["roles"], "prefill[0]").startswith("running")
    assert not _lock_dir(st).exists()  # released on the way out, not left for the next run to take over


def test_triage_and_status_during_another_operators_deploy_name_the_lock_it_holds(sleepy):
    """Triage is read-only and takes no lock. During a deploy whose workers are not answering yet it cannot read
    them (exit 3, unknown); it must say that a change is under way, and whose, instead of leaving the operator to
    guess why a running worker is silent."""
    st, inv = sleepy["state"], sleepy["inv"]
    p = sleepy["start"]("deploy", "-i", str(inv))
    r = pdctl(["triage", "--json", "--window", "2", "-i", str(inv)], state=st, timeout=60)
    assert p.poll() is None, "the deploy must still hold the lock while triage runs"
    assert r.code == 3, r.output
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["error"]["exit_code"] == 3
    (said,) = doc["warnings"]
    assert "deployment lock is held by test-operator (deploy" in said and f"pid {p.pid}" in said, said
    assert "deployment lock is held by test-operator" in r.stderr
    status = pdctl(["status", "--json", "-i", str(inv)], state=st)  # status says it too, as a fact, not a fault
    assert status.json()["lock_held_by"].startswith("test-operator (deploy, pid "), status.output
    assert not any("lock" in h for h in status.json()["hazards"])
    screen = pdctl(["status", "-i", str(inv)], state=st)
    assert "deployment lock held by test-operator (deploy" in " ".join(screen.stdout.split()), screen.output
