"""OpenAI-compatible /v1/*: models, chat completions and completions as SGLang serves them (n choices,
list prompts, stop trimming with matched_stop, logprobs, echo, the usage chunk of
stream_options.include_usage, a chat stream in SGLang's chunk sequence). Fields the engine cannot honour are
refused with a 400 naming them."""

from __future__ import annotations

import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from engine import request_parse as rp
from engine.api_common import Api, Out, sse, sse_error, tok
from engine.events import Done, Failed, Tokens

FINISH = {"stop": "stop", "abort": "abort"}


def _finish(reason: dict | None) -> str:
    return FINISH.get(str((reason or {}).get("type")), "length")


def _tokbytes(i: int) -> list[int]:
    return [i] if 0 <= i < 256 else []


def _chat_lp(ids: list[int], lps: list) -> list[dict]:
    out = []
    for i, e in zip(ids, lps):
        lp, top = e if e is not None else (None, [])
        out.append(
            {
                "token": tok.decode([i]),
                "bytes": _tokbytes(i),
                "logprob": lp,
                "top_logprobs": [{"token": tok.decode([t]), "bytes": _tokbytes(t), "logprob": v} for t, v in top],
            }
        )
    return out


def _cmpl_lp(ids: list[int], lps: list, offset: int) -> dict:
    toks, offs = [tok.decode([i]) for i in ids], []
    for t in toks:
        offs.append(offset)
        offset += len(t)
    return {
        "tokens": toks,
        "token_logprobs": [e[0] if e else None for e in lps],
        "top_logprobs": [{tok.decode([t]): v for t, v in e[1]} if e else None for e in lps],
        "text_offset": offs,
    }


def _prompts(p) -> list:
    """-> list of prompts, each a str or a list of token ids."""
    if isinstance(p, str):
        return [p]
    if isinstance(p, list) and p and all(isinstance(x, str) for x in p):
        return p
    if isinstance(p, list) and p and all(isinstance(x, int) and not isinstance(x, bool) for x in p):
        return [p]
    if isinstance(p, list) and p and all(isinstance(x, list) for x in p):
        return p
    raise rp.BadRequest("prompt must be a string, a list of strings, a list of token ids or a list of such lists")


