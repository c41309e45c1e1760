"""pdctl's systemd service manager against a live systemd, over SSH: a systemd test host (its own systemd as PID 1,
tests/fixtures/systemd_host.py) running the seed's units (sglang-dsv4-prefill/-decode/-router) of the bundled engine.

deploy writes the units and starts prefill -> decode -> router gated on readiness; final-health reads each unit's
MainPID, cmdline and environ in one command; restart --pair restarts in order (the units' monotonic start
timestamps say so); a decode killed with SIGKILL comes back by systemd's Restart=on-failure under the running
prefill, and the lineage layer fails naming the unit and its NRestarts until restart --pair; down stops them.
"""

from __future__ import annotations

import time

import pytest

from pdctl.routers import DEFAULT_ROUTER_KIND, router_kind

from pdctl.services.systemd import SHOW_PROPERTIES, SystemdManager, parse_systemctl_show
from pdctl.transport.ssh import SshTransport
from tests.e2e.helpers import layer, local_inventory, pdctl, write_inventory
from tests.fixtures.net import free_port
from tests.fixtures.systemd_host import can_boot_hosts, systemd_host

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

UNITS = {"prefill": "sglang-dsv4-prefill", "decode": "sglang-dsv4-decode", "router": "sglang-dsv4-router"}
ORDER = ("prefill", "decode", "router")


def show_unit(h, unit: str) -> dict[str, str]:
    """`systemctl show` of `unit` (the properties pdctl reads), asked inside host `h` through the test's own channel
    (nsenter), parsed by pdctl's parser."""
    props = [a for p in SHOW_PROPERTIES for a in ("-p", p)]
    res = h.run(["systemctl", "show", f"{unit}.service", *props])
    assert res.returncode == 0, res.stderr
    return parse_systemctl_show(res.stdout)


def started_monotonic(units: dict[str, tuple]) -> dict[str, int]:
    """role -> ExecMainStartTimestampMonotonic of its unit, for `units` role -> (host, unit). Hosts on this machine
    share its kernel, so the values compare across hosts too."""
    return {role: int(show_unit(h, unit)["ExecMainStartTimestampMonotonic"]) for role, (h, unit) in units.items()}


def _show(h, role: str) -> dict[str, str]:
    return show_unit(h, UNITS[role])


def _started_monotonic(h) -> dict[str, int]:
    return started_monotonic({role: (h, UNITS[role]) for role in ORDER})


