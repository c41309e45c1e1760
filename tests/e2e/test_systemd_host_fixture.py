"""The systemd test host itself (tests/fixtures/systemd_host.py): a booted container whose PID 1 is systemd, reached
by pdctl's own SSH transport; two of them in network namespaces of the test's own; nothing left on the machine.

pdctl's use of such hosts is in test_systemd_hosts.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import tests.fixtures.systemd_host as fixture
from pdctl.transport.ssh import SshTransport
from tests.fixtures.owner import pidns, process_alive
from tests.fixtures.systemd_host import (
    BUILD_SCRIPT,
    REPO,
    ROOT,
    SystemdHostLeftover,
    can_boot_hosts,
    sweep_stale_hosts,
    systemd_host,
)

pytestmark = [pytest.mark.e2e]


@pytest.fixture(autouse=True)
def _needs_hosts():
    reason = can_boot_hosts()
    if reason:
        pytest.skip(reason)


def _leftovers(tag: str) -> list[str]:
    """What a stopped host could have left: mounts or cgroup directories naming it."""
    mounts = [line for line in Path("/proc/mounts").read_text().splitlines() if tag in line]
    cgroups = [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{tag}")] + [
        str(p) for p in Path("/sys/fs/cgroup").glob(tag)
    ]
    return mounts + cgroups


def test_a_host_runs_its_own_systemd_over_ssh_and_leaves_nothing_behind(tmp_path):
    with systemd_host(tmp_path / "h") as h:
        t = SshTransport("h", h.make_host())
        try:
            res = t.run(
                "cat /proc/1/comm; systemctl is-system-running --wait; hostname; "
                "echo written > /etc/pdctl-volatile-probe",
                timeout=30,
            )
            assert res.ok, res.stderr
            assert res.stdout.split() == ["systemd", "running", h.name]
            # the host's Python and this checkout are there, read-only
            py = t.run(
                f"cd {h.make_host().workdir} && {h.make_host().python} -c 'import engine.launch_server' && "
                "touch engine/x 2>&1 || true",
                timeout=60,
            )
            assert "Read-only file system" in py.stdout, py.stdout + py.stderr
        finally:
            t.close()
        assert h.run(["cat", "/etc/pdctl-volatile-probe"]).stdout.strip() == "written"
        assert h.run(["pgrep", "-c", "getty"]).stdout.strip() == "0"  # the console getty is masked
        pid, tag = h.nspawn_pid, h.name
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert _leftovers(tag) == []
    assert not Path(ROOT, "etc", "pdctl-volatile-probe").exists()  # writes went to the host's overlay


def test_a_failing_test_leaves_nothing_running_either(tmp_path):
    with pytest.raises(RuntimeError, match="the test failed"):
        with systemd_host(tmp_path / "h") as h:
            pid, tag = h.nspawn_pid, h.name
            started = h.run(["systemd-run", "--unit", "pdctl-left-behind", "sleep", "600"])
            assert started.returncode == 0, started.stderr
            sleeper = [
                p
                for p in (h.cgroups[0] / "payload" / "system.slice" / "pdctl-left-behind.service" / "cgroup.procs")
                .read_text()
                .split()
            ]
            assert sleeper  # its host pid, to check it is gone afterwards
            raise RuntimeError("the test failed")
    for p in (pid, *map(int, sleeper)):
        with pytest.raises(ProcessLookupError):
            os.kill(p, 0)
    assert _leftovers(tag) == []


def test_two_hosts_in_namespaces_of_the_test_have_their_own_addresses(tmp_path):
    from tests.fixtures.netns import can_make_namespaces, netns_lab

    if can_make_namespaces():
        pytest.skip(can_make_namespaces())
    with netns_lab(["op", "hosta", "hostb"]) as lab:
        with (
            systemd_host(tmp_path / "a", netns=lab.names["hosta"], address=lab.addresses["hosta"]) as a,
            systemd_host(
                tmp_path / "b",
                netns=lab.names["hostb"],
                address=lab.addresses["hostb"],
                client_key=str(tmp_path / "a" / "client_key"),
            ) as b,
        ):
            seen = {}
            for h in (a, b):
                ssh = [
                    "ssh",
                    "-q",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    f"UserKnownHostsFile={h.ssh.known_hosts}",
                    "-i",
                    h.ssh.key_path,
                    "-p",
                    str(h.ssh.port),
                    f"root@{h.ssh.address}",
                    "hostname; ip -4 -o addr show eth0",
                ]
                res = lab.run("op", ssh)  # from the operator's namespace: no traffic from the root namespace
                assert res.returncode == 0, res.stderr
                seen[h.name] = res.stdout
            assert a.name in seen[a.name] and lab.addresses["hosta"] in seen[a.name]
            assert b.name in seen[b.name] and lab.addresses["hostb"] in seen[b.name]
            tags = [a.name, b.name]
    assert [x for t in tags for x in _leftovers(t)] == []


def test_hosts_of_a_killed_pytest_are_swept_by_the_next_one_and_nothing_else(tmp_path):
    # a stand-in for a pytest that is killed (SIGKILL) while its host runs: the fixture's finally never runs
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from tests.fixtures.systemd_host import systemd_host\n"
            "with systemd_host(sys.argv[1]) as h:\n"
            "    print(h.name, h.nspawn_pid, h.leader, flush=True)\n"
            "    time.sleep(600)\n",
            str(tmp_path / "h"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        tag, nspawn_pid, leader = owner.stdout.readline().split()
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    assert tag.startswith(f"pdctl-sdh-{owner.pid}-")  # its owner is in its name
    assert process_alive(int(nspawn_pid)) and process_alive(int(leader))  # nspawn has a session of its own
    assert _leftovers(tag)
    roots = fixture._cgroup_roots()
    # not to be touched: a host of a live owner (this process) and any name the fixture does not make this way
    live = fixture._owner_tag()
    foreign = [
        "pdctl-sdh-0badc0de",
        f"pdctl-sdh-{owner.pid}-1-{pidns():x}-0badc0de-x",
        f"pdctl-sdh-{owner.pid}-1-{pidns() + 1:x}-0badc0de",
    ]  # dead owner, other pid namespace
    made = [r / n for r in roots for n in (live, *foreign)]
    try:
        for d in made:
            d.mkdir()
        with pytest.warns(SystemdHostLeftover, match=f"swept stale systemd test host {tag}: its pytest"):
            assert tag in sweep_stale_hosts()
        assert all(d.is_dir() for d in made)
    finally:
        for d in made:
            d.rmdir()
    assert not process_alive(int(nspawn_pid)) and not process_alive(int(leader))
    assert _leftovers(tag) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tag not in sweep_stale_hosts()  # once only


def test_removal_runs_when_stopping_fails_and_a_leftover_is_loud(tmp_path, monkeypatch):
    stopped = []

    def stop_that_times_out(proc):  # _stop's second wait timing out
        stopped.append(proc)
        raise subprocess.TimeoutExpired(proc.args, fixture.STOP_TIMEOUT)

    monkeypatch.setattr(fixture, "_stop", stop_that_times_out)
    with pytest.raises(subprocess.TimeoutExpired):
        with systemd_host(tmp_path / "h") as h:
            tag = h.name
    assert stopped[0].wait(timeout=30) == -signal.SIGKILL  # killed by the removal, not by _stop
    assert _leftovers(tag) == []

    real_remove = fixture._remove_cgroup
    monkeypatch.setattr(fixture, "_stop", lambda proc: (proc.kill(), proc.wait(timeout=30)))
    monkeypatch.setattr(
        fixture, "_remove_cgroup", lambda cg: real_remove(cg) or f"{cg} (processes still in them: [4242])"
    )
    with pytest.warns(SystemdHostLeftover, match=r"systemd test host pdctl-sdh-\S+ left behind: .*\[4242\]"):
        with systemd_host(tmp_path / "h2") as h:
            tag = h.name
    assert _leftovers(tag) == []


FAKE_DEBOOTSTRAP = """#!/bin/sh
# stands in for debootstrap (the real one takes ~45 s and the network): records the call, makes a tiny tree
echo "$*" >> "$PDCTL_FAKE_CALLS"
sleep 1
t="$4"
mkdir -p "$t/usr/lib/systemd" "$t/usr/sbin" "$t/etc/ssh" "$t/etc/systemd/system" \
    "$t/var/cache/apt/archives" "$t/var/lib/apt/lists"
