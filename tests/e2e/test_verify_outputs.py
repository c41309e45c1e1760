"""`pdctl verify outputs` against a real bundled-engine 1P1D behind the router (free ports), its decode armed with
the overlap-corruption drill: with SGLang's switch on (its default) the seed's corruption is found at concurrency 30
and named with its fix, not at concurrency 1; with the switch off (SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0, deployed
as the seed deployed its fix) every answer agrees; with the fake transfer backend the decode computes every prompt
itself, every answer is right and the check fails the deployment as not PD. `pdctl triage --outputs` names both."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import deployed, pdctl, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

SWITCH = "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"


def _inventory(decode_env: dict) -> dict:
    worker = {"host": "local", "ready_timeout": 180}
    return {
        "name": "outputs",
        "engine": "bundled",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
        "roles": {
            "prefill": [{**worker, "port": free_port(), "bootstrap_port": free_port()}],
            "decode": [{**worker, "port": free_port(), "env": decode_env}],
            "router": [
                {
                    **worker,
                    "port": free_port(),
                    "args": {"--prometheus-port": free_port(), "--health-check-interval-secs": 2},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def armed(tmp_path_factory):
    yield from deployed(tmp_path_factory, "outputs", _inventory({"PDCTL_DRILLS": "overlap-corruption"}), timeout=400)


def _outputs(dep, *args: str):
    return pdctl(["verify", "outputs", "-i", str(dep["inv"]), *args], state=dep["state"], timeout=300)


def _redeploy(dep, data: dict) -> None:
    write_inventory(dep["inv"], data)
    r = pdctl(["deploy", "-i", str(dep["inv"]), "--no-verify", "--json"], state=dep["state"], timeout=400)
    assert r.code == 0, r.output


def test_the_drill_corrupts_at_concurrency_30_only_and_the_switch_off_fixes_it(armed):
    _redeploy(armed, armed["data"])  # the drill armed, the switch at its default (on), whatever ran before
    r = _outputs(armed, "--json")
    assert r.code == 1, r.output
    doc = r.json()
    corrupt = [s for s in doc["sessions"] if s["status"] == "corrupt"]
    assert len(doc["sessions"]) == 30 and corrupt, doc["verdict"]
    assert doc["verdict"]["corruption_rate"] == pytest.approx(len(corrupt) / 30)
    assert all(s["parting"]["at"] < 8 and s["parting"]["unit"] == "token" for s in corrupt)
    assert f"{SWITCH}=0" in doc["next_steps"][0]
    assert doc["pd_use"]["status"] == "pass" and [p["status"] for p in doc["pairs"]] == ["pass"]

    screen = pdctl(  # the verdict and the fix first and last, at 80 columns
        ["verify", "outputs", "-i", str(armed["inv"])], state=armed["state"], env={"COLUMNS": "80"}, timeout=300
    )
    lines = screen.stdout.splitlines()
    assert screen.code == 1
    assert lines[0].startswith("verify outputs: FAIL (") and "sessions corrupt at concurrency 30" in lines[0]
    assert lines[1] == lines[-1] == f"next: {SWITCH}=0 on the decodes, then pdctl deploy"
    assert lines[-2] == lines[0]
    assert len(lines) <= 24, "\n".join(lines)

    tri = pdctl(["triage", "--outputs", "--window", "2", "-i", str(armed["inv"]), "--json"], state=armed["state"])
    assert tri.code == 1, tri.output
    (finding,) = [f for f in tri.json()["findings"] if f["kind"] == "outputs-corruption"]
    assert any(SWITCH in line and "decode[0]" in line for line in finding["observed"]), finding
    assert finding["next_step"] == f"{SWITCH}=0 on the decodes, then pdctl deploy"

    one = _outputs(armed, "--sessions", "1", "--json")
    assert one.code == 0, one.output
    assert one.json()["sessions"][0]["status"] == "pass"

    _redeploy(armed, {**armed["data"], "roles": _with_env(armed)})
    fixed = _outputs(armed, "--json")
    assert fixed.code == 0, fixed.output
    doc = fixed.json()
    assert {s["status"] for s in doc["sessions"]} == {"pass"} and doc["verdict"]["corruption_rate"] == 0
    assert doc["pd_use"]["status"] == "pass" and doc["pd_use"]["transfers"] >= doc["pd_use"]["answered"] == 60
    # the same check as final-health's optional layer: its rows
    fh = pdctl(
        ["verify", "final-health", "-i", str(armed["inv"]), "--layer", "outputs", "--json"],
        state=armed["state"],
        timeout=300,
    )
    assert fh.code == 0, fh.output
    rows = {(c["target"], c["name"]): c["status"] for c in fh.json()["layers"]["outputs"]}
    assert rows == {
        ("sessions", "30 sessions at concurrency 30"): "pass",
        ("prefill[0] -> decode[0]", "greedy tokens"): "pass",
        ("prefills", "PD used"): "pass",
    }


def _with_env(dep) -> dict:
    """The deployed roles (same ports) with the decode's switch off."""
    roles = dep["data"]["roles"]
    decode = [{**d, "env": {**d["env"], SWITCH: "0"}} for d in roles["decode"]]
    return {**roles, "decode": decode}


def test_a_pd_deployment_that_is_not_pd_fails(armed):
    data = {**armed["data"], "roles": _with_env(armed), "transfer_backend": "fake"}
    _redeploy(armed, data)
    r = _outputs(armed, "--sessions", "4", "--json")
    assert r.code == 1, r.output
    doc = r.json()
    assert {s["status"] for s in doc["sessions"]} == {"pass"}  # every answer right: the decode prefilled itself
    assert doc["pd_use"]["status"] == "failed" and doc["pd_use"]["transfers"] == 0
    assert doc["pd_use"]["answered"] == 8 and "quietly is not PD" in doc["pd_use"]["found"]
    assert "fake" in doc["next_steps"][0]
    tri = pdctl(["triage", "--outputs", "--window", "2", "-i", str(armed["inv"]), "--json"], state=armed["state"])
    assert tri.code == 1, tri.output
    assert [f["kind"] for f in tri.json()["findings"]] == ["outputs-not-pd"]
