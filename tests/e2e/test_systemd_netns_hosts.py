"""systemd test hosts with addresses of their own (network namespaces the test makes, tests/fixtures/netns.py), pdctl
running in the operator's namespace `op`:

- the seed's production inventory (examples/seed-production.yaml, engine sglang) on `gpu1`, changed only in how to
  reach the host: the same units (sglang-dsv4-*), the same `python -m sglang.launch_server` command lines, the same
  ports (30000/30002/30001/8998, free inside gpu1's namespace) and checks; behind SGLang's entry point runs the
  bundled engine (tests/fixtures/sglang_stand_in.py);
- prefill on `hosta`, decode and router on `hostb`, each host its own systemd, the KV crossing the veth.

Flow on each: deploy -> final-health -> restart --pair -> final-health -> down. Everything is removed afterwards.

What the seed's lint gate checks there: SGLang's parser (`sglang.srt.server_args`) is not on the host (the stand-in
has only `sglang.launch_server`), so the prefill's and decode's command lines and env are NOT linted (two
`lint-unavailable` findings, which do not block deploy or restart); the router's is, by the real sglang-router.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from tests.e2e.helpers import REPO, pdctl, write_inventory
from tests.e2e.test_systemd_hosts import show_unit, started_monotonic
from tests.fixtures.netns import can_make_namespaces, netns_lab
from tests.fixtures.sglang_stand_in import install_sglang_stand_in
from tests.fixtures.systemd_host import can_boot_hosts, systemd_host

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

SEED = REPO / "examples" / "seed-production.yaml"
LAYERS = ("health", "e2e", "transfer", "flags", "lineage")


@pytest.fixture(autouse=True)
def _needs_hosts_and_namespaces():
    reason = can_boot_hosts() or can_make_namespaces()
    if reason:
        pytest.skip(reason)


def _reach(h) -> dict:
    """The connection fields of a test host: the only part of an inventory that differs from production."""
    return {
        "address": h.ssh.address,
        "port": h.ssh.port,
        "key": h.ssh.key_path,
        "known_hosts": h.ssh.known_hosts,
        "ssh_config": "none",
        "connect_timeout": 5,
    }


def _passes(run, what: str) -> dict:
    assert run.code == 0, f"{what}: exit {run.code}\n{run.output[-3000:]}"
    report = run.json()
    report = report.get("final_health", report)
    assert report["ok"], f"{what}: {report}"
    for name in LAYERS:
        rows = report["layers"].get(name)
        assert rows and {r["status"] for r in rows} == {"pass"}, f"{what}: layer {name}: {rows}"
    return report


def _flow(inv_path, state, op: str, check=lambda stage: None) -> None:
    """The flow; `check(stage)` runs after "deploy", "restart --pair" and "down"."""
    run = dict(state=state, netns=op, timeout=150)
    args = ["-i", str(inv_path), "--json"]
    try:
        _passes(pdctl(["deploy", *args], **run), "deploy")
        check("deploy")
        pair = pdctl(["restart", "--pair", *args], **run)
        assert pair.code == 0, pair.output[-3000:]
        check("restart --pair")
        _passes(pdctl(["verify", "final-health", *args], **run), "final-health after restart --pair")
        down = pdctl(["down", *args], **run)
        assert down.code == 0, down.output[-3000:]
        check("down")
    finally:
        pdctl(["down", "-i", str(inv_path)], **run)


def _units(h) -> dict[str, str]:
    out = h.run(
        [
            "systemctl",
            "show",
            "--type=service",
            "-p",
            "Id",
            "-p",
            "ActiveState",
            "-p",
            "ExecStart",
            "sglang-dsv4-prefill",
            "sglang-dsv4-decode",
            "sglang-dsv4-router",
        ]
    ).stdout
    return {block.split("Id=")[1].split()[0]: block for block in out.split("\n\n") if "Id=" in block}


def _lint_gates(state) -> dict[str, dict]:
    """action -> the lint gate's outcome in its final audit record (what deploy/restart's gate concluded)."""
    records = [json.loads(line) for line in (state / "pdctl" / "audit.jsonl").read_text().splitlines()]
    return {r["action"]: r["lint"] for r in records if r.get("result") != "started" and "lint" in r}


def test_the_seed_production_inventory_deploys_onto_a_systemd_host(tmp_path):
    seed = yaml.safe_load(SEED.read_text())
    host = seed["hosts"]["gpu1"]
    with (
        netns_lab(["op", "gpu1"]) as lab,
        systemd_host(tmp_path / "gpu1", netns=lab.names["gpu1"], address=lab.addresses["gpu1"]) as h,
    ):
        install_sglang_stand_in(h, host["python"], seed["model_path"])
        seed["hosts"]["gpu1"] = {**host, **_reach(h)}
        inv = write_inventory(tmp_path / "seed.yaml", seed)
        state = tmp_path / "operator"
        state.mkdir()
        run = dict(state=state, netns=lab.names["op"], timeout=150)
        try:
            # what the gate will see: the workers' parser is missing, the router's is there
            lint = pdctl(["lint", "-i", str(inv), "--json"], **run)
            assert lint.code == 1, lint.output[-3000:]
            report = lint.json()
            assert not report["ok"] and report["blocking"] == 0 and not report["skipped"]
            roles = {r["role"]: r for r in report["roles"]}
            assert {k: (r["kind"], r["parsed"]) for k, r in roles.items()} == {
                "prefill": ("sglang", False),
                "decode": ("sglang", False),
                "router": ("sglang-router", True),
            }
            assert roles["router"]["version"]  # the real sglang-router parsed it
            findings = {(f["rule"], f["role"].split("[")[0], f["blocks"]) for f in report["findings"]}
            assert findings == {("lint-unavailable", "prefill", False), ("lint-unavailable", "decode", False)}
            assert all("No module named 'sglang.srt'" in f["message"] for f in report["findings"])

            deployed = pdctl(["deploy", "-i", str(inv), "--json"], **run)
            _passes(deployed, "deploy")
            # the deploy gate asked, was not satisfied (2 findings: the workers were not linted) and did not block;
            # it says so beside the audit log: a warning naming each role left unchecked and why
            assert _lint_gates(state)["deploy"] == {"skipped": False, "ok": False, "findings": 2, "unchecked": 2}
            unchecked = [w for w in deployed.json()["warnings"] if w.startswith("lint could not check")]
            assert [w.split()[4].split("[")[0] for w in unchecked] == ["prefill", "decode"], unchecked
            assert all("No module named 'sglang.srt'" in w for w in unchecked), unchecked
            units = _units(h)
            for role in ("prefill", "decode"):
                block = units[f"sglang-dsv4-{role}.service"]
                assert "ActiveState=active" in block
                assert f"argv[]={host['python']} -m sglang.launch_server --model-path {seed['model_path']}" in block
            assert "--cuda-graph-max-bs-decode 96" in units["sglang-dsv4-decode.service"]
            assert "-m sglang_router.launch_router --pd-disaggregation" in units["sglang-dsv4-router.service"]
            pair = pdctl(["restart", "--pair", "-i", str(inv), "--json"], **run)
            assert pair.code == 0, pair.output[-3000:]
            assert _lint_gates(state)["restart --pair"] == {
                "skipped": False,
                "ok": False,
                "findings": 2,
                "unchecked": 2,
            }  # the same
            _passes(pdctl(["verify", "final-health", "-i", str(inv), "--json"], **run), "final-health")
            assert pdctl(["down", "-i", str(inv)], **run).code == 0
            assert all("ActiveState=inactive" in b for b in _units(h).values())
        finally:
            pdctl(["down", "-i", str(inv)], **run)


def _bundled_host(h) -> dict:
    return {
        "transport": "ssh",
        "user": "root",
        "http": "direct",
        "service_manager": "systemd",
        "python": sys.executable,
        "workdir": str(REPO),
        "internal_address": h.ssh.address,
        **_reach(h),
    }


def test_prefill_and_decode_on_two_systemd_hosts(tmp_path):
    # UCX would move KV by shared memory between namespaces of one kernel; tcp keeps it on the veth
    ucx = {"UCX_TLS": "tcp"}
    with (
        netns_lab(["op", "hosta", "hostb"]) as lab,
        systemd_host(tmp_path / "a", netns=lab.names["hosta"], address=lab.addresses["hosta"]) as a,
        systemd_host(
            tmp_path / "b", netns=lab.names["hostb"], address=lab.addresses["hostb"], client_key=a.ssh.key_path
        ) as b,
    ):
        inv = write_inventory(
            tmp_path / "two.yaml",
            {
                "name": "twohosts",
                "engine": "bundled",
                "hosts": {"hosta": _bundled_host(a), "hostb": _bundled_host(b)},
                "roles": {
                    "prefill": [
                        {
                            "host": "hosta",
                            "port": 30000,
                            "listen_host": "0.0.0.0",
                            "bootstrap_port": 8998,
                            "ready_timeout": 60,
                            "env": ucx,
                        }
                    ],
                    "decode": [
                        {
                            "host": "hostb",
                            "port": 30002,
                            "listen_host": "0.0.0.0",
                            "ready_timeout": 60,
                            "env": ucx,
                            "args": {"--disable-overlap-schedule": True},
                        }
                    ],
                    "router": [
                        {
                            "host": "hostb",
                            "port": 30001,
                            "listen_host": "0.0.0.0",
                            "ready_timeout": 60,
                            "args": {"--health-check-interval-secs": 2},
                        }
                    ],
                },
                "final_health": {"probe": {"timeout": 20}},
            },
        )
        state = tmp_path / "operator"
        state.mkdir()
        units = {
            "prefill": (a, "pdctl-twohosts-prefill-0"),
            "decode": (b, "pdctl-twohosts-decode-0"),
            "router": (b, "pdctl-twohosts-router-0"),
        }
        starts = []

        def check(stage: str) -> None:
            if stage == "down":
                for role, (h, unit) in units.items():
                    show = show_unit(h, unit)
                    assert show["ActiveState"] == "inactive" and show["MainPID"] == "0", (role, show)
                return
            # one kernel under both hosts: their monotonic clocks are the same clock
            started = started_monotonic(units)
            assert started["prefill"] < started["decode"] < started["router"], (stage, started)
            if starts:
                assert all(started[r] > starts[-1][r] for r in units), (stage, starts[-1], started)
            starts.append(started)

        _flow(inv, state, lab.names["op"], check)
        assert len(starts) == 2
        assert "pdctl-twohosts-prefill-0.service" in a.run(["systemctl", "list-unit-files", "pdctl-*"]).stdout
        assert "pdctl-twohosts-decode-0.service" in b.run(["systemctl", "list-unit-files", "pdctl-*"]).stdout
