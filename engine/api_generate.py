"""SGLang's native /generate: text or input_ids, a string or a batch (a list: one result per item, in
order), sampling_params.n choices per prompt, return_logprob with meta_info.output_token_logprobs as
[logprob, token_id, text|None]. A stream sends cumulative text and ids (SGLang's default, no
--incremental-streaming-output); every event says something new and the last one carries finish_reason."""

from __future__ import annotations

import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from engine import request_parse as rp
from engine.api_common import Api, Out, sse, sse_error, tok
from engine.events import Done, Failed, Tokens

PREFILL_REASON = {"type": "length", "length": 0}


def _prompts(b: dict) -> tuple[list[list[int]], bool]:
    """-> (token ids per prompt, batch?)"""
    if b.get("input_ids") is not None:
        v = b["input_ids"]
        batch = isinstance(v, list) and bool(v) and all(isinstance(x, list) for x in v)
        rows = v if batch else [v]
        for row in rows:
            if not isinstance(row, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < tok.vocab_size for i in row
            ):
                raise rp.BadRequest(f"input_ids must be token ids in [0, {tok.vocab_size}) (or a list of such lists)")
        return rows, batch
    v = b.get("text")
    if isinstance(v, str):
        return [tok.encode(v)], False
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return [tok.encode(x) for x in v], True
    raise rp.BadRequest("text (a string or a list of strings) or input_ids (a list of ints, or of lists) is required")


def add_generate_routes(app: FastAPI, api: Api) -> None:
    mode = api.mode

    @app.post("/generate")
    async def generate(request: Request):
        if r := api.not_ready():
            return r
        try:
            b = await api.body_of(request)
            sp = b.get("sampling_params") or {}
            if not isinstance(sp, dict):
                raise rp.BadRequest("sampling_params must be an object (one for the whole batch)")
            rp.refuse_unsupported(b, rp.UNSUPPORTED_GENERATE)
            rp.refuse_unsupported(sp, rp.UNSUPPORTED_SAMPLING, "sampling_params.")
            prompts, batch = _prompts(b)
            n = rp.as_int(sp.get("n"), "sampling_params.n", 1, hi=64) or 1
            want_lp = b.get("return_logprob", False)
            if not isinstance(want_lp, bool):
                raise rp.BadRequest("return_logprob must be a boolean (one for the whole batch)")
            top_k = rp.as_int(b.get("top_logprobs_num"), "top_logprobs_num", 0, hi=20) or 0
            q, outs = api.build(
                b,
                prompts,
                n,
                rp.as_int(sp.get("max_new_tokens"), "max_new_tokens", 1),
                rp.sampling_kwargs(sp),
                (want_lp, top_k),
                bool(sp.get("no_stop_trim", False)),
            )
        except rp.BadRequest as e:
            return rp.generate_err(400, str(e))
        with_text = bool(b.get("return_text_in_logprobs", False))
        many = batch or n > 1

        def payload(o: Out, k: int, reason):
            pre = mode == "prefill"
            meta = {
                "id": o.req.rid,
                "finish_reason": PREFILL_REASON if pre and reason else reason,
                "prompt_tokens": len(o.req.input_ids),
                "completion_tokens": 0 if pre else len(o.ids),
                "e2e_latency": time.monotonic() - o.req.created,
            }
            if want_lp and not pre:
                lps, tops = [], []
                for i, entry in zip(o.ids, o.lps):
                    lp, top = entry if entry is not None else (None, [])
                    lps.append([lp, i, tok.decode([i]) if with_text else None])
                    tops.append([[tl, ti, tok.decode([ti]) if with_text else None] for ti, tl in top])
                meta["output_token_logprobs"] = lps
                if top_k:
                    meta["output_top_logprobs"] = tops
            d: dict[str, object] = {
                "text": "" if pre else o.text(),
                "output_ids": [] if pre else list(o.ids),
                "meta_info": meta,
            }
            if many:
                d["index"] = k
            return d

        if not b.get("stream"):
            if (failed := await api.collect(request, outs, q, native=True)) is not None:
                return failed
            res = [payload(o, k, o.reason) for k, o in enumerate(outs)]
            # plain JSON already: skip FastAPI's jsonable_encoder walk of every field (same bytes)
            return JSONResponse(res if many else res[0])

        async def events():
            async for k, ev in api.run(request, outs, q):
                o = outs[k]
                if isinstance(ev, Failed):
                    yield sse_error(ev)
                    return
                if isinstance(ev, Tokens) and mode != "prefill" and not o.ending:
                    yield sse(payload(o, k, None))
                if isinstance(ev, Done):
                    yield sse(payload(o, k, o.reason))
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")
