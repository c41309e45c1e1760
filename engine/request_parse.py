"""Validation shared by /generate and /v1/*: sampling parameters, bootstrap rooms per item, and the fields
the engine does not implement (a 400 naming the field, never ignored silently).

The router (sglang-router 0.3.2, PD) sends one bootstrap room per item of a batch (a list prompt, chat `n`)
as lists of bootstrap_host/port/room; for completions `n` and /generate `sampling_params.n` it sends one room
per prompt. Prefill and decode read the same body, so the rooms of choices 1..n-1 are derived from the
prompt's room the same way on both sides."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from fastapi.responses import JSONResponse


class BadRequest(Exception):
    pass


def err(code: int, msg: str, typ: str = "BadRequestError") -> JSONResponse:
    """SGLang's ErrorResponse, as its OpenAI endpoints (and its handler of a malformed query) answer an error."""
    return JSONResponse({"object": "error", "message": msg, "type": typ, "param": None, "code": code}, status_code=code)


def generate_err(code: int, msg: str) -> JSONResponse:
    """An error of SGLang's native /generate: {"error": {"message": ...}}."""
    return JSONResponse({"error": {"message": msg}}, status_code=code)


def as_int(v, name, lo=None, allow_none=True, hi=None):
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"{name} must be an integer, got {json.dumps(v)[:40]}")
    if lo is not None and v < lo or hi is not None and v > hi:
        raise BadRequest(f"{name} must be in [{lo}, {hi}], got {v}" if hi is not None else f"{name} must be >= {lo}")
    return v


def as_num(v, name, lo, hi):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise BadRequest(f"{name} must be a number in [{lo}, {hi}]")
    return float(v)


# field -> values that mean "off" (what a client or the router sends by default); anything else is refused
_OFF: tuple[object, ...] = (None, False, 0, 0.0, "", [], {})
UNSUPPORTED_OPENAI = {
    "tools": _OFF,
    "functions": _OFF,
    "function_call": (None, "none"),
    "tool_choice": (None, "none"),
    "logit_bias": _OFF,
    "frequency_penalty": _OFF,
    "presence_penalty": _OFF,
    "repetition_penalty": (None, 1, 1.0),
    "top_k": (None, -1, 0),
    "min_p": _OFF,
    "min_tokens": _OFF,
    "suffix": (None, ""),
    "audio": _OFF,
    "modalities": (None, ["text"]),
    "prediction": _OFF,
    "regex": _OFF,
    "ebnf": _OFF,
    "json_schema": _OFF,
    "structural_tag": _OFF,
    "lora_path": _OFF,
    "return_hidden_states": _OFF,
    "continue_final_message": _OFF,
    "chat_template_kwargs": _OFF,
    "reasoning_effort": (None,),
    "parallel_tool_calls": (None, True, False),
}
UNSUPPORTED_SAMPLING = {
    "top_k": (None, -1, 0),
    "min_p": _OFF,
    "frequency_penalty": _OFF,
    "presence_penalty": _OFF,
    "repetition_penalty": (None, 1, 1.0),
    "min_new_tokens": _OFF,
    "logit_bias": _OFF,
    "regex": _OFF,
    "ebnf": _OFF,
    "json_schema": _OFF,
    "structural_tag": _OFF,
    "custom_params": _OFF,
    "stop_regex": _OFF,
}
UNSUPPORTED_GENERATE = {
    "image_data": _OFF,
    "audio_data": _OFF,
    "video_data": _OFF,
    "input_embeds": _OFF,
    "lora_path": _OFF,
    "return_hidden_states": _OFF,
    "return_entropy": _OFF,
    "return_bytes": _OFF,
    "background": _OFF,
    "custom_logit_processor": _OFF,
    "token_ids_logprob": _OFF,
    "session_params": _OFF,
    "logprob_start_len": (None, -1),
}


def refuse_unsupported(b: dict, spec: dict, where: str = "") -> None:
    for k, ok in spec.items():
        v = b.get(k)
        if not any(v == o and type(v) is type(o) or v is o for o in ok):
            raise BadRequest(f"{where}{k} is not supported by this engine (got {json.dumps(v)[:60]})")


def response_format_text(b: dict) -> None:
    rf = b.get("response_format")
    if rf is not None and not (isinstance(rf, dict) and rf.get("type") == "text"):
        raise BadRequest(
            f'response_format {json.dumps(rf)[:60]} is not supported by this engine (only {{"type": "text"}})'
        )


def _stop_list(stop, name="stop"):
    stop = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest(f"{name} must be a string or a list of strings")
    return stop


