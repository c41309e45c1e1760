from __future__ import annotations

from pathlib import Path

from pdctl.checks.flags import flag_occurrences, judge_flags
from pdctl.checks.proc import parse_cmdline, parse_environ
from pdctl.checks.result import Status
from pdctl.secrets import MASK
from pdctl.serialize import to_data

FIX = Path(__file__).parent / "fixtures"
ARGV = parse_cmdline((FIX / "proc-decode-cmdline.bin").read_bytes())
ENV = parse_environ((FIX / "proc-decode-environ.bin").read_bytes())

SEED_ARGS = {
    "--disable-overlap-schedule": True,
    "--cuda-graph-max-bs-decode": 96,
    "--port": 30002,
    "--disaggregation-mode": "decode",
    "--mem-fraction-static": 0.85,
    "--enable-dp-attention": False,
}
SEED_ENV = {"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0", "SGLANG_SM120_MMA_TARGET_CTAS": "512", "HF_TOKEN": "hf_secret"}


def by_name(results):
    return {r.name: r for r in results}


def test_seed_decode_matches_its_declaration():
    res = judge_flags("decode[0]", ARGV, ENV, SEED_ARGS, SEED_ENV)
    assert len(res) == len(SEED_ARGS) + len(SEED_ENV)
    assert all(r.layer == "flags" and r.target == "decode[0]" for r in res)
    assert [r for r in res if r.status is not Status.PASS] == []
    r = by_name(res)
    assert r["--cuda-graph-max-bs-decode"].observed == "96"
    assert r["env:HF_TOKEN"].observed == MASK and r["env:HF_TOKEN"].expected == MASK
    assert r["env:SGLANG_SM120_MMA_TARGET_CTAS"].observed == "512"


def test_drift_is_reported_expected_vs_found_and_secrets_stay_masked():
    argv = [a for a in ARGV if a != "--disable-overlap-schedule"]
    argv[argv.index("--cuda-graph-max-bs-decode") + 1] = "160"
    env = dict(ENV, SGLANG_OPT_USE_MULTI_STREAM_OVERLAP="1", HF_TOKEN="hf_other")
    del env["SGLANG_SM120_MMA_TARGET_CTAS"]
    res = by_name(judge_flags("decode[0]", argv, env, SEED_ARGS, SEED_ENV))
    assert res["--disable-overlap-schedule"].status is Status.FAIL
    assert (res["--disable-overlap-schedule"].observed, res["--disable-overlap-schedule"].expected) == (
        "absent",
        "present",
    )
    assert (res["--cuda-graph-max-bs-decode"].observed, res["--cuda-graph-max-bs-decode"].expected) == ("160", "96")
    assert (
        res["env:SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"].observed,
        res["env:SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"].expected,
    ) == ("1", "0")
    assert res["env:SGLANG_SM120_MMA_TARGET_CTAS"].status is Status.FAIL
    assert res["env:SGLANG_SM120_MMA_TARGET_CTAS"].observed == "unset"
    tok = res["env:HF_TOKEN"]
    assert tok.status is Status.FAIL and "masked" in tok.detail
    blob = str([to_data(r) for r in res.values()])
    assert "hf_other" not in blob and "hf_secret" not in blob


def test_declared_false_flag_present_is_drift():
    res = by_name(judge_flags("d", ARGV, ENV, {"--enable-metrics": False, "--trust-remote-code": False}, {}))
    assert res["--enable-metrics"].status is Status.FAIL and res["--enable-metrics"].expected == "absent"


def test_equals_form_lists_repeats_and_numbers():
    argv = [
        "python3",
        "-m",
        "sglang_router.launch_router",
        "--pd-disaggregation",
        "--prefill",
        "http://127.0.0.1:30000",
        "8998",
        "--decode",
        "http://127.0.0.1:30002",
        "--port=30001",
        "--health-check-interval-secs",
        "60",
        "--policy",
        "random",
        "--policy",
        "cache_aware",
        "--api-key=sk-1",
        "--max-total-tokens",
        "1e3",
    ]
    decl = {
        "--prefill": ["http://127.0.0.1:30000", 8998],
        "--decode": ["http://127.0.0.1:30002"],
        "--port": 30001,
        "--health-check-interval-secs": 60.0,
        "--policy": "cache_aware",
        "--pd-disaggregation": True,
        "--api-key": "sk-2",
        "--max-total-tokens": 1000,
    }
    res = by_name(judge_flags("router[0]", argv, {}, decl, {}))
    assert {n for n, r in res.items() if r.status is not Status.PASS} == {"--api-key"}
    assert res["--prefill"].observed == "http://127.0.0.1:30000 8998"
    assert res["--policy"].data["note"].startswith("--policy given 2 times")
    assert res["--api-key"].observed == MASK and res["--api-key"].expected == MASK
    assert "sk-1" not in str(to_data(res["--api-key"]))


def test_prefix_of_another_flag_is_not_that_flag():
    # the seed's --cuda-graph-max-bs is not --cuda-graph-max-bs-decode (0.5.23 rejects the abbreviation)
    res = judge_flags("d", ARGV, ENV, {"--cuda-graph-max-bs": 96}, {})
    assert res[0].status is Status.FAIL and res[0].observed == "absent"
    assert flag_occurrences(["--a", "1", "--", "--a", "2"], "--a") == [["1"]]
    assert flag_occurrences(["--bare", "--x=1", "--x", "-5"], "--x") == [["1"], ["-5"]]


def test_bool_flag_given_with_explicit_values():
    res = by_name(judge_flags("d", ["--f=true", "--g=false", "--h"], {}, {"--f": True, "--g": True, "--h": True}, {}))
    assert res["--f"].status is Status.PASS and res["--h"].status is Status.PASS
    assert res["--g"].status is Status.FAIL


def test_unreadable_environ_is_not_a_silent_pass():
    res = judge_flags("d", ARGV, None, {}, {"SGLANG_SM120_MMA_TARGET_CTAS": "512"})
    assert res[0].status is Status.WARN and res[0].observed == "unreadable"


def test_contract_with_rendered_launch_commands():
    """What pdctl.launch renders and declares must judge clean (the embedded default and the seed inventory)."""
    import pytest

    launch = pytest.importorskip("pdctl.launch")
    from pdctl.inventory import embedded_default, load_inventory

    root = Path(__file__).resolve().parents[2]
    invs = [embedded_default()]
    if (root / "examples" / "seed-production.yaml").exists():
        invs.append(load_inventory(root / "examples" / "seed-production.yaml"))
    for inv in invs:
        for role, i, _ in inv.instances():
            argv, env = launch.role_argv(inv, role, i), launch.role_env(inv, role, i)
            res = judge_flags(
                inv.label(role, i), argv, env, launch.declared_flags(inv, role, i), launch.declared_env(inv, role, i)
            )
            assert [r for r in res if r.status is not Status.PASS] == [], (inv.name, role)


def test_undeclared_live_flags_are_drift():
    from pdctl.checks.flags import flag_names, judge_undeclared

    rendered = ["python", "-m", "sglang.launch_server", "--port", "30002", "--disable-overlap-schedule"]
    live = rendered + ["--enable-hand-tuning", "--mem-fraction-static=0.9"]
    assert flag_names(live) == ["--port", "--disable-overlap-schedule", "--enable-hand-tuning", "--mem-fraction-static"]
    bad = judge_undeclared("decode[0]", live, rendered)
    assert [r.name for r in bad] == ["--enable-hand-tuning", "--mem-fraction-static"]
    assert all(r.failed for r in bad)
    assert judge_undeclared("decode[0]", rendered, rendered) == []