def add_openai_routes(app: FastAPI, api: Api) -> None:
    args, state, mode = api.args, api.state, api.mode

    def model_card():
        """SGLang's ModelCard: the served name is also its root; no parent (LoRA adapters only)."""
        return {
            "id": args.served_model_name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "sglang",
            "root": args.served_model_name,
            "parent": None,
            "max_model_len": state.context_length,
        }

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str):
        if model_id != args.served_model_name:  # SGLang 0.5.23's body for it, OpenAI's own error object
            return JSONResponse(
                {
                    "error": {
                        "message": f"The model '{model_id}' does not exist",
                        "type": "invalid_request_error",
                        "param": "model",
                        "code": "model_not_found",
                    }
                },
                status_code=404,
            )
        return model_card()

    async def openai_like(request: Request, chat: bool):
        if r := api.not_ready():
            return r
        try:
            b = await api.body_of(request)
            rp.refuse_unsupported(b, rp.UNSUPPORTED_OPENAI)
            rp.response_format_text(b)
            n = rp.as_int(b.get("n"), "n", 1, hi=64) or 1
            if b.get("best_of") not in (None, n):
                raise rp.BadRequest("best_of other than n is not supported by this engine")
            echo = False
            if chat:
                msgs = b.get("messages")
                if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
                    raise rp.BadRequest("messages must be a non-empty list of objects")
                try:
                    prompts = [tok.apply_chat_template(msgs)]
                except ValueError as e:
                    raise rp.BadRequest(str(e))
                lp = b.get("logprobs") or False
                if not isinstance(lp, bool):
                    raise rp.BadRequest("logprobs must be a boolean")
                k = rp.as_int(b.get("top_logprobs"), "top_logprobs", 0, hi=20) or 0
                if k and not lp:
                    raise rp.BadRequest("top_logprobs requires logprobs to be true")
                logprob = (lp, k)
            else:
                prompts = _prompts(b.get("prompt"))
                k = rp.as_int(b.get("logprobs"), "logprobs", 0, hi=20)
                logprob = (k is not None, k or 0)
                echo = bool(b.get("echo", False))
                if echo and k is not None:
                    raise rp.BadRequest("echo with logprobs is not supported by this engine (prompt logprobs)")
            ids = [tok.encode(p) if isinstance(p, str) else p for p in prompts]
            if not all(isinstance(i, int) and 0 <= i < tok.vocab_size for row in ids for i in row):
                raise rp.BadRequest(f"prompt token ids must be in [0, {tok.vocab_size})")
            max_new = rp.as_int(b.get("max_completion_tokens", b.get("max_tokens")), "max_tokens", 1)
            so = b.get("stream_options") or {}
            if not isinstance(so, dict):
                raise rp.BadRequest("stream_options must be an object")
            q, outs = api.build(b, ids, n, max_new, rp.sampling_kwargs(b), logprob, bool(b.get("no_stop_trim")))
        except rp.BadRequest as e:
            return rp.err(400, str(e))
        cid = outs[0].req.rid  # as SGLang: the answer's id is the (first) request id, the one /abort_request takes
        model = b.get("model") or args.served_model_name
        created = int(time.time())
        obj = "chat.completion" if chat else "text_completion"
        pre = mode == "prefill"
        echo_of = [tok.decode(ids[k // n]) if echo else "" for k in range(len(outs))]

        def usage():
            """SGLang's UsageInfo, every field in its order (no prefix cache, no reasoning parser: the details null)."""
            p = sum(len(x) for x in ids)  # as SGLang: a prompt counts once whatever n is
            c = 0 if pre else sum(len(o.ids) for o in outs)
            return {
                "prompt_tokens": p,
                "total_tokens": p + c,
                "completion_tokens": c,
                "prompt_tokens_details": None,
                "reasoning_tokens": 0,
                "completion_tokens_details": None,
            }

        def choice(k: int, o: Out, text: str, lps: list, final: bool, offset: int) -> dict:
            c: dict = {"index": k}
            if chat:  # a chat stream's chunks are chat_chunk's
                c["message"] = {"role": "assistant", "content": text, "reasoning_content": None}
            else:
                c["text"] = text
            ids_ = o.ids[len(o.ids) - len(lps) :]
            c["logprobs"] = (
                None if not logprob[0] else ({"content": _chat_lp(ids_, lps)} if chat else _cmpl_lp(ids_, lps, offset))
            )
            c["finish_reason"] = _finish(o.reason) if final else None
            if final:
                c["matched_stop"] = None if pre else (o.reason or {}).get("matched")
            return c

        stream = bool(b.get("stream", False))
        if not stream:
            if (failed := await api.collect(request, outs, q)) is not None:
                return failed
            ch = [
                choice(k, o, echo_of[k] + ("" if pre else o.text()), [] if pre else o.lps, True, len(echo_of[k]))
                for k, o in enumerate(outs)
            ]
            # SGLang's metadata: the weight version of the first choice's tokens (one version here, never updated)
            end = 0 if pre else len(outs[0].ids)
            metadata = {
                "weight_version": "default",
                "weight_versions": [{"version": "default", "start": 0, "end": end}],
            }
            return JSONResponse(
                {
                    "id": cid,
                    "object": obj,
                    "created": created,
                    "model": model,
                    "choices": ch,
                    "usage": usage(),
                    "metadata": metadata,
                }
            )  # plain JSON: no jsonable_encoder walk

        chunk_obj = obj + ".chunk" if chat else obj
        started = set()

        def chunk(choices, **extra):
            return sse(
                {"id": cid, "object": chunk_obj, "created": created, "model": model, "choices": choices, **extra}
            )

        def chat_chunk(k: int, delta: dict, lps: list | None = None, reason: str | None = None, matched=None):
            """One choice of a chat stream as SGLang's StreamChoice serialises it: every field present, and the delta
            with its reasoning_content (null) first."""
            lp = None
            if lps and logprob[0]:
                o = outs[k]
                lp = {"content": _chat_lp(o.ids[len(o.ids) - len(lps) :], lps)}
            return chunk(
                [
                    {
                        "index": k,
                        "delta": {"reasoning_content": None, **delta},
                        "logprobs": lp,
                        "finish_reason": reason,
                        "matched_stop": matched,
                    }
                ]
            )

        async def chat_events():
            """SGLang 0.5.23's sequence (serving_chat.py, _generate_chat_stream): per choice, a first chunk with only
            the role (and empty content) when its first output arrives, then a chunk per output that adds text (with
            that text's logprobs); after every choice has ended, one chunk per choice with only its finish_reason
            and matched_stop, in the order they ended; then the usage chunk (stream_options.include_usage); then
            [DONE]."""
            ended: list[int] = []
            carried: dict[int, list] = {}  # logprobs of tokens whose text is held back (a possible stop string)
            async for k, ev in api.run(request, outs, q):
                o = outs[k]
                if isinstance(ev, Failed):
                    yield sse_error(ev)
                    return
                if isinstance(ev, Tokens) and (pre or o.ending):
                    continue  # prefill streams no text; an ending token's text is final only with its reason
                if k not in started:
                    started.add(k)
                    yield chat_chunk(k, {"role": "assistant", "content": ""})
                d, lps = ("", []) if pre else o.delta()
                lps = carried.pop(k, []) + lps
                if d:
                    yield chat_chunk(k, {"content": d}, lps)
                elif lps and not isinstance(ev, Done):
                    carried[k] = lps  # as SGLang, logprobs travel with text: a last step without text drops them
                if isinstance(ev, Done):
                    ended.append(k)
            for k in ended:
                reason = outs[k].reason or {}
                yield chat_chunk(k, {}, reason=_finish(reason), matched=None if pre else reason.get("matched"))
            if so.get("include_usage"):
                yield chunk([], usage=usage())
            yield "data: [DONE]\n\n"

        async def events():
            async for k, ev in api.run(request, outs, q):
                o = outs[k]
                if isinstance(ev, Failed):
                    yield sse_error(ev)
                    return
                final = isinstance(ev, Done)
                if pre or (isinstance(ev, Tokens) and o.ending):
                    if not final:
                        continue  # prefill streams nothing; an ending token goes out with its finish reason
                d, lps = ("", []) if pre else o.delta()
                if not final and not d and not lps:
                    continue
                first = k not in started
                started.add(k)
                offset = len(echo_of[k]) + o.sent_chars - len(d)
                if first:
                    d = echo_of[k] + d
                yield chunk([choice(k, o, d, lps, final, offset)])
            if so.get("include_usage"):
                yield chunk([], usage=usage())
            yield "data: [DONE]\n\n"

        return StreamingResponse(chat_events() if chat else events(), media_type="text/event-stream")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await openai_like(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await openai_like(request, chat=False)
