"""The OpenAI-compatible surface (issue 16 item 1) with the official `openai` SDK through the real sglang-router
in PD mode (real prefill + decode, real NIXL). Outputs are checked against the engine's model run locally (greedy:
a request compared with it says temperature 0, since SGLang samples at 1.0 by default)."""

from __future__ import annotations

import concurrent.futures as cf
import json
import random

import httpx
import openai
import pytest
import torch

from engine.model import TinyLM
from engine.tokenizer import ByteTokenizer
from tests.engine.stack import Stack

pytestmark = pytest.mark.engine
tok = ByteTokenizer()
MODEL = TinyLM()
MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def stack():
    with Stack().running() as s:
        yield s


@pytest.fixture(scope="module")
def client(stack):
    with openai.OpenAI(base_url=f"{stack.router}/v1", api_key="none", max_retries=0, timeout=30) as c:
        yield c


def greedy(text: str, n: int) -> tuple[str, list[torch.Tensor]]:
    """The reference: greedy text and the log-distribution each token was picked from."""
    ids = tok.encode(text)
    cache = MODEL.new_cache(len(ids))
    logits = MODEL.extend(ids, cache)
    slots = MODEL.new_slots(1)  # the engine's decode math: the prompt's last window in one batch slot
    slots.join(cache.kv[:, :, max(0, len(ids) - MODEL.cfg.window) : len(ids)], len(ids))
    out, dists = [], []
    for _ in range(n):
        lp = torch.log_softmax(logits + MODEL.mask, dim=-1)
        out.append(int(lp.argmax()))
        dists.append(lp)
        logits = MODEL.decode([out[-1]], slots)[0]
    return tok.decode(out), dists


CHAT_PROMPT = tok.apply_chat_template(MSGS)


def test_n_choices_chat_and_completions(client):
    r = client.chat.completions.create(model="tiny", messages=MSGS, n=2, max_tokens=8, temperature=1.0, seed=7)
    texts = [c.message.content for c in r.choices]
    assert [c.index for c in r.choices] == [0, 1] and all(len(t) == 8 for t in texts)
    assert texts[0] != texts[1]  # each choice its own generation
    one = client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=8, temperature=1.0, seed=7)
    assert one.choices[0].message.content == texts[0]  # choice 0 is the seeded single run: reproducible
    assert r.usage.completion_tokens == 16 and r.usage.prompt_tokens == len(CHAT_PROMPT)
    c = client.completions.create(model="tiny", prompt="hello", n=3, max_tokens=6, temperature=0)
    assert [ch.text for ch in c.choices] == [greedy("hello", 6)[0]] * 3


def test_list_prompts_completions_and_generate(client, stack):
    c = client.completions.create(model="tiny", prompt=["hello", "world"], n=2, max_tokens=5, temperature=0)
    want = [greedy("hello", 5)[0]] * 2 + [greedy("world", 5)[0]] * 2
    assert [ch.index for ch in c.choices] == [0, 1, 2, 3] and [ch.text for ch in c.choices] == want
    r = httpx.post(
        f"{stack.router}/generate",
        timeout=30,
        json={
            "input_ids": [tok.encode("hello"), tok.encode("world")],
            "sampling_params": {"max_new_tokens": 5, "temperature": 0},
        },
    )
    assert r.status_code == 200, r.text
    assert [x["text"] for x in r.json()] == [want[0], want[2]]
    # the router refuses a `text` list itself; the engine takes it as the router would send it (a room per item)
    body = {
        "text": ["hello", "world"],
        "sampling_params": {"max_new_tokens": 5, "temperature": 0},
        "bootstrap_host": ["127.0.0.1"] * 2,
        "bootstrap_port": [stack.bp] * 2,
        "bootstrap_room": [random.getrandbits(63) for _ in range(2)],
    }
    with cf.ThreadPoolExecutor(2) as ex:
        p, d = (ex.submit(httpx.post, f"{u}/generate", json=body, timeout=30) for u in (stack.prefill, stack.decode))
        assert p.result().status_code == 200, p.result().text
        assert [x["text"] for x in d.result().json()] == [want[0], want[2]]


