"""Launch flags with SGLang's names and defaults, every SGLang 0.5.23 flag known. GPU-only flags are accepted,
reported, and ignored."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from engine import drills as drills_mod
from engine.disaggregation import backends


def _positive_int(v: str) -> int:
    i = int(v)
    if i <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {v}")
    return i


def _fraction(v: str) -> float:
    f = float(v)
    if not 0.0 < f <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {v}")
    return f


SGLANG_FLAGS = Path(__file__).parent / "assets" / "sglang-0.5.23-flags.json"


def _own_options() -> list[tuple[tuple[str, ...], dict]]:
    """The flags the engine acts on or records, with its own types and defaults."""
    o = []

    def a(*names, **kw):
        o.append((names, kw))

    a(
        "--model-path",
        "--model",
        dest="model_path",
        default=None,
        help="local directory of an engine checkpoint (config.json, model.pt, tokenizer.json); "
        "default: built-in seeded weights",
    )
    a("--tokenizer-path", default=None)
    a("--served-model-name", default=None)
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--disaggregation-mode", choices=["null", "prefill", "decode"], default="null")
    # SGLang's other values (ascend, mori, mooncake_tcp) are not offered: argparse refuses them, exit 2
    a(
        "--disaggregation-transfer-backend",
        choices=backends.names(),
        default=backends.DEFAULT,
        help="KV transfer backend: " + "; ".join(f"{k.name}: {k.summary}" for k in backends.BACKENDS.values()),
    )
    a("--disaggregation-bootstrap-port", type=int, default=8998)
    a("--disaggregation-ib-device", default=None)
    a("--enable-metrics", action="store_true")
    a(
        "--chunked-prefill-size",
        type=int,
        default=None,
        help="tokens per prefill chunk (engine default 512; -1 disables)",
    )
    a("--page-size", type=_positive_int, default=None, help="KV page size in tokens (engine default 64)")
    a("--max-running-requests", type=_positive_int, default=None)
    a("--max-total-tokens", type=_positive_int, default=None, help="KV pool size in tokens (engine default 131072)")
    a("--context-length", type=_positive_int, default=None)
    a("--random-seed", type=int, default=None)
    a("--log-level", default="info", choices=["debug", "info", "warning", "error", "critical"])
    a("--log-level-http", default=None)
    a("--log-requests", action="store_true")
    a("--trust-remote-code", action="store_true")
    a("--skip-server-warmup", action="store_true")
    a("--stream-interval", type=_positive_int, default=1)
    a("--api-key", default=None)
    # GPU / parallelism flags: recorded, no effect on a CPU.
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=_positive_int, default=1)
    a("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=_positive_int, default=1)
    a("--dp-size", "--data-parallel-size", dest="dp_size", type=_positive_int, default=1)
    a("--ep-size", "--expert-parallel-size", dest="ep_size", type=_positive_int, default=1)
    a("--mem-fraction-static", type=_fraction, default=None)
    a("--disable-overlap-schedule", action="store_true")
    a("--disable-cuda-graph", action="store_true")
    a("--cuda-graph-max-bs-decode", type=_positive_int, default=None)
    a("--cuda-graph-max-bs-prefill", type=_positive_int, default=None)
    a("--attention-backend", default=None)
    a("--dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    a("--kv-cache-dtype", default="auto")
    a("--quantization", default=None)
    a("--enable-dp-attention", action="store_true")
    a("--base-gpu-id", type=int, default=0)
    a("--nnodes", type=_positive_int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", default=None)
    # Engine-only: drills (also via env PDCTL_DRILLS).
    a(
        "--drill",
        action="append",
        default=[],
        metavar="NAME",
        help=f"enable a drill: {', '.join(drills_mod.DRILL_NAMES)}",
    )
    return o


def _sglang_flags() -> list[dict]:
    return json.loads(SGLANG_FLAGS.read_text())["flags"]


# The flags whose SGLang 0.5.23 attribute is not the one argparse derives from the option string (its parser's
# `dest`; the help text does not show it), so that /server_info reports them under SGLang's keys.
SGLANG_DESTS = {
    "--fp8-gemm-backend": "fp8_gemm_runner_backend",
    "--fp4-gemm-backend": "fp4_gemm_runner_backend",
    "--elastic-ep-join-mode": "ep_join_mode",
    "--elastic-ep-join-rank-offset": "ep_join_rank_offset",
    "--monokernel-backend": "enable_amd_monokernel",
}


def build_parser() -> argparse.ArgumentParser:
    """Every flag of SGLang 0.5.23, in SGLang's order, so an abbreviation resolves, or is refused as ambiguous
    (the seed's `--cuda-graph-max-bs` between the -decode and -prefill forms), with SGLang's own message; an
    unknown flag is "unrecognized arguments", exit 2, as there. The engine's own flags keep their types and
    defaults under SGLang's option strings (aliases included); the rest are accepted with no effect and
    recorded (hidden from --help)."""
    p = argparse.ArgumentParser(
        prog="python -m engine.launch_server",
        description="pdctl's bundled CPU engine (SGLang PD protocol). Every other flag of SGLang "
        "0.5.23 is accepted and has no effect.",
    )
    own = _own_options()
    by_name = {n: i for i, (names, _) in enumerate(own) for n in names}
    placed: set[int] = set()
    for f in _sglang_flags():
        hit = next((by_name[n] for n in f["options"] if n in by_name), None)
        if hit is not None and hit not in placed:
            names, kw = own[hit]
            strings = list(dict.fromkeys([*f["options"], *names]))
            if f["kind"] == "bool_optional" and kw.get("action") == "store_true":
                kw = {**kw, "action": argparse.BooleanOptionalAction, "default": False}
            p.add_argument(*strings, **kw)
            placed.add(hit)
            continue
        kw = {"help": argparse.SUPPRESS, "default": None}
        if f["options"][0] in SGLANG_DESTS:
            kw["dest"] = SGLANG_DESTS[f["options"][0]]
        if f["kind"] == "flag":
            kw["action"] = "store_true"
            kw["default"] = False
        elif f["kind"] == "bool_optional":
            kw["action"] = argparse.BooleanOptionalAction
        else:
            if f["nargs"] != 1:
                kw["nargs"] = f["nargs"]
            if f.get("choices"):
                kw["choices"] = f["choices"]
        p.add_argument(*f["options"], **kw)
    for i, (names, kw) in enumerate(own):
        if i not in placed:
            p.add_argument(*names, **kw)
    return p


@dataclass
class ServerArgs:
    ns: argparse.Namespace

    def __getattr__(self, item):
        return getattr(self.ns, item)

    def as_dict(self) -> dict:
        return dict(vars(self.ns))


def parse_args(argv: list[str] | None = None) -> ServerArgs:
    """Parse and validate; on bad input argparse prints usage + message and exits 2."""
    p = build_parser()
    ns = p.parse_args(argv)
    if not 0 < ns.port < 65536 or not 0 < ns.disaggregation_bootstrap_port < 65536:
        p.error("ports must be in 1..65535")
    if ns.chunked_prefill_size is None:
        ns.chunked_prefill_size = 512
    if ns.chunked_prefill_size == 0 or ns.chunked_prefill_size < -1:
        p.error("--chunked-prefill-size must be positive or -1")
    try:
        ns.drills = drills_mod.parse(ns.drill)
    except ValueError as e:
        p.error(str(e))
    if ns.served_model_name is None:
        ns.served_model_name = ns.model_path or "pdctl-tiny-byte-lm"
    return ServerArgs(ns)
