"""Inventories of the real-SGLang lane: the real sglang 0.5.23 (tests/fixtures/real_sglang.py) deployed by pdctl
itself, pidfile services on this machine, mooncake over loopback, behind the router kind asked for."""

from __future__ import annotations

from tests.fixtures.net import free_port
from tests.fixtures.real_sglang import RUN_ENV, require_real_lane

# What every real worker needs on this CPU (tests/fixtures/real_sglang.py says why), as inventory args: the flags
# pdctl sets itself (mode, backend, ports, metrics) come from the inventory's own fields.
CPU_ARGS = {
    "--device": "cpu",
    "--attention-backend": "torch_native",
    "--disable-cuda-graph": True,
    "--mem-fraction-static": 0.05,
    "--max-total-tokens": 4096,
}
ROLE_ARGS = {
    "prefill": {"--disable-overlap-schedule": True},
    "decode": {"--disaggregation-decode-retraction-backup": "cpu_tensor"},
}
SERVED = "tiny-llama"


def real_inventory(name: str, router_kind: str, *, prefills: int = 1, decodes: int = 1) -> dict:
    """`prefills` x `decodes` real SGLang workers and one router of `router_kind` on free loopback ports."""
    py, model = require_real_lane()
    worker = {"host": "local", "ready_timeout": 300, "env": dict(RUN_ENV)}

    def args(role: str) -> dict:
        return {**CPU_ARGS, **ROLE_ARGS[role], "--nccl-port": free_port()}

    return {
        "name": name,
        "engine": "sglang",
        "model_path": str(model),
        "served_model_name": SERVED,
        "transfer_backend": "mooncake",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile", "python": str(py)}},
        "roles": {
            "prefill": [
                {**worker, "port": free_port(), "bootstrap_port": free_port(), "args": args("prefill")}
                for _ in range(prefills)
            ],
            "decode": [{**worker, "port": free_port(), "args": args("decode")} for _ in range(decodes)],
            "router": [
                {
                    "host": "local",
                    "ready_timeout": 180,
                    "kind": router_kind,
                    "args": {"--prometheus-port": free_port(), "--health-check-interval-secs": 2, "--policy": "random"},
                    "port": free_port(),
                }
            ],
        },
    }
