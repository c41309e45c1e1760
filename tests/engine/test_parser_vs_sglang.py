"""The bundled engine's launch parser against the real SGLang 0.5.23 parser (its venv, scripts/install.sh): the same
argv gives the same exit code and the same error message, abbreviations resolve to the same flag, and the seed's
`--cuda-graph-max-bs 96` is refused as ambiguous by both."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess

import pytest

from engine.server_args import parse_args
from tests.fixtures.sglang_venv import sglang_python

# (argv after --model-path m, a dest to compare when both accept it)
CASES = [
    (["--cuda-graph-max-bs", "96"], None),  # the seed's flag: ambiguous between -decode and -prefill
    (["--cuda-graph-max-bs=96"], None),
    (["--cuda-graph-max-bs-dec", "96"], "cuda_graph_max_bs_decode"),
    (["--bogus", "1"], None),
    (["--bogus"], None),
    (["extra"], None),
    (["--tp", "2"], "tp_size"),
    (["--tensor-parallel-size", "2"], "tp_size"),
    (["--ep", "2"], "ep_size"),
    (["--mem-frac", "0.8"], "mem_fraction_static"),
    (["--dp", "1"], "dp_size"),
    (["--port", "abc"], None),
    (["--disaggregation-mode", "foo"], None),
    (["--disagg", "prefill"], None),
    (["--disaggregation-mo", "prefill"], "disaggregation_transfer_backend"),  # SGLang's minimal PD line: mooncake
    (["--ena", "x"], None),
    (["--enable-metr"], "enable_metrics"),
    (["--max-running", "8"], "max_running_requests"),
    (["--page-size", "32", "--chunked-prefill-size", "256"], "page_size"),
    (["--disaggregation-decode-polling-interval", "2"], None),  # an SGLang flag the engine records, no effect
    (["--enable-tf32-matmul", "--no-enable-tf32-matmul"], None),
    (["--numa-node", "0", "1"], None),
]

SGLANG_SIDE = r"""
import contextlib, io, json, sys
from sglang.srt.server_args import prepare_server_args
out = []
for argv, dest in json.loads(sys.stdin.read()):
    err = io.StringIO()
    code, value = 0, None
    with contextlib.redirect_stderr(err):
        try:
            sa = prepare_server_args(["--model-path", "m", *argv])
            value = getattr(sa, dest) if dest else None
        except SystemExit as e:
            code = e.code
    out.append([code, err.getvalue().strip().splitlines()[-1:] , value])
print(json.dumps(out))
"""


def _engine(argv: list[str], dest: str | None):
    err = io.StringIO()
    code, value = 0, None
    with contextlib.redirect_stderr(err):
        try:
            args = parse_args(["--model-path", "m", *argv])
            value = getattr(args, dest) if dest else None
        except SystemExit as e:
            code = e.code
    return [code, err.getvalue().strip().splitlines()[-1:], value]


def _message(lines: list[str]) -> str:
    """The part after the program name, which differs by design ("sglang serve" vs the engine's module)."""
    return lines[0].split(": error: ", 1)[-1] if lines else ""


@pytest.fixture(scope="module")
def sglang_answers():
    p = subprocess.run(
        [sglang_python(), "-c", SGLANG_SIDE], input=json.dumps(CASES), capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("i", range(len(CASES)), ids=[" ".join(a) for a, _ in CASES])
def test_same_verdict_as_sglang(i, sglang_answers):
    argv, dest = CASES[i]
    s_code, s_err, s_val = sglang_answers[i]
    e_code, e_err, e_val = _engine(argv, dest)
    assert (e_code, _message(e_err)) == (s_code, _message(s_err)), (argv, s_err, e_err)
    if s_code == 0 and dest:
        assert e_val == s_val, (argv, dest)


def test_the_seed_flag_is_ambiguous_in_both(sglang_answers):
    code, err, _ = sglang_answers[0]
    assert code == 2 and "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode" in err[0]