printf '#!/bin/sh\n' > "$t/usr/lib/systemd/systemd"; cp "$t/usr/lib/systemd/systemd" "$t/usr/sbin/sshd"
chmod +x "$t/usr/lib/systemd/systemd" "$t/usr/sbin/sshd"
echo key > "$t/etc/ssh/ssh_host_ed25519_key"; echo debian > "$t/etc/hostname"
"""


def test_the_root_is_built_once_under_the_lock_and_rebuilt_when_broken(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "debootstrap").write_text(FAKE_DEBOOTSTRAP)
    (bin_dir / "debootstrap").chmod(0o755)
    calls, root = tmp_path / "calls", tmp_path / "root"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PDCTL_TEST_ROOT": str(root),
        "PDCTL_FAKE_CALLS": str(calls),
    }
    build = ["bash", str(BUILD_SCRIPT)]
    check = lambda: subprocess.run([*build, "--check"], env=env, capture_output=True, timeout=30).returncode  # noqa: E731

    assert check() == 1  # nothing there yet
    two = [subprocess.Popen(build, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    assert [p.wait(timeout=60) for p in two] == [0, 0]
    assert len(calls.read_text().splitlines()) == 1  # the second waited for the first, then used it
    assert check() == 0
    assert not list((root / "etc" / "ssh").glob("ssh_host_*"))  # no host key shared through the root
    assert os.readlink(root / "etc" / "systemd" / "system" / "console-getty.service") == "/dev/null"

    (root / "usr" / "sbin" / "sshd").unlink()  # broken: rebuilt from nothing
    assert check() == 1
    assert subprocess.run(build, env=env, capture_output=True, timeout=60).returncode == 0
    assert len(calls.read_text().splitlines()) == 2 and check() == 0
    (root / ".pdctl-test-root-stamp").write_text("pdctl-test-root v0 an older recipe\n")
    assert check() == 1  # another recipe's root is not this one
