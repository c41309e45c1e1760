"""Issue 28, W11 and W12 as the red team ran them: `pdctl lint` on an inventory whose decode gives `--tp-size: 1` and
`--tensor-parallel-size: 2` and sets `sglang_disaggregation_waiting_timeout`. One `pdctl lint --json` process per
engine: the bundled engine's parser and registry, and the real sglang 0.5.23 in its venv (skipped without it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e]

WAIT = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"


def _inventory(host: dict | None = None) -> dict:
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        "lintalias",
        ports,
        host=host,
        decode_args={"--tp-size": 1, "--tensor-parallel-size": 2},
        decode_env={"sglang_disaggregation_waiting_timeout": "100000"},
    )
    # the variant: the same value under two spellings only warns
    inv["roles"]["prefill"][0]["args"] = {"--dp-size": 1, "--data-parallel-size": 1}
    return inv


def _lint(tmp: Path, inv: dict) -> tuple[int, dict]:
    (tmp / "state").mkdir()
    run = pdctl(["lint", "-i", str(write_inventory(tmp / "inv.yaml", inv)), "--json"], state=tmp / "state", timeout=180)
    return run.code, json.loads(run.stdout)


def _check(code: int, doc: dict) -> None:
    assert code == 1 and not doc["ok"]
    by = {(f["rule"], f["role"].split("@")[0]): f for f in doc["findings"]}
    conflict = by[("flag-conflict", "decode[0]")]
    assert conflict["severity"] == "error" and not conflict["blocks"]
    assert conflict["data"]["spellings"] == ["--tp-size", "--tensor-parallel-size"]
    assert "--tensor-parallel-size 2" in conflict["message"]
    repeated = by[("flag-repeated", "prefill[0]")]
    assert repeated["severity"] == "warning" and repeated["data"]["setting"] == "dp_size"
    case = by[("env-case", "decode[0]")]
    assert case["subject"] == "sglang_disaggregation_waiting_timeout" and case["fix"] == f"write {WAIT}"
    # SGLang ignores the lower-case name: the waiting timeout stays at its default, so no safety-net finding
    assert not [f for f in doc["findings"] if f["rule"] == "waiting-timeout"]


def test_the_bundled_engine_finds_conflicting_aliases_and_a_lower_case_env_name(tmp_path):
    _check(*_lint(tmp_path, _inventory()))


def test_the_real_sglang_finds_them_too(tmp_path):
    from tests.fixtures.sglang_venv import sglang_python

    host = {"transport": "local", "service_manager": "pidfile", "python": sglang_python()}
    inv = {**_inventory(host), "engine": "sglang", "model_path": str(tmp_path), "transfer_backend": "mooncake"}
    code, doc = _lint(tmp_path, inv)
    assert {r["version"] for r in doc["roles"] if r["role"] != "router"} == {"0.5.23"}, doc
    _check(code, doc)
