import subprocess
import sys

import pytest

from engine import drills
from engine.server_args import parse_args


def test_defaults_and_gpu_flags_recorded():
    a = parse_args(
        [
            "--disaggregation-mode",
            "prefill",
            "--disaggregation-transfer-backend",
            "nixl",
            "--cuda-graph-max-bs-decode",
            "96",
            "--disable-overlap-schedule",
            "--tp-size",
            "2",
        ]
    )
    d = a.as_dict()
    assert d["disaggregation_bootstrap_port"] == 8998 and d["cuda_graph_max_bs_decode"] == 96
    assert d["disable_overlap_schedule"] and d["tp_size"] == 2 and d["chunked_prefill_size"] == 512


@pytest.mark.parametrize(
    "argv",
    [
        ["--bogus"],
        ["--tp-size", "x"],
        ["--cuda-graph-max-bs", "96"],
        ["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "ascend"],
        ["--drill", "nope"],
        ["--mem-fraction-static", "2"],
    ],
)
def test_bad_flags_exit_2_without_traceback(argv):
    p = subprocess.run(
        [sys.executable, "-m", "engine.launch_server", *argv], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "error:" in p.stderr


def test_flags_recorded_under_sglangs_attribute_names():
    # /server_info reports SGLang's ServerArgs attribute (its parser's dest), not the name argparse derives from the
    # option: the keys real SGLang 0.5.23 shows (tests/real/test_engine_side_by_side.py compares them live)
    d = parse_args(
        [
            "--fp8-gemm-backend",
            "triton",
            "--fp4-gemm-backend",
            "auto",
            "--elastic-ep-join-mode",
            "scale",
            "--elastic-ep-join-rank-offset",
            "2",
        ]
    ).as_dict()
    assert (d["fp8_gemm_runner_backend"], d["fp4_gemm_runner_backend"]) == ("triton", "auto")
    assert (d["ep_join_mode"], d["ep_join_rank_offset"]) == ("scale", "2") and d["enable_amd_monokernel"] is False
    assert not {
        "fp8_gemm_backend",
        "fp4_gemm_backend",
        "elastic_ep_join_mode",
        "elastic_ep_join_rank_offset",
        "monokernel_backend",
    } & set(d)


def test_minimal_pd_launch_line_defaults_to_mooncake():
    # SGLang's own minimal PD line, no transfer-backend flag: accepted, mooncake as upstream's default
    assert parse_args(["--disaggregation-mode", "decode"]).disaggregation_transfer_backend == "mooncake"


def test_drills_parse():
    d = drills.parse(["degraded-bootstrap"], env="status-update-race, transfer-delay-ms=50")
    assert d.names() == ["status-update-race", "transfer-delay-ms=50", "degraded-bootstrap"]
    assert drills.parse([], env="").names() == []
    with pytest.raises(ValueError):
        drills.parse([], env="transfer-delay-ms=abc")


def test_sglang_flag_table_is_generated_from_the_help_capture():
    """engine/assets/sglang-0.5.23-flags.json is scripts/gen_sglang_flags.py's reading of SGLang's --help."""
    import json
    from pathlib import Path

    from scripts.gen_sglang_flags import HELP, OUT, parse_help

    flags = parse_help(Path(HELP).read_text())
    assert json.loads(Path(OUT).read_text())["flags"] == flags
    assert len(flags) == 529
    by = {o: f for f in flags for o in f["options"]}
    assert by["--ep"]["options"] == ["--ep-size", "--expert-parallel-size", "--ep"]
    assert by["--numa-node"]["nargs"] == "+" and by["--enable-metrics"]["kind"] == "flag"
    assert by["--disaggregation-transfer-backend"]["choices"][:2] == ["mooncake", "nixl"]