def test_stop_strings_and_stop_token_ids_are_trimmed(client):
    ref = greedy("hello", 12)[0]
    s = ref[3]
    cut = ref[: ref.index(s)]
    c = client.completions.create(model="tiny", prompt="hello", max_tokens=12, stop=[s], temperature=0)
    ch = c.choices[0]
    assert (ch.text, ch.finish_reason, ch.model_extra["matched_stop"]) == (cut, "stop", s)
    c = client.completions.create(
        model="tiny", prompt="hello", max_tokens=12, temperature=0, extra_body={"stop_token_ids": [ord(s)]}
    )
    assert (c.choices[0].text, c.choices[0].model_extra["matched_stop"]) == (cut, ord(s))
    c = client.completions.create(
        model="tiny", prompt="hello", max_tokens=12, stop=s, temperature=0, extra_body={"no_stop_trim": True}
    )
    assert c.choices[0].text == cut + s
    # a two-character stop streamed: a tail that may begin the stop is held back, so the deltas add up to the
    # trimmed text
    chat_ref = greedy(CHAT_PROMPT, 12)[0]
    stop2 = chat_ref[4:6]
    chunks = list(
        client.chat.completions.create(
            model="tiny", messages=MSGS, max_tokens=12, stop=stop2, stream=True, temperature=0
        )
    )
    assert "".join(k.choices[0].delta.content or "" for k in chunks) == chat_ref[: chat_ref.index(stop2)]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_logprobs_come_from_the_model_distribution(client, stack):
    ref, dists = greedy(CHAT_PROMPT, 4)
    r = client.chat.completions.create(
        model="tiny", messages=MSGS, max_tokens=4, logprobs=True, top_logprobs=3, temperature=0
    )
    content = r.choices[0].logprobs.content
    assert "".join(e.token for e in content) == ref
    for e, d in zip(content, dists):  # the first entry was computed at prefill and travelled to decode
        assert e.logprob == pytest.approx(float(d.max()), abs=1e-4)
        assert e.logprob == max(t.logprob for t in e.top_logprobs) and len(e.top_logprobs) == 3
        assert [t.logprob for t in e.top_logprobs] == pytest.approx([float(v) for v in d.topk(3).values], abs=1e-4)
    c = client.completions.create(model="tiny", prompt="hello", max_tokens=3, logprobs=2, temperature=0)
    lp = c.choices[0].logprobs
    hello, hd = greedy("hello", 3)
    assert lp.tokens == list(hello) and lp.text_offset == [0, 1, 2]
    assert lp.token_logprobs == pytest.approx([float(d.max()) for d in hd], abs=1e-4)
    assert [len(t) for t in lp.top_logprobs] == [2, 2, 2]
    g = httpx.post(
        f"{stack.router}/generate",
        timeout=30,
        json={
            "text": "hello",
            "sampling_params": {"max_new_tokens": 3, "temperature": 0},
            "return_logprob": True,
            "return_text_in_logprobs": True,
        },
    ).json()
    assert [[t, x] for _, t, x in g["meta_info"]["output_token_logprobs"]] == [[ord(ch), ch] for ch in hello]
    assert [v for v, _, _ in g["meta_info"]["output_token_logprobs"]] == pytest.approx(lp.token_logprobs, abs=1e-6)


def test_echo_prepends_the_prompt(client):
    c = client.completions.create(model="tiny", prompt="hello", max_tokens=4, echo=True, temperature=0)
    assert c.choices[0].text == "hello" + greedy("hello", 4)[0]
    chunks = list(
        client.completions.create(model="tiny", prompt="hello", max_tokens=4, echo=True, stream=True, temperature=0)
    )
    assert "".join(k.choices[0].text for k in chunks if k.choices) == "hello" + greedy("hello", 4)[0]


def test_models_retrieve(stack):
    # sglang-router 0.3.2 answers /v1/models itself and has no /v1/models/{id} route (an empty 404): the SDK
    # retrieves from the engine directly
    assert httpx.get(f"{stack.router}/v1/models/tiny", timeout=5).status_code == 404
    with openai.OpenAI(base_url=f"{stack.decode}/v1", api_key="none", max_retries=0, timeout=10) as c:
        m = c.models.retrieve("tiny")
        assert (m.id, m.object, m.model_extra["max_model_len"]) == ("tiny", "model", 32768)
        with pytest.raises(openai.NotFoundError) as e:
            c.models.retrieve("no-such-model")
    assert "The model 'no-such-model' does not exist" in str(e.value)


def test_usage_chunk_with_include_usage_only(client):
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=MSGS,
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
            temperature=0,
        )
    )
    last, fin = chunks[-1], chunks[-2]
    assert last.choices == [] and last.usage.completion_tokens == 5
    assert fin.choices[0].finish_reason == "length" and fin.usage is None
    assert "".join(k.choices[0].delta.content or "" for k in chunks[:-1]) == greedy(CHAT_PROMPT, 5)[0]
    plain = list(client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=5, stream=True))
    assert all(k.usage is None for k in plain) and plain[-1].choices[0].finish_reason == "length"


def test_generate_stream_every_event_is_new(stack):
    with httpx.stream(
        "POST",
        f"{stack.router}/generate",
        timeout=30,
        json={"text": "hello", "sampling_params": {"max_new_tokens": 6, "temperature": 0}, "stream": True},
    ) as r:
        lines = [x for x in r.iter_lines() if x.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    evs = [json.loads(x[6:]) for x in lines[:-1]]
    ref = greedy("hello", 6)[0]
    assert [e["text"] for e in evs] == [ref[:i] for i in range(1, 7)]  # cumulative, one new token per event
    assert [e["meta_info"]["finish_reason"] for e in evs] == [None] * 5 + [{"type": "length", "length": 6}]


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
        ({"logit_bias": {"65": 5}}, "logit_bias"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
    ],
)
def test_unsupported_fields_are_refused_by_name(client, extra, field):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=2, **extra)
    assert field in str(e.value) and "not supported" in str(e.value)
