"""`pdctl lint` answered by the real parsers: sglang 0.5.23 in its venv (scripts/install.sh), the real
sglang-router 0.3.2, the bundled engine; the seed's production inventory pointed at this machine (local
transport) and at the test sshd (SSH, HTTP tunnelled), each lint one `pdctl` process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.e2e.helpers import REPO, pdctl, write_inventory
from tests.fixtures.sglang_venv import sglang_python

pytestmark = [pytest.mark.e2e]

SEED = Path(REPO) / "examples" / "seed-production.yaml"
CANDIDATES = ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]


def seed_on(host: dict) -> dict:
    data = yaml.safe_load(SEED.read_text())
    data["hosts"]["gpu1"] = host
    return data


def broken(data: dict) -> dict:
    """The seed as its production ran it, plus the mistakes lint exists for."""
    dec = data["roles"]["decode"][0]
    del dec["args"]["--cuda-graph-max-bs-decode"]
    dec["args"]["--cuda-graph-max-bs"] = 96  # the seed's own flag
    dec["env"]["SGLANG_OPT_USE_MULTI_STREAM_OVERLAPP"] = dec["env"].pop("SGLANG_OPT_USE_MULTI_STREAM_OVERLAP")
    dec["env"]["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"] = "100000"
    data["roles"]["prefill"][0]["env"] = {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "0"}
    data["roles"]["router"][0]["args"]["--no-such-router-flag"] = True
    return data


def lint(tmp: Path, name: str, data: dict, *args: str) -> tuple[int, dict]:
    path = write_inventory(tmp / f"{name}.yaml", data)
    (tmp / "state").mkdir(exist_ok=True)
    run = pdctl(["lint", "-i", str(path), "--json", *args], state=tmp / "state", timeout=180)
    doc = json.loads(run.stdout)  # one document, whatever the outcome
    return run.code, doc


def by_rule(doc: dict, rule: str) -> list[dict]:
    return [f for f in doc["findings"] if f["rule"] == rule]


@pytest.fixture(scope="module")
def local_host():
    return {"transport": "local", "service_manager": "pidfile", "python": sglang_python()}


@pytest.fixture(scope="module")
def ssh_seed_host(sshd):
    return {
        "transport": "ssh",
        "address": sshd.address,
        "port": sshd.port,
        "user": sshd.user,
        "key": sshd.key_path,
        "known_hosts": sshd.known_hosts,
        "ssh_config": "none",
        "http": "tunnel",
        "service_manager": "pidfile",
        "python": sglang_python(),
        "connect_timeout": 5,
    }


@pytest.fixture(scope="module", params=["local", "ssh"])
def host(request, local_host):
    return local_host if request.param == "local" else request.getfixturevalue("ssh_seed_host")


@pytest.fixture(scope="module")
def clean(host, tmp_path_factory):
    return lint(tmp_path_factory.mktemp("lint-clean"), "seed", seed_on(host))


@pytest.fixture(scope="module")
def mistakes(host, tmp_path_factory):
    return lint(tmp_path_factory.mktemp("lint-broken"), "broken", broken(seed_on(host)))


def test_the_seed_passes_with_its_patched_builds_name_shown_as_site_specific(clean):
    code, doc = clean
    assert code == 0, doc
    assert doc["ok"] and doc["blocking"] == 0
    assert {r["version"] for r in doc["roles"] if r["role"] != "router"} == {"0.5.23"}
    assert [r["version"] for r in doc["roles"] if r["role"] == "router"] == ["0.3.2"]
    assert all(r["parsed"] for r in doc["roles"])
    site = by_rule(doc, "env-site-specific")
    assert [f["subject"] for f in site] == ["SGLANG_SM120_MMA_TARGET_CTAS"] and "patched" in site[0]["message"]
    assert {f["severity"] for f in doc["findings"]} <= {"note"}


def test_the_seeds_original_flag_is_ambiguous_in_0_5_23(mistakes):
    code, doc = mistakes
    assert code == 1 and not doc["ok"]
    amb = by_rule(doc, "flag-ambiguous")
    assert len(amb) == 1 and amb[0]["role"].startswith("decode[0]")
    assert amb[0]["subject"] == "--cuda-graph-max-bs" and amb[0]["blocks"]
    assert amb[0]["data"]["candidates"] == CANDIDATES and amb[0]["version"] == "0.5.23"
    assert all(c in amb[0]["message"] for c in CANDIDATES) and "0.5.23" in amb[0]["message"]
    assert "ambiguous option" in amb[0]["data"]["parser_says"]  # the real parser's own words


def test_an_env_name_one_letter_off_is_caught_with_the_intended_name(mistakes):
    _code, doc = mistakes
    unknown = by_rule(doc, "env-unknown")
    assert [f["subject"] for f in unknown] == ["SGLANG_OPT_USE_MULTI_STREAM_OVERLAPP"]
    assert unknown[0]["data"]["suggestions"][0] == "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"


def test_the_safety_nets_fire(mistakes):
    _code, doc = mistakes
    wait = by_rule(doc, "waiting-timeout")
    assert [f["subject"] for f in wait] == ["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"]
    assert wait[0]["data"]["value"] == 100000 and wait[0]["doc"] == "docs/lint.md#waiting-timeout"
    health = by_rule(doc, "health-generation-off")
    assert len(health) == 1 and health[0]["role"].startswith("prefill[0]")


def test_the_routers_real_parser_rejects_an_unknown_flag(mistakes):
    _code, doc = mistakes
    bad = [f for f in by_rule(doc, "flag-unknown") if f["role"].startswith("router[0]")]
    assert [f["subject"] for f in bad] == ["--no-such-router-flag"] and bad[0]["version"] == "0.3.2"
    assert "unrecognized arguments" in bad[0]["data"]["parser_says"]


def test_the_bundled_engine_answers_from_its_own_parser_and_registry(tmp_path):
    from tests.e2e.helpers import local_inventory
    from tests.fixtures.net import free_port

    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        "lintb",
        ports,
        decode_args={"--cuda-graph-max-bs": 96},
        decode_env={"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0", "SGLANG_HOST_IPP": "10.0.0.2"},
    )
    code, doc = lint(tmp_path, "bundled", inv)
    assert code == 1
    amb = by_rule(doc, "flag-ambiguous")
    assert len(amb) == 1 and amb[0]["data"]["candidates"] == CANDIDATES
    assert amb[0]["version"].endswith("pdctl.cpu")
    unknown = by_rule(doc, "env-unknown")
    assert [f["subject"] for f in unknown] == ["SGLANG_HOST_IPP"]
    assert unknown[0]["data"]["suggestions"][0] == "SGLANG_HOST_IP"
    code, doc = lint(tmp_path, "bundled-role", inv, "--role", "prefill")
    assert code == 0 and [r["role"] for r in doc["roles"]] == ["prefill"]


def test_the_bundled_engine_accepts_mooncake_sglangs_default_backend(tmp_path):
    from tests.e2e.helpers import local_inventory
    from tests.fixtures.net import free_port

    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = {**local_inventory("lintmc", ports), "transfer_backend": "mooncake"}
    code, doc = lint(tmp_path, "mooncake", inv)
    assert code == 0 and doc["findings"] == [], doc["findings"]
    assert {r["role"] for r in doc["roles"]} == {"prefill", "decode", "router"}


def test_the_screen_reads_at_80_columns_verdict_first(tmp_path):
    from tests.e2e.helpers import local_inventory
    from tests.fixtures.net import free_port

    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        "lints",
        ports,
        decode_args={"--cuda-graph-max-bs": 96},
        decode_env={"SGLANG_OPT_USE_MULTI_STREAM_OVERLAPP": "0"},
    )
    (tmp_path / "state").mkdir()
    run = pdctl(
        ["lint", "-i", str(write_inventory(tmp_path / "inv.yaml", inv))],
        state=tmp_path / "state",
        env={"COLUMNS": "80"},
        timeout=120,
    )
    assert run.code == 1, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("lint: FAIL") and "1 would not start" in lines[0]
    assert max(len(line) for line in lines) <= 80
    text = run.stdout
    assert "--cuda-graph-max-bs-decode" in text and "did you mean SGLANG_OPT_USE_MULTI_STREAM_OVERLAP" in text
    assert text.index("ERROR flag-ambiguous") < text.index("answered by")


def test_a_host_that_does_not_answer_is_unknown_in_one_json_document(tmp_path):
    from tests.fixtures.net import free_port

    data = seed_on(
        {
            "transport": "ssh",
            "address": "127.0.0.1",
            "port": free_port(),
            "user": "nobody",
            "http": "tunnel",
            "connect_timeout": 2,
            "ssh_config": "none",
        }
    )
    code, doc = lint(tmp_path, "down", data)
    assert code == 3 and doc["ok"] is False and doc["error"]["kind"] == "unreachable"
