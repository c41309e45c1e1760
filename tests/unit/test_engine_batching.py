"""The bundled engine's batching, on the real model: batched decode over DecodeSlots equals each request decoded
alone and a naive full-recompute forward; a prefill step holds chunks of several requests; the unified scheduler's
batched output equals the greedy reference."""

from __future__ import annotations

import json
import math
import types

import pytest
import torch
import torch.nn.functional as F

from engine.events import Done, Failed, Tokens
from engine.metrics import Metrics
from engine.model import ModelConfig, TinyLM
from engine.req import Req
from engine.scheduler import Scheduler
from engine.scheduler_stats import TokenWindow

# A small window keeps the ring's wrap-around cheap to reach.
CFG = ModelConfig(window=64)


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    return TinyLM(CFG)


def prompt(n: int, salt: int = 0) -> list[int]:
    return [32 + (i * 7 + salt * 13) % 90 for i in range(n)]


def naive_logits(m: TinyLM, ids: list[int]) -> torch.Tensor:
    """Last-position logits by recomputing the whole sequence with a plain sliding-window mask (no cache)."""
    c, p = m.cfg, m.p
    n, H, KV, dh = len(ids), c.n_heads, c.n_kv_heads, c.head_dim
    pos = torch.arange(n)
    x = p["emb"][torch.tensor(ids)] + m._pos(pos)
    allow = (pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - c.window)
    for i in range(c.n_layers):
        q, k, v = (m._norm(x) @ p[f"l{i}.wqkv"]).split([c.d_model, c.kv_dim, c.kv_dim], dim=-1)
        # query head h reads key/value head h // (H // KV)
        k, v = (t.view(n, KV, dh).repeat_interleave(H // KV, dim=1) for t in (k, v))
        s = q.view(n, H, dh).transpose(0, 1) @ k.permute(1, 2, 0) / math.sqrt(dh)
        a = torch.softmax(s.masked_fill(~allow, float("-inf")), -1) @ v.transpose(0, 1)
        x = x + a.transpose(0, 1).reshape(n, c.d_model) @ p[f"l{i}.wo"]
        x = x + F.gelu(m._norm(x) @ p[f"l{i}.w1"]) @ p[f"l{i}.w2"]
    return (m._norm(x[-1:]) @ p["head"])[0]


def joined(m: TinyLM, prompts: list[list[int]], max_slots: int = 8):
    """Prefill each prompt (chunks of 50) and join it to one DecodeSlots; returns (slots, first tokens)."""
    slots, firsts = m.new_slots(max_slots), []
    for ids in prompts:
        cache = m.new_cache(len(ids))
        for s in range(0, len(ids), 50):
            lg = m.extend(ids[s : s + 50], cache)
        firsts.append(m.sample(lg, 0.0))
        n = len(ids)
        slots.join(cache.kv[:, :, max(0, n - CFG.window) : n], n)
    return slots, firsts


def test_batched_decode_equals_single_and_naive(model):
    # lengths below, at and past the window, so some rings have wrapped and one is nearly empty
    prompts = [prompt(n, k) for k, n in enumerate((3, 64, 150, 41))]
    batch, toks = joined(model, prompts)
    seqs = [list(p) + [t] for p, t in zip(prompts, toks)]
    for _ in range(70):  # past another wrap of the 64-token ring
        logits = model.decode([s[-1] for s in seqs], batch)
        for b, s in enumerate(seqs):
            s.append(int(torch.argmax(logits[b] + model.mask)))
    for b, p in enumerate(prompts):
        alone, out = joined(model, [p], 1)
        for _ in range(70):
            out.append(int(torch.argmax(model.decode([out[-1]], alone)[0] + model.mask)))
        assert seqs[b][len(p) :] == out, f"request {b}: batched decode differs from the same request alone"
    # the ring's math (wrapped twice) against a from-scratch forward of each whole sequence: the last step's logits
    for b, s in enumerate(seqs):
        ref = naive_logits(model, s[:-1])
        assert torch.allclose(logits[b], ref, atol=1e-4), (b, float((logits[b] - ref).abs().max()))


def test_leave_moves_the_last_slot_and_the_rest_continue(model):
    prompts = [prompt(n, k) for k, n in enumerate((10, 90, 30))]
    slots, toks = joined(model, prompts)
    slots.leave(0)  # request 2 now sits in slot 0, request 1 stays in slot 1
    assert slots.n == 2 and slots.pos[:2].tolist() == [30, 90]
    got = model.decode([toks[2], toks[1]], slots)
    for b, k in enumerate((2, 1)):
        alone, _ = joined(model, [prompts[k]], 1)
        assert torch.allclose(got[b], model.decode([toks[k]], alone)[0], atol=1e-5)


def test_scripted_decode_step_equals_eager_bit_for_bit(model):
    """decode runs as one TorchScript call; decode_eager is the same math in eager torch: logits, ring buffers and
    positions must agree exactly while requests join and leave and the rings wrap."""
    g = torch.Generator().manual_seed(5)
    slots = {f: model.new_slots(8) for f in ("script", "eager")}
    step = {"script": model.decode, "eager": model.decode_eager}
    for t in range(160):
        if t % 20 == 0 and slots["script"].n < 8:
            n = 3 + t
            tail = torch.randn(CFG.n_layers, 2, min(n, CFG.window), CFG.kv_dim, generator=g)
            for s in slots.values():
                s.join(tail, n)
        if t % 45 == 44:
            for s in slots.values():
                s.leave(0)
        toks = [32 + (t * 5 + b) % 90 for b in range(slots["script"].n)]
        a, b = (step[f](toks, slots[f]) for f in ("script", "eager"))
        assert torch.equal(a, b), t
    assert torch.equal(slots["script"].kv, slots["eager"].kv) and torch.equal(slots["script"].pos, slots["eager"].pos)


def test_join_refuses_when_every_slot_is_taken(model):
    slots, _ = joined(model, [prompt(5)], 1)
    with pytest.raises(IndexError):
        slots.join(torch.zeros(CFG.n_layers, 2, 5, CFG.kv_dim), 5)


def test_generate_greedy_matches_naive_forward(model):
    ids = prompt(140, 3)
    out = model.generate_greedy(ids, 6, chunk=50)
    seq = list(ids)
    for _ in range(6):
        seq.append(int(torch.argmax(naive_logits(model, seq) + model.mask)))
    assert out == seq[len(ids) :]


@pytest.mark.parametrize("n_kv_heads", [2, 4])
def test_wider_kv_groups_match_naive_forward(n_kv_heads):
    """With one key/value head every query head reads the same keys, so the head-to-group mapping goes unchecked
    above; with 2 or 4 the prefill (SDPA's GQA), the decode step and the reference must group heads alike."""
    m = TinyLM(ModelConfig(window=64, n_kv_heads=n_kv_heads))
    ids = prompt(140, 5)
    cache = m.new_cache(len(ids))
    for s in range(0, len(ids), 50):
        lg = m.extend(ids[s : s + 50], cache)
    assert torch.allclose(lg, naive_logits(m, ids), atol=1e-4)
    out = m.generate_greedy(ids, 6, chunk=50)
    seq = list(ids)
    for _ in range(6):
        seq.append(int(torch.argmax(naive_logits(m, seq) + m.mask)))
    assert out == seq[len(ids) :]


def test_a_checkpoint_saved_before_kv_heads_loads_as_one_per_query_head(tmp_path):
    old = TinyLM(ModelConfig(n_kv_heads=4))
    old.save(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["engine_model"]["n_kv_heads"]  # the format before grouped-query attention
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = TinyLM.load(tmp_path)
    assert m.cfg.n_kv_heads == 4
    ids = prompt(30)
    assert torch.equal(m.extend(ids, m.new_cache(30)), old.extend(ids, old.new_cache(30)))


def _scheduler(model, chunk=512, max_running=8):
    args = types.SimpleNamespace(chunked_prefill_size=chunk, max_running_requests=max_running)
    return Scheduler(model, args, Metrics("tiny", "null"))


def _req(rid, ids, n, events, stream=True):
    return Req(rid=rid, input_ids=ids, max_new_tokens=n, sink=events.append, stream=stream)


def test_a_prefill_step_holds_chunks_of_several_requests(model):
    s = _scheduler(model, chunk=512)
    ev: list = []
    reqs = [_req(f"r{i}", prompt(n, i), 4, ev) for i, n in enumerate((100, 300, 700))]
    s.waiting.extend(reqs)
    # budget 512: the first two whole, the third cut (at a page of 64 when asked, as the PD prefill does)
    assert [(r.rid, a, b) for r, a, b in s.schedule_prefill()] == [("r0", 0, 100), ("r1", 0, 300), ("r2", 0, 112)]
    assert [(r.rid, a, b) for r, a, b in s.schedule_prefill(page=64)][-1] == ("r2", 0, 64)
    done = s.prefill_batch()
    assert [(c.req.rid, c.start, c.end, c.logits is not None) for c in done] == [
        ("r0", 0, 100, True),
        ("r1", 0, 300, True),
        ("r2", 0, 112, False),
    ]
    assert s.running == reqs[:2] and s.waiting == [reqs[2]] and s.slots.n == 2
    assert [(r.rid, a, b) for r, a, b in s.schedule_prefill()] == [("r2", 112, 624)]


def test_scheduler_batched_output_equals_reference(model):
    s = _scheduler(model, chunk=128)
    events: dict[str, list] = {}
    lens = (5, 200, 70, 130)
    reqs = [
        _req(f"r{i}", prompt(n, i), 12 + i, events.setdefault(f"r{i}", []), stream=i != 1) for i, n in enumerate(lens)
    ]
    for r in reqs:
        s.submit(r)
    s._drain_inbox()
    for _ in range(200):
        if not s.step():
            break
    for r, n in zip(reqs, lens):
        assert r.done and r.out_ids == model.generate_greedy(r.input_ids, r.max_new_tokens, chunk=128), r.rid
    # a non-streaming request gets its tokens in one event just before its end; a streaming one every token
    assert [type(e) for e in events["r1"]] == [Tokens, Done] and len(events["r1"][0].ids) == 13
    assert events["r1"][0].ids == reqs[1].out_ids and events["r1"][0].reason == events["r1"][1].reason
    assert [type(e) for e in events["r0"]] == [Tokens] * 12 + [Done]
    assert s.slots.n == 0 and not s.running


def test_token_window_rate_forgets_old_buckets():
    w = TokenWindow(span=5.0)
    for i in range(100):
        w.append(1000.0 + i * 0.01, 1)  # 100 tokens within a second
    w.append(1003.0, 50)
    assert w.rate(1003.5) == pytest.approx(150 / 5.0)
    assert w.rate(1007.0) == pytest.approx(50 / 5.0)  # the first second's buckets are gone
    assert w.rate(1009.0) == 0.0 and not w.buckets


def test_a_chunk_longer_than_a_query_block_matches_naive(model):
    # one 1500-token chunk (as with --chunked-prefill-size -1) is attended in blocks; the result is the same
    ids = prompt(1500, 5)
    cache = model.new_cache(len(ids))
    got = model.extend(ids, cache)
    assert cache.len == 1500
    assert torch.allclose(got, naive_logits(model, ids), atol=1e-4)


def test_tokens_reach_the_http_side_in_sglangs_chunks(model):
    """A non-streaming request's tokens every SGLANG_FORCE_STREAM_INTERVAL (50) and at its end; a streaming one's
    first token at once, then every --stream-interval."""
    args = types.SimpleNamespace(chunked_prefill_size=512, max_running_requests=8, stream_interval=4)
    s = Scheduler(model, args, Metrics("tiny", "null"))
    events: dict[str, list] = {}
    reqs = [
        _req("quiet", prompt(30, 0), 120, events.setdefault("quiet", []), stream=False),
        _req("loud", prompt(30, 1), 10, events.setdefault("loud", []), stream=True),
    ]
    for r in reqs:
        s.submit(r)
    s._drain_inbox()
    for _ in range(300):
        if not s.step():
            break
    sizes = {k: [len(e.ids) for e in ev if isinstance(e, Tokens)] for k, ev in events.items()}
    assert sizes == {"quiet": [50, 50, 20], "loud": [1, 4, 4, 1]}
    for k, r in zip(("quiet", "loud"), reqs):
        assert [t for e in events[k] if isinstance(e, Tokens) for t in e.ids] == r.out_ids
        last, end = events[k][-2], events[k][-1]
        assert isinstance(end, Done) and last.reason == end.reason  # the reason rides the last chunk


def test_a_pd_request_without_its_bootstrap_fails_at_admission_and_the_others_go_on(model):
    """The PD schedulers' guard (request_parse answers 400 first): such a request fails alone, never the step."""
    from engine.scheduler_decode import DecodeScheduler

    args = types.SimpleNamespace(chunked_prefill_size=512, max_running_requests=8)
    s = DecodeScheduler(
        model, args, Metrics("tiny", "decode"), kv=None, moves_kv=True
    )  # (no KV manager: refused before it is used)
    events: list = []
    s.submit(Req(rid="lost", input_ids=prompt(5), max_new_tokens=2, sink=events.append, room=7))
    s._drain_inbox()
    assert [type(e) for e in events] == [Failed] and events[0].code == 400 and "bootstrap_host" in events[0].message
    assert not s.prealloc and not s.by_rid