def sampling_kwargs(sp: dict) -> dict:
    """Req fields from OpenAI fields or /generate sampling_params (same names where they overlap)."""
    ids = sp.get("stop_token_ids") or []
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise BadRequest("stop_token_ids must be a list of token ids")
    temp = as_num(sp.get("temperature"), "temperature", 0.0, 100.0)
    top_p = as_num(sp.get("top_p"), "top_p", 0.0, 1.0)
    # SGLang's defaults (SamplingParams, and the OpenAI requests without a model generation_config): temperature
    # 1.0, so a request that names none samples; temperature 0 is greedy
    return {
        "temperature": 1.0 if temp is None else temp,
        "top_p": 1.0 if top_p is None else top_p,
        "stop": _stop_list(sp.get("stop")),
        "stop_token_ids": ids,
        "seed": as_int(sp.get("seed", sp.get("sampling_seed")), "seed"),
    }


def _derive_room(room: int, j: int) -> int:
    # choice j of a prompt the router gave one room: both sides compute the same room from the same body
    return (room + j * 0x9E3779B97F4A7C15) % (1 << 63)


@dataclass(frozen=True)
class _PerItem:
    """A bootstrap field's values: one per (prompt, choice) when per_item, else one per prompt."""

    values: list
    per_item: bool


def _per_item(v, m: int, N: int, name: str) -> _PerItem:
    """A scalar or a list of bootstrap values, as one per prompt or one per (prompt, choice)."""
    if not isinstance(v, list):
        if m != 1:
            raise BadRequest(f"{name} must be a list of {m} for a batch of {m} prompts")
        return _PerItem([v], False)
    if len(v) == N:
        return _PerItem(v, True)
    if len(v) == m:
        return _PerItem(v, False)
    raise BadRequest(f"{name} has {len(v)} entries for {m} prompt(s) x n")


def items(
    b: dict,
    prompts: list[list[int]],
    n: int,
    max_new,
    sk: dict,
    *,
    mode: str,
    default_port: int,
    context_length: int,
    logprob: tuple[bool, int],
) -> list[dict]:
    """One Req's keyword arguments (without sink) per (prompt i, choice j), in SGLang's order i * n + j."""
    m, N = len(prompts), len(prompts) * n
    max_new = 128 if max_new is None else max_new
    bootstrap: tuple[_PerItem, _PerItem, _PerItem] | None = None  # rooms, hosts, ports
    if mode != "null":
        if b.get("bootstrap_room") is None or b.get("bootstrap_host") is None:
            raise BadRequest("bootstrap_host and bootstrap_room are required in disaggregation mode")
        bootstrap = (
            _per_item(b["bootstrap_room"], m, N, "bootstrap_room"),
            _per_item(b["bootstrap_host"], m, N, "bootstrap_host"),
            _per_item(b.get("bootstrap_port"), m, N, "bootstrap_port"),
        )
        for r in bootstrap[0].values:
            as_int(r, "bootstrap_room", 0, allow_none=False)
    rid = b.get("rid")
    if rid is not None and not (
        isinstance(rid, str) or isinstance(rid, list) and len(rid) == N and all(isinstance(x, str) for x in rid)
    ):
        raise BadRequest("rid must be a string (or a list of one string per item)")
    out = []
    for i, ids in enumerate(prompts):
        if not ids:
            raise BadRequest("prompt is empty")
        if len(ids) + max_new > context_length:
            raise BadRequest(
                f"prompt ({len(ids)} tokens) + max tokens ({max_new}) exceeds the context length {context_length}"
            )
        for j in range(n):
            k = i * n + j
            kw = dict(sk, input_ids=ids, max_new_tokens=max_new, return_logprob=logprob[0], top_logprobs_num=logprob[1])
            if sk["seed"] is not None:
                kw["seed"] = sk["seed"] + j  # choices of one seeded request differ, and stay reproducible
            kw["rid"] = rid[k] if isinstance(rid, list) else f"{rid}_{k}" if rid and N > 1 else rid or uuid.uuid4().hex
            if bootstrap is not None:
                rooms, hosts, ports = bootstrap
                room = rooms.values[k] if rooms.per_item else _derive_room(rooms.values[i], j)
                host = hosts.values[k if hosts.per_item else i]
                port = ports.values[k if ports.per_item else i]
                # null means the server's own bootstrap port; a port no socket can have is refused before any work
                port = default_port if port is None else as_int(port, "bootstrap_port", 1, hi=65535)
                kw.update(room=room, bootstrap_host=host, bootstrap_port=port)
            out.append(kw)
    return out
