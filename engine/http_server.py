"""FastAPI app with SGLang's endpoints. Handlers validate, build a Req, hand it to the scheduler
thread and await its events; a client that goes away aborts its request."""
from __future__ import annotations

import asyncio
import json
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from engine.req import Req
from engine.tokenizer import ByteTokenizer


DISCONNECT_CHECK_S = 0.25


class BadRequest(Exception):
    pass


def _err(code: int, msg: str, typ: str = "BadRequestError") -> JSONResponse:
    return JSONResponse({"object": "error", "message": msg, "type": typ, "code": code,
                         "error": {"message": msg, "type": typ, "code": code}}, status_code=code)


def _int(v, name, lo=None, allow_none=True, hi=None):
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"{name} must be an integer, got {json.dumps(v)[:40]}")
    if lo is not None and v < lo or hi is not None and v > hi:
        raise BadRequest(f"{name} must be in [{lo}, {hi}], got {v}" if hi is not None else f"{name} must be >= {lo}")
    return v


def _num(v, name, lo, hi):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise BadRequest(f"{name} must be a number in [{lo}, {hi}]")
    return float(v)


def build_app(state) -> FastAPI:
    """state: EngineState (args, scheduler, metrics, ready flag, server_info())."""
    app = FastAPI()
    tok = ByteTokenizer()
    args = state.args
    mode = args.disaggregation_mode

    async def body_of(request: Request) -> dict:
        try:
            b = await request.json()
        except Exception:
            raise BadRequest("request body is not valid JSON")
        if not isinstance(b, dict):
            raise BadRequest("request body must be a JSON object")
        return b

    def make_req(b: dict, ids: list[int], max_new, sink, sp: dict) -> Req:
        room = b.get("bootstrap_room")
        if mode != "null":
            if room is None or b.get("bootstrap_host") is None:
                raise BadRequest("bootstrap_host and bootstrap_room are required in disaggregation mode")
            _int(room, "bootstrap_room", 0, allow_none=False)
            port = b.get("bootstrap_port")
            # null means the server's own bootstrap port; a port no socket can have is refused before any work
            port = args.disaggregation_bootstrap_port if port is None else _int(port, "bootstrap_port", 1, hi=65535)
        else:
            port = None
        if not ids:
            raise BadRequest("prompt is empty")
        max_new = 128 if max_new is None else max_new
        if len(ids) + max_new > state.context_length:
            raise BadRequest(f"prompt ({len(ids)} tokens) + max tokens ({max_new}) exceeds the context length "
                             f"{state.context_length}")
        stop = sp.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise BadRequest("stop must be a string or a list of strings")
        temp = _num(sp.get("temperature"), "temperature", 0.0, 100.0)
        top_p = _num(sp.get("top_p"), "top_p", 0.0, 1.0)
        rid = b.get("rid") or uuid.uuid4().hex
        if not isinstance(rid, str):
            raise BadRequest("rid must be a string")
        return Req(rid=rid, input_ids=ids, max_new_tokens=max_new, sink=sink,
                   temperature=0.0 if temp is None else temp, top_p=1.0 if top_p is None else top_p, stop=stop,
                   seed=_int(sp.get("seed", sp.get("sampling_seed")), "seed"), room=room,
                   bootstrap_host=b.get("bootstrap_host"), bootstrap_port=port, stream=bool(b.get("stream")))

    def channel():
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        return q, (lambda ev: loop.call_soon_threadsafe(q.put_nowait, ev))

    async def run(request: Request, req: Req, q: asyncio.Queue):
        """Yield scheduler events; abort the request in the scheduler (as /abort_request does) once the client
        has gone. The check runs every DISCONNECT_CHECK_S whether or not tokens flow: a busy decode batch
        must not keep generating for clients that timed out."""
        state.scheduler.submit(req)
        next_check = time.monotonic() + DISCONNECT_CHECK_S
        try:
            while True:
                try:
                    ev = await asyncio.wait_for(q.get(), timeout=DISCONNECT_CHECK_S)
                except asyncio.TimeoutError:
                    ev = None
                if time.monotonic() >= next_check or ev is None:
                    next_check = time.monotonic() + DISCONNECT_CHECK_S
                    if await request.is_disconnected():
                        state.scheduler.abort(req.rid)
                        return
                if ev is None:
                    continue
                yield ev
                if ev[0] in ("done", "error"):
                    return
        except (asyncio.CancelledError, GeneratorExit):
            state.scheduler.abort(req.rid)
            raise

    def not_ready():
        return None if state.ready else _err(503, "server is starting", "ServiceUnavailable")

    # -- health / info ------------------------------------------------------------------------
    @app.get("/health")
    async def health():
        return not_ready() or Response(status_code=200)

    @app.get("/health_generate")
    async def health_generate(request: Request):
        if (r := not_ready()):
            return r
        q, sink = channel()
        # Like upstream: fake bootstrap (2.2.2.2, room 0), a local one-token run, never the transfer.
        req = Req(rid=f"HEALTH_CHECK_{uuid.uuid4().hex}", input_ids=tok.encode("health"), max_new_tokens=1,
                  sink=sink, health=True, room=0, bootstrap_host="2.2.2.2")
        async for ev in run(request, req, q):
            if ev[0] == "error":
                return _err(503, ev[2], "ServiceUnavailable")
        return Response(status_code=200)

    @app.get("/server_info")
    @app.get("/get_server_info")
    async def server_info():
        return state.server_info()

    @app.get("/model_info")
    @app.get("/get_model_info")
    async def model_info():
        return {"model_path": state.model_path, "tokenizer_path": state.model_path, "is_generation": True,
                "preferred_sampling_params": None, "weight_version": "default", "has_image_understanding": False,
                "has_audio_understanding": False, "model_type": "tiny-byte-lm", "architectures": ["TinyLM"]}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": args.served_model_name, "object": "model", "created": int(state.t0),
                                            "owned_by": "pdctl", "root": state.model_path,
                                            "max_model_len": state.context_length}]}

    @app.get("/metrics")
    async def metrics():
        if not args.enable_metrics:
            return PlainTextResponse("metrics are disabled (start with --enable-metrics)", status_code=404)
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.api_route("/abort_request", methods=["POST", "PUT"])
    async def abort_request(request: Request):
        try:
            b = await body_of(request)
        except BadRequest as e:
            return _err(400, str(e))
        rid, abort_all = b.get("rid"), bool(b.get("abort_all", False))
        if not abort_all and not isinstance(rid, str):
            return _err(400, "rid (string) or abort_all=true is required")
        state.scheduler.abort(rid, abort_all)
        return Response(status_code=200)

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache():
        if state.scheduler.num_active():
            return PlainTextResponse("Cache not flushed: there are running requests.", status_code=400)
        return PlainTextResponse("Cache flushed.", status_code=200)

    # -- generation ---------------------------------------------------------------------------
    def finish_reason_openai(reason: dict) -> str:
        return {"stop": "stop", "abort": "abort"}.get(reason.get("type"), "length")

    async def openai_like(request: Request, chat: bool):
        if (r := not_ready()):
            return r
        try:
            b = await body_of(request)
            if chat:
                msgs = b.get("messages")
                if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
                    raise BadRequest("messages must be a non-empty list of objects")
                try:
                    prompt = tok.apply_chat_template(msgs)
                except ValueError as e:
                    raise BadRequest(str(e))
            else:
                prompt = b.get("prompt")
                if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                    prompt = prompt[0]
                if not isinstance(prompt, str):
                    raise BadRequest("prompt must be a string")
            max_new = b.get("max_completion_tokens", b.get("max_tokens"))
            max_new = _int(max_new, "max_tokens", 1)
            q, sink = channel()
            req = make_req(b, tok.encode(prompt), max_new, sink, b)
        except BadRequest as e:
            return _err(400, str(e))
        stream = bool(b.get("stream", False))
        cid = ("chatcmpl-" if chat else "cmpl-") + req.rid
        model = b.get("model") or args.served_model_name
        created = int(time.time())
        obj = "chat.completion" if chat else "text_completion"

        def usage():
            n = len(req.out_ids)
            return {"prompt_tokens": len(req.input_ids), "completion_tokens": n,
                    "total_tokens": len(req.input_ids) + n}

        if not stream:
            reason = None
            async for ev in run(request, req, q):
                if ev[0] == "error":
                    return _err(ev[1] if ev[1] != 499 else 500, ev[2], "InternalServerError" if ev[1] >= 500 else "Aborted")
                if ev[0] == "done":
                    reason = ev[1]
            if reason is None:
                return _err(500, "request aborted", "Aborted")
            text = tok.decode(req.out_ids) if mode != "prefill" else ""
            fr = finish_reason_openai(reason)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": fr,
                       "matched_stop": reason.get("matched")} if chat else
                      {"index": 0, "text": text, "finish_reason": fr, "logprobs": None})
            if mode == "prefill":
                choice["finish_reason"] = "length"
            return {"id": cid, "object": obj, "created": created, "model": model, "choices": [choice], "usage": usage()}

        async def sse():
            sent = 0
            async for ev in run(request, req, q):
                if ev[0] == "error":
                    yield f"data: {json.dumps({'error': {'message': ev[2], 'code': ev[1]}})}\n\n"
                    return
                if ev[0] == "tokens" and mode != "prefill":
                    full = tok.decode(req.out_ids)
                    delta, sent = full[sent:], len(full)
                    c = ({"index": 0, "delta": {"role": "assistant", "content": delta}, "finish_reason": None} if chat
                         else {"index": 0, "text": delta, "finish_reason": None})
                    yield f"data: {json.dumps({'id': cid, 'object': obj + ('.chunk' if chat else ''), 'created': created, 'model': model, 'choices': [c]})}\n\n"
                if ev[0] == "done":
                    c = ({"index": 0, "delta": {}, "finish_reason": finish_reason_openai(ev[1])} if chat
                         else {"index": 0, "text": "", "finish_reason": finish_reason_openai(ev[1])})
                    yield f"data: {json.dumps({'id': cid, 'object': obj + ('.chunk' if chat else ''), 'created': created, 'model': model, 'choices': [c], 'usage': usage()})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await openai_like(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await openai_like(request, chat=False)

    @app.post("/generate")
    async def generate(request: Request):
        if (r := not_ready()):
            return r
        try:
            b = await body_of(request)
            sp = b.get("sampling_params") or {}
            if not isinstance(sp, dict):
                raise BadRequest("sampling_params must be an object")
            if isinstance(b.get("input_ids"), list):
                ids = b["input_ids"]
                if not all(isinstance(i, int) and 0 <= i < 259 for i in ids):
                    raise BadRequest("input_ids must be token ids in [0, 259)")
            elif isinstance(b.get("text"), str):
                ids = tok.encode(b["text"])
            else:
                raise BadRequest("text (string) or input_ids (list of ints) is required")
            q, sink = channel()
            req = make_req(b, ids, _int(sp.get("max_new_tokens"), "max_new_tokens", 1), sink, sp)
        except BadRequest as e:
            return _err(400, str(e))

        def payload(reason):
            return {"text": tok.decode(req.out_ids) if mode != "prefill" else "",
                    "output_ids": list(req.out_ids) if mode != "prefill" else [],
                    "meta_info": {"id": req.rid, "finish_reason": reason, "prompt_tokens": len(req.input_ids),
                                  "completion_tokens": len(req.out_ids) if mode != "prefill" else 0,
                                  "e2e_latency": time.monotonic() - req.created}}

        if not b.get("stream"):
            async for ev in run(request, req, q):
                if ev[0] == "error":
                    return _err(ev[1] if ev[1] != 499 else 500, ev[2], "InternalServerError")
                if ev[0] == "done":
                    return payload({"type": "length", "length": 0} if mode == "prefill" else ev[1])
            return _err(500, "request aborted", "Aborted")

        async def sse():
            async for ev in run(request, req, q):
                if ev[0] == "error":
                    yield f"data: {json.dumps({'error': {'message': ev[2], 'code': ev[1]}})}\n\n"
                    return
                if ev[0] == "tokens" and mode != "prefill":
                    yield f"data: {json.dumps(payload(None))}\n\n"
                if ev[0] == "done":
                    yield f"data: {json.dumps(payload({'type': 'length', 'length': 0} if mode == 'prefill' else ev[1]))}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    return app