def _wait(what: str, ok, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ok()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not {what} within {timeout:g}s")


@pytest.fixture(scope="module")
def seed_host(tmp_path_factory):
    """One systemd host with the seed-like deployment on it (deployed by the first test, down in the last)."""
    reason = can_boot_hosts()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("systemd-seed")
    with systemd_host(tmp / "gpu1") as h:
        ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
        inv = local_inventory(
            "dsv4",
            ports,
            host=h.inventory_host(http="tunnel"),
            decode_args={"--disable-overlap-schedule": True},
            decode_env={"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0"},
        )
        for role, unit in UNITS.items():
            inv["roles"][role][0]["service"] = unit
            inv["roles"][role][0]["ready_timeout"] = 60
        path = write_inventory(tmp / "inv.yaml", inv)
        try:
            yield {"host": h, "inv": str(path), "state": tmp}
        finally:
            pdctl(["down", "-i", str(path)], state=tmp, timeout=120)


def _pdctl(seed_host, *args: str, timeout: float = 120):
    return pdctl([*args, "-i", seed_host["inv"], "--json"], state=seed_host["state"], timeout=timeout)


def _all_pass(run, what: str) -> dict:
    assert run.code == 0, f"{what}: exit {run.code}\n{run.output[-3000:]}"
    report = run.json()
    report = report.get("final_health", report)
    assert report["ok"], report
    return report


def test_deploy_writes_units_and_final_health_reads_them_live(seed_host):
    h = seed_host["host"]
    report = _all_pass(_pdctl(seed_host, "deploy"), "deploy")
    for role in ORDER:
        show = _show(h, role)
        assert show["ActiveState"] == "active" and show["FragmentPath"] == f"/etc/systemd/system/{UNITS[role]}.service"
        # the unit as written, checked by the host's own systemd
        verify = h.run(["systemd-analyze", "verify", show["FragmentPath"]])
        assert verify.returncode == 0 and UNITS[role] not in verify.stdout + verify.stderr, verify.stderr
    started = _started_monotonic(h)
    assert started["prefill"] < started["decode"] < started["router"]  # gated on readiness, in order
    flags = layer(report, "flags")
    assert any(r["name"] == "env:SGLANG_OPT_USE_MULTI_STREAM_OVERLAP" and r["status"] == "pass" for r in flags), flags
    rows = [r for r in layer(report, "lineage") if r["name"] == "systemd restarts"]
    assert {r["observed"] for r in rows} == {f"NRestarts=0 on {u}.service" for u in UNITS.values()}


def test_observe_reads_every_unit_and_its_process_in_one_command(seed_host):
    h = seed_host["host"]
    t = SshTransport("gpu1", h.make_host())
    runs = []
    real_run = t.run
    t.run = lambda cmd, **kw: (runs.append(cmd), real_run(cmd, **kw))[1]
    try:
        # "-bogus": a name systemctl itself refuses (an option to it), so its show fails on the host
        seen = SystemdManager(t).observe([*UNITS.values(), "pdctl-nope", "-bogus"])
    finally:
        t.close()
    assert len(runs) == 1
    for role, unit in UNITS.items():
        st, info = seen[unit]
        pid = int(_show(h, role)["MainPID"])
        assert st.active and st.main_pid == pid and st.restarts == 0
        # MainPID is a pid inside the host's own pid namespace: its /proc was read there, over SSH
        assert info is not None and info.pid == pid
        title = router_kind(DEFAULT_ROUTER_KIND).title  # the router sets its title
        assert info.argv[0] == (h.make_host().python if role != "router" else title)
        host_pids = (h.cgroups[0] / "payload" / "system.slice" / f"{unit}.service" / "cgroup.procs").read_text()
        assert str(pid) not in host_pids.split()  # the same process has another pid on the machine
        assert abs(st.started_at - info.start_time) < 1e-6
    assert seen[UNITS["decode"]][1].env["SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"] == "0"
    st, info = seen["pdctl-nope"]
    assert not st.active and info is None and "LoadState=not-found" in st.detail
    st, info = seen["-bogus"]
    assert not st.active and info is None and "systemctl show of -bogus.service failed (exit 1)" in st.detail


def test_restart_pair_restarts_in_order_then_final_health_passes(seed_host):
    h = seed_host["host"]
    before = _started_monotonic(h)
    pair = _pdctl(seed_host, "restart", "--pair")
    assert pair.code == 0, pair.output[-3000:]
    after = _started_monotonic(h)
    assert all(after[r] > before[r] for r in ORDER)
    assert after["prefill"] < after["decode"] < after["router"]
    _all_pass(_pdctl(seed_host, "verify", "final-health"), "final-health after restart --pair")


def test_a_decode_restarted_by_systemd_fails_lineage_naming_unit_and_count(seed_host):
    h = seed_host["host"]
    prefill_pid, decode_pid = _show(h, "prefill")["MainPID"], _show(h, "decode")["MainPID"]
    assert h.run(["kill", "-KILL", decode_pid]).returncode == 0
    _wait(
        "restarted by systemd",
        lambda: (
            (s := _show(h, "decode"))["ActiveState"] == "active"
            and s["NRestarts"] == "1"
            and s["MainPID"] != decode_pid
        ),
    )
    assert _show(h, "prefill")["MainPID"] == prefill_pid  # the prefill ran on

    fh = _pdctl(seed_host, "verify", "final-health", "--layer", "lineage")
    assert fh.code == 1, fh.output[-3000:]
    rows = [r for r in layer(fh.json(), "lineage") if r["name"] == "systemd restarts" and r["status"] == "fail"]
    assert len(rows) == 1 and rows[0]["target"].startswith("decode"), layer(fh.json(), "lineage")
    assert "NRestarts=1 on sglang-dsv4-decode.service" in rows[0]["observed"]
    assert "prefill" in rows[0]["detail"] and "restart --pair" in rows[0]["detail"]

    status = _pdctl(seed_host, "status").json()
    roles = {r["role"]: r for r in status["roles"]}
    assert roles["decode"]["restarts"] == 1 and roles["prefill"]["restarts"] == 0
    assert any("NRestarts=1 on sglang-dsv4-decode.service" in h for h in status["hazards"]), status["hazards"]

    tri = _pdctl(seed_host, "triage", "--window", "2", "--interval", "1")
    assert tri.code == 1, tri.output[-3000:]
    named = [
        f
        for f in tri.json()["findings"]
        if any("NRestarts=1 on sglang-dsv4-decode.service" in o for o in f["observed"])
    ]
    assert named and named[0]["kind"] in ("lineage", "degraded-bootstrap"), tri.json()["findings"]

    assert _pdctl(seed_host, "restart", "--pair").code == 0
    again = _all_pass(_pdctl(seed_host, "verify", "final-health"), "final-health after clearing it")
    assert all(r["status"] == "pass" for r in layer(again, "lineage"))
    assert _show(h, "decode")["NRestarts"] == "0"  # a manual restart resets the count


def test_restart_policy_no_leaves_a_killed_decode_down_and_loud(seed_host):
    import yaml

    h, path = seed_host["host"], seed_host["inv"]
    inv = yaml.safe_load(open(path).read())
    inv["hosts"]["local"]["systemd_restart"] = "no"
    no_restart = write_inventory(seed_host["state"] / "inv-no-restart.yaml", inv)
    try:
        dep = pdctl(["deploy", "-i", str(no_restart), "--json"], state=seed_host["state"], timeout=120)
        _all_pass(dep, "deploy with systemd_restart: no")
        unit = h.run(["cat", f"/etc/systemd/system/{UNITS['decode']}.service"]).stdout
        assert "Restart=no" in unit.splitlines()
        assert h.run(["systemd-analyze", "verify", f"/etc/systemd/system/{UNITS['decode']}.service"]).returncode == 0
        assert h.run(["kill", "-KILL", _show(h, "decode")["MainPID"]]).returncode == 0
        _wait("failed", lambda: _show(h, "decode")["ActiveState"] == "failed")
        # (not the e2e layer: its probe would wait its full timeout for the dead decode)
        fh = pdctl(
            ["verify", "final-health", "-i", str(no_restart), "--json", "--layer", "health,lineage"],
            state=seed_host["state"],
        )
        assert fh.code == 1
        health = [r for r in layer(fh.json(), "health") if r["target"].startswith("decode")]
        assert health and health[0]["status"] == "fail", layer(fh.json(), "health")
        assert not any(
            r["name"] == "systemd restarts" and r["target"].startswith("decode") for r in layer(fh.json(), "lineage")
        )  # a unit that is down has no restart row
        assert _show(h, "decode")["NRestarts"] == "0"
    finally:  # the module's inventory again: Restart=on-failure, co-restarted
        _all_pass(_pdctl(seed_host, "deploy"), "deploy back to Restart=on-failure")


def test_down_stops_every_unit(seed_host):
    h = seed_host["host"]
    down = _pdctl(seed_host, "down")
    assert down.code == 0, down.output[-3000:]
    for role in ORDER:
        show = _show(h, role)
        assert show["ActiveState"] == "inactive" and show["MainPID"] == "0", show
    # --purge removes each unit file and says so; a second one stops units that are no longer loaded (systemctl
    # exit 5: that failed `down`) and has nothing to remove, which it says instead
    first = _pdctl(seed_host, "down", "--purge")
    assert first.code == 0, first.output[-3000:]
    purged = [s["step"] for s in first.json()["steps"] if s["step"].startswith("purge ")]
    assert len(purged) == 3 and all(f"/etc/systemd/system/{UNITS[r]}.service" in " ".join(purged) for r in ORDER)
    assert all(h.run(["test", "-e", f"/etc/systemd/system/{UNITS[r]}.service"]).returncode == 1 for r in ORDER)
    again = _pdctl(seed_host, "down", "--purge")
    assert again.code == 0, again.output[-3000:]
    purged = [s["step"] for s in again.json()["steps"] if s["step"].startswith("purge ")]
    assert len(purged) == 3 and all("(no unit file" in step for step in purged), purged
