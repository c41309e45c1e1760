"""`python -m engine.launch_server ...`: SGLang's flags, one server per role (prefill, decode, null): an HTTP
process and its scheduler process (engine/scheduler_process.py). argv is never rewritten, so /proc/PID/cmdline
shows the flags (pdctl's drift check reads them)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
import uuid
from typing import TYPE_CHECKING

from engine.server_args import ServerArgs, parse_args
from engine.engine_state import EngineState

if TYPE_CHECKING:
    from engine.disaggregation.kv_pool import KVPool
    from engine.model import TinyLM
    from engine.scheduler_process import Pipe, SchedulerClient

# The scheduler thread hands the GIL back at every torch op; under load the KV threads then held it for up to the
# default 5 ms each time, which cost a batch of 32 a third of its decode throughput.
sys.setswitchinterval(0.0005)

DEFAULT_MAX_TOTAL_TOKENS = 131072


def build(args: ServerArgs, t0: float | None = None) -> EngineState:
    """Construct model, metrics, KV plumbing and the scheduler for args' mode."""
    import torch

    from engine.metrics import Metrics
    from engine.model import TinyLM
    from engine.scheduler import Scheduler

    torch.set_num_threads(1)  # two workers and a router share two cores
    st = EngineState(args, Metrics(args.served_model_name, args.disaggregation_mode), t0)
    metrics = st.metrics
    t_build = time.monotonic()
    model = (
        TinyLM.load(args.model_path)
        if args.model_path and os.path.exists(os.path.join(args.model_path, "config.json"))
        else TinyLM()
    )
    if args.random_seed is not None:
        torch.manual_seed(args.random_seed)
    st.context_length = min(args.context_length or model.cfg.context_length, model.cfg.context_length)
    st.startup["load_weight"] = time.monotonic() - t_build
    mode = args.disaggregation_mode
    if mode == "null":
        st.scheduler = Scheduler(model, args, metrics)
        return _started(st, model, None, t_build)
    from engine.disaggregation import backends
    from engine.disaggregation.kv_pool import KVPool
    from engine.disaggregation.prefill_kv import advertised_host
    from engine.disaggregation.transfer_backend import BackendContext

    total = args.max_total_tokens or DEFAULT_MAX_TOTAL_TOKENS
    t_kv = time.monotonic()
    pool = KVPool(model.cfg.n_layers, model.cfg.kv_dim, st.page_size, total // st.page_size + 1)
    st.startup["kv_cache_allocation"] = time.monotonic() - t_kv
    agent = f"{mode}-{socket.gethostname()}-{args.port}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    kind = backends.kind(args.disaggregation_transfer_backend)
    backend = kind.create(
        BackendContext(
            pool=pool,
            agent_name=agent,
            listen_host=args.host,
            advertised_host=advertised_host(args.host),
            ib_device=args.disaggregation_ib_device,
            metrics_registry=metrics.registry if mode == "prefill" else None,
        )
    )
    if mode == "prefill":
        from engine.disaggregation.bootstrap_server import BootstrapServer
        from engine.disaggregation.prefill_kv import PrefillKVManager
        from engine.scheduler_prefill import PrefillScheduler

        st.bootstrap = BootstrapServer(args.host, args.disaggregation_bootstrap_port).start()
        prefill_kv = PrefillKVManager(
            backend, pool, args.drills, metrics, args.host, args.disaggregation_bootstrap_port
        )
        prefill_kv.register_with_bootstrap()
        st.kv, st.scheduler = prefill_kv, PrefillScheduler(model, args, metrics, prefill_kv, moves_kv=kind.moves_kv)
    else:
        from engine.disaggregation.decode_kv import DecodeKVManager
        from engine.scheduler_decode import DecodeScheduler

        decode_kv = DecodeKVManager(backend, pool, metrics, identity=f"{advertised_host(args.host)}:{args.port}")
        st.kv, st.scheduler = decode_kv, DecodeScheduler(model, args, metrics, decode_kv, moves_kv=kind.moves_kv)
    return _started(st, model, pool, t_build)


def _started(st: EngineState, model: TinyLM, pool: KVPool | None, t_build: float) -> EngineState:
    st.running().stats.emit_constants(model, pool, st.context_length)
    st.startup["scheduler_e2e"] = time.monotonic() - t_build
    return st


def _warmup_then_ready(st: EngineState, pipe: Pipe) -> None:
    """Run one local generation (so the first real request is not slow), then tell the HTTP process: ready."""
    from engine.events import ends
    from engine.req import Req

    done = threading.Event()
    scheduler = st.running()
    scheduler.submit(
        Req(
            rid="WARMUP",
            input_ids=list(b"warm up"),
            max_new_tokens=2,
            health=True,
            room=0,
            sink=lambda ev: done.set() if ends(ev) else None,
        )
    )
    done.wait(60)
    st.startup["tokenizer_e2e"] = time.time() - st.t0  # process start to ready
    scheduler.stats.emit_startup(st.startup)
    pipe.send(("ready",))
    logging.getLogger("engine").info("The server is fired up and ready to roll!")


def _scheduler_main(args: ServerArgs, t0: float, pipe: Pipe) -> None:
    """The scheduler process: build, report, warm up, then answer the HTTP process until it goes away."""
    from engine.scheduler_process import serve

    try:
        st = build(args, t0)
    except OSError as e:
        pipe.send(("fail", f"cannot start: {e}"))
        raise SystemExit(1)
    except Exception:
        pipe.send(("fail", None))  # the traceback goes to the log, from fork()
        raise
    st.running().start()
    pipe.send(("built", {"context_length": st.context_length, "model_path": st.model_path}))
    threading.Thread(target=_warmup_then_ready, args=(st, pipe), daemon=True).start()
    serve(pipe, st)


class HttpState:
    """What the HTTP process knows of its server; the rest it asks the scheduler process (`call`)."""

    def __init__(self, args: ServerArgs, t0: float, client: SchedulerClient, built: dict):
        self.args, self.t0, self.scheduler = args, t0, client
        self.model_path, self.context_length = built["model_path"], built["context_length"]
        self.ready = False

    async def call(self, name: str):
        import asyncio

        return await asyncio.wrap_future(self.scheduler.call(name))

    @contextlib.asynccontextmanager
    async def lifespan(self, _app):
        yield
        self.scheduler.stop()  # uvicorn's shutdown, before it re-raises the stop signal


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t0 = time.time()
    logging.basicConfig(level=args.log_level.upper(), format="[%(asctime)s %(name)s] %(message)s")
    # One line per heartbeat and KV control call would push everything else out of a log tail.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))
    from engine.scheduler_process import SchedulerClient, fork

    client = SchedulerClient(*fork(lambda pipe: _scheduler_main(args, t0, pipe)))
    built = client.wait_built()
    import uvicorn

    from engine.http_server import build_app

    st = HttpState(args, t0, client, built)
    client.start(on_ready=lambda: setattr(st, "ready", True))
    uvicorn.run(
        build_app(st),
        host=args.host,
        port=args.port,
        log_level=(args.log_level_http or "warning").lower(),
        timeout_keep_alive=30,
    )


if __name__ == "__main__":
    main()
