"""FastAPI app with SGLang's endpoints: health, info and admin here; generation in engine/api_generate.py
(/generate) and engine/api_openai.py (/v1/*). Handlers validate, build Reqs, hand them to the scheduler
process (engine/scheduler_process.py) and await their events; a client that goes away aborts its requests."""

from __future__ import annotations

import asyncio
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from engine import loads
from engine import request_parse as rp
from engine.api_common import Api, EventQueue, Out, streaming_sink
from engine.api_generate import add_generate_routes
from engine.api_openai import add_openai_routes
from engine.events import Failed
from engine.req import Req
from engine.tokenizer import ByteTokenizer


def build_app(state) -> FastAPI:
    """state: launch_server.HttpState (args, the scheduler's client, ready flag, call() into the scheduler)."""
    app = FastAPI(lifespan=state.lifespan)
    tok = ByteTokenizer()
    args = state.args
    api = Api(state)
    not_ready = api.not_ready

    @app.exception_handler(RequestValidationError)
    async def bad_query(_request: Request, exc: RequestValidationError):
        # SGLang turns FastAPI's 422 into a 400 with its error body (a query parameter of the wrong type)
        return rp.err(400, str(exc), "Bad Request")

    # -- health / info ------------------------------------------------------------------------
    @app.get("/health")
    async def health():
        return not_ready() or Response(status_code=200)

    @app.get("/health_generate")
    async def health_generate(request: Request):
        if r := not_ready():
            return r
        loop = asyncio.get_running_loop()
        q: EventQueue = asyncio.Queue()
        # Like upstream: fake bootstrap (2.2.2.2, room 0), a local one-token run, never the transfer.
        req = Req(
            rid=f"HEALTH_CHECK_{uuid.uuid4().hex}",
            input_ids=tok.encode("health"),
            max_new_tokens=1,
            sink=streaming_sink(loop, q, 0),
            health=True,
            room=0,
            bootstrap_host="2.2.2.2",
        )
        async for _k, ev in api.run(request, [Out(req, False)], q):
            if isinstance(ev, Failed):
                return rp.err(503, ev.message, "ServiceUnavailable")
        return Response(status_code=200)

    @app.get("/server_info")
    @app.get("/get_server_info")
    async def server_info():
        return await state.call("server_info")

    @app.get("/model_info")
    @app.get("/get_model_info")
    async def model_info():
        # SGLang 0.5.23's keys, in its order, except `embedding` (its serving plan for embedding models)
        return {
            "model_path": state.model_path,
            "served_model_name": args.served_model_name,
            "tokenizer_path": state.model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "load_format": args.load_format or "auto",
            "reasoning_parser": args.reasoning_parser,
            "tool_call_parser": args.tool_call_parser,
            "disaggregation_mode": args.disaggregation_mode,
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": "tiny-byte-lm",
            "architectures": ["TinyLM"],
        }

    @app.get("/v1/loads")
    async def v1_loads(dp_rank: int | None = None, include: str | None = None, format: str | None = None):
        """SGLang 0.5.23's load report (engine/loads.py). As there: served without --enable-metrics and while
        starting, an out-of-range dp_rank gives no loads, an unknown include section is an unhandled error (500),
        and the time taken is observed in get_loads_duration_seconds."""
        wanted = {x.strip() for x in include.split(",")} if include else None
        t0 = time.perf_counter()
        try:
            snaps = [] if dp_rank is not None and dp_rank != 0 else await state.call("loads")
        finally:
            state.scheduler.observe("get_loads_duration_seconds", time.perf_counter() - t0)
        try:
            if format == "prometheus":
                return Response(loads.prometheus(snaps, wanted), media_type="text/plain; version=0.0.4; charset=utf-8")
            return JSONResponse(loads.answer(snaps, wanted))
        except ValueError:
            return PlainTextResponse("Internal Server Error", status_code=500)

    @app.get("/metrics")
    async def metrics():
        if not args.enable_metrics:
            return PlainTextResponse("metrics are disabled (start with --enable-metrics)", status_code=404)
        return Response(await state.call("metrics"), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.api_route("/abort_request", methods=["POST", "PUT"])
    async def abort_request(request: Request):
        try:
            b = await api.body_of(request)
        except rp.BadRequest as e:
            return rp.err(400, str(e))
        rid, abort_all = b.get("rid"), bool(b.get("abort_all", False))
        if not abort_all and not isinstance(rid, str):
            return rp.err(400, "rid (string) or abort_all=true is required")
        state.scheduler.abort(rid, abort_all)
        return Response(status_code=200)

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache():
        if await state.call("num_active"):
            return PlainTextResponse("Cache not flushed: there are running requests.", status_code=400)
        return PlainTextResponse("Cache flushed.", status_code=200)

    add_openai_routes(app, api)
    add_generate_routes(app, api)
    return app
