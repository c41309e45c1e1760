"""The scheduler process's server: what launch_server.build() made of its flags (the model, the scheduler, the
KV side of PD, the metrics), and the /server_info it answers with."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from engine import __version__
from engine.server_args import ServerArgs
from engine.tokenizer import DEFAULT_MODEL_DIR

if TYPE_CHECKING:
    from engine.disaggregation.bootstrap_server import BootstrapServer
    from engine.disaggregation.decode_kv import DecodeKVManager
    from engine.disaggregation.prefill_kv import PrefillKVManager
    from engine.metrics import Metrics
    from engine.scheduler import Scheduler

DEFAULT_PAGE_SIZE = 64


class EngineState:
    """The scheduler process's server: what build() made of its flags."""

    def __init__(self, args: ServerArgs, metrics: Metrics, t0: float | None = None):
        self.args = args
        self.ready = False
        self.t0 = t0 or time.time()
        self.model_path = os.path.abspath(args.model_path) if args.model_path else str(DEFAULT_MODEL_DIR)
        self.scheduler: Scheduler | None = None
        self.metrics = metrics
        self.context_length = 32768
        self.page_size = args.page_size or DEFAULT_PAGE_SIZE
        self.startup: dict[str, float] = {}  # startup_time_seconds{phase}, as SGLang's phases
        self.bootstrap: BootstrapServer | None = None  # prefill only
        self.kv: PrefillKVManager | DecodeKVManager | None = None  # PD modes only

    def running(self) -> Scheduler:
        """The scheduler, once build() has made it."""
        if self.scheduler is None:
            raise RuntimeError("the engine is not built yet")
        return self.scheduler

    def server_info(self) -> dict:
        info = {k: v for k, v in self.args.as_dict().items() if k not in ("drill", "drills")}
        info.update(
            {
                "model_path": self.model_path,
                "version": __version__,
                "engine": "pdctl-bundled-cpu",
                "drills": self.args.drills.names(),
                "page_size_effective": self.page_size,
                "context_length": self.context_length,
                "internal_states": [
                    {
                        "disaggregation_mode": self.args.disaggregation_mode,
                        "num_active_reqs": self.scheduler.num_active() if self.scheduler else 0,
                        "last_gen_throughput": self.metrics.value("gen_throughput"),
                        "memory_usage": {"kv_pool_used_fraction": self.metrics.value("token_usage")},
                    }
                ],
            }
        )
        return info
