"""A tiny decoder-only transformer (byte vocab) with sliding-window, grouped-query attention.

Weights are seeded, so greedy output is a pure function of the prompt. Sampling is restricted to
printable ASCII and newline so outputs are readable text. Prefill runs chunks of several requests in
one forward (extend_batch: projections and MLP over all their tokens, attention per chunk against
its request's dense cache); decode runs the running batch in DecodeSlots, one attention per layer.
Attention is grouped as Llama 3's is, four query heads to a key/value head: the KV a request holds and the
transfer moves is a quarter of the model width, and a decode step reads a quarter as many keys and values.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, asdict
from pathlib import Path
from typing import List

import torch
import torch.nn.functional as F

from engine.tokenizer import VOCAB_SIZE


QUERY_BLOCK = 1024  # prefill queries per attention call: a mask of QUERY_BLOCK x (QUERY_BLOCK + window) floats


@dataclass
class ModelConfig:
    vocab_size: int = VOCAB_SIZE
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 1  # query heads share key/value heads in groups of n_heads // n_kv_heads
    d_ff: int = 256
    context_length: int = 32768
    window: int = 1024  # sliding-window attention keeps long-prompt prefill roughly linear on a CPU
    seed: int = 1234

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError("d_model must be a multiple of n_heads")
        if self.n_heads % self.n_kv_heads:
            raise ValueError("n_heads must be a multiple of n_kv_heads")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_dim(self) -> int:
        """Width of a token's keys (or values) in a layer: what the caches, the KV pool and a transfer hold."""
        return self.n_kv_heads * self.head_dim


class KVCache:
    """Dense cache of one request: kv[layer, 0=k/1=v, pos, kv_dim]."""

    def __init__(self, cfg: ModelConfig, capacity: int):
        self.kv = torch.zeros(cfg.n_layers, 2, capacity, cfg.kv_dim)
        self.len = 0


class DecodeSlots:
    """The running batch's KV: kv[layer, k/v, slot, kv head, window, head_dim], one ring buffer of the sliding window
    per slot. Slots 0..n-1 are the batch in order, so a layer's keys are one view, each head's window contiguous
    (attention over a [window, d_model] layout viewed per head ran ~2x slower). Positions are added to the
    embeddings, so the order of keys inside the window does not matter, only which are valid."""

    def __init__(self, cfg: ModelConfig, max_slots: int):
        self.window = cfg.window
        self.heads = cfg.n_kv_heads
        self.kv = torch.zeros(cfg.n_layers, 2, max_slots, cfg.n_kv_heads, cfg.window, cfg.head_dim)
        self.pos = torch.zeros(max_slots, dtype=torch.long)  # tokens held so far = position of the next one
        self.n = 0

    def join(self, tail: torch.Tensor, length: int) -> int:
        """Put a request's last min(length, window) keys/values (tail[layer, k/v, m, d]) in the next free slot;
        returns the slot. Raises IndexError when every slot is taken."""
        if self.n >= self.kv.shape[2]:
            raise IndexError("every decode slot is taken")
        nl, _, m, d = tail.shape
        slot = self.n
        per_head = tail.reshape(nl, 2, m, self.heads, d // self.heads).transpose(2, 3)
        self.kv[:, :, slot, :, torch.arange(length - m, length) % self.window] = per_head
        self.pos[slot] = length
        self.n += 1
        return slot

    def leave(self, slot: int) -> None:
        """Free a slot; the last slot moves into it (the caller moves its request the same way)."""
        last = self.n - 1
        if slot != last:
            self.kv[:, :, slot] = self.kv[:, :, last]
            self.pos[slot] = self.pos[last]
        self.n = last


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _decode_step(
    tokens: torch.Tensor,
    kv: torch.Tensor,
    pos: torch.Tensor,
    emb: torch.Tensor,
    inv_freq: torch.Tensor,
    layers: List[List[torch.Tensor]],
    head: torch.Tensor,
    n_heads: int,
    window: int,
) -> torch.Tensor:
    """One decode step of a batch (TinyLM.decode): token b goes at pos[b] of ring slot b of kv[layer, k/v, slot,
    kv head, window, head_dim]; pos (a view of the slots' positions) moves on by one. TorchScript-compatible."""
    B = pos.shape[0]
    d_model = emb.shape[1]
    dh = d_model // n_heads
    n_kv = kv.shape[3]
    group = n_heads // n_kv
    ang = pos.float()[:, None] * inv_freq[None, :]
    x = emb[tokens] + torch.cat([ang.sin(), ang.cos()], dim=-1)
    ring = pos % window
    rows = torch.arange(B)
    L = min(window, int(pos.max()) + 1)  # short sequences attend over the filled part of the ring only
    valid = torch.arange(L)[None, :] < (pos + 1).clamp(max=window)[:, None]
    mask = torch.zeros(B, 1, 1, L).masked_fill_(~valid[:, None, None, :], float("-inf"))
    i = 0
    for lw in layers:
        h = _rms_norm(x) @ lw[0]
        q, k, v = h.split([d_model, n_kv * dh, n_kv * dh], dim=-1)
        kv[i, 0, rows, :, ring] = k.view(B, n_kv, dh)
        kv[i, 1, rows, :, ring] = v.view(B, n_kv, dh)
        K, V = kv[i, 0, :B, :, :L], kv[i, 1, :B, :, :L]  # [B, KV, L, dh]
        # plain attention, each group of query heads the rows of one product over the keys they share
        w = torch.softmax((q.view(B, n_kv, group, dh) @ K.transpose(-1, -2)) * dh**-0.5 + mask, dim=-1)
        a = w @ V  # [B, KV, group, dh]: query head h = kv head h // group, as the projections are laid out
        x = x + a.reshape(B, d_model) @ lw[1]
        x = x + F.gelu(_rms_norm(x) @ lw[2]) @ lw[3]
        i += 1
    pos += 1
    return _rms_norm(x) @ head


_SCRIPTED_STEP = None  # torch.jit.script(_decode_step), compiled at the first decode


def _allowed_mask(vocab: int) -> torch.Tensor:
    m = torch.full((vocab,), float("-inf"))
    m[32:127] = 0.0
    m[10] = 0.0
    return m


class TinyLM:
    def __init__(self, cfg: ModelConfig | None = None, state: dict | None = None):
        self.cfg = cfg or ModelConfig()
        c = self.cfg
        g = torch.Generator().manual_seed(c.seed)

        def w(*shape, scale):
            return torch.randn(*shape, generator=g) * scale

        self.p = state or {
            "emb": w(c.vocab_size, c.d_model, scale=1.0),
            **{
                f"l{i}.{n}": t
                for i in range(c.n_layers)
                for n, t in {
                    "wqkv": w(c.d_model, c.d_model + 2 * c.kv_dim, scale=1 / math.sqrt(c.d_model)),
                    "wo": w(c.d_model, c.d_model, scale=1 / math.sqrt(c.d_model)),
                    "w1": w(c.d_model, c.d_ff, scale=1 / math.sqrt(c.d_model)),
                    "w2": w(c.d_ff, c.d_model, scale=1 / math.sqrt(c.d_ff)),
                }.items()
            },
            "head": w(c.d_model, c.vocab_size, scale=2 / math.sqrt(c.d_model)),
        }
        self._layers = [[self.p[f"l{i}.{n}"] for n in ("wqkv", "wo", "w1", "w2")] for i in range(c.n_layers)]
        self.mask = _allowed_mask(c.vocab_size)
        inv = torch.exp(torch.arange(0, c.d_model, 2).float() * (-math.log(10000.0) / c.d_model))
        self._inv_freq = inv

    # -- checkpoint of the engine's own format: DIR/config.json + DIR/model.pt --------------------
    @classmethod
    def load(cls, model_dir: str | Path) -> "TinyLM":
        d = Path(model_dir)
        fields = json.loads((d / "config.json").read_text()).get("engine_model", {})
        fields.setdefault("n_kv_heads", fields.get("n_heads", ModelConfig.n_heads))  # saved before GQA: one per head
        cfg = ModelConfig(**fields)
        state = torch.load(d / "model.pt", map_location="cpu") if (d / "model.pt").exists() else None
        return cls(cfg, state)

    def save(self, model_dir: str | Path) -> None:
        d = Path(model_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps({"engine_model": asdict(self.cfg)}, indent=2))
        torch.save(self.p, d / "model.pt")

    def new_cache(self, capacity: int) -> KVCache:
        return KVCache(self.cfg, capacity)

    def _pos(self, positions: torch.Tensor) -> torch.Tensor:
        ang = positions.float()[:, None] * self._inv_freq[None, :]
        return torch.cat([ang.sin(), ang.cos()], dim=-1)

    @staticmethod
    def _norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    @torch.inference_mode()
    def extend(self, tokens: list[int], cache: KVCache) -> torch.Tensor:
        """Run one prefill chunk appended at cache.len; returns logits of the last token."""
        return self.extend_batch([(tokens, cache)])[0]

    @torch.inference_mode()
    def extend_batch(self, chunks: list[tuple[list[int], KVCache]]) -> list[torch.Tensor]:
        """One prefill step over chunks of several requests, each appended at its cache.len. Projections and MLP
        run over all tokens at once; attention per chunk, in blocks of QUERY_BLOCK queries (so the mask stays
        small whatever the chunk size). Returns each chunk's last-token logits."""
        c, p = self.cfg, self.p
        spans, toks, poss = [], [], []
        o = 0
        for tokens, cache in chunks:
            s, n = cache.len, len(tokens)
            spans.append((o, s, s + n))
            toks.extend(tokens)
            poss.append(torch.arange(s, s + n))
            o += n
        x = p["emb"][torch.tensor(toks)] + self._pos(torch.cat(poss))
        for i in range(c.n_layers):
            h = self._norm(x) @ p[f"l{i}.wqkv"]
            q, k, v = h.split([c.d_model, c.kv_dim, c.kv_dim], dim=-1)
            outs = []
            for (a, s, e), (_, cache) in zip(spans, chunks):
                cache.kv[i, 0, s:e] = k[a : a + e - s]
                cache.kv[i, 1, s:e] = v[a : a + e - s]
                for qs in range(s, e, QUERY_BLOCK):
                    qe = min(e, qs + QUERY_BLOCK)
                    outs.append(self._attend(q[a + qs - s : a + qe - s], cache.kv[i], qs, qe))
            att = outs[0] if len(outs) == 1 else torch.cat(outs)
            x = x + att.reshape(o, c.d_model) @ p[f"l{i}.wo"]
            x = x + F.gelu(self._norm(x) @ p[f"l{i}.w1"]) @ p[f"l{i}.w2"]
        for (_, _, e), (_, cache) in zip(spans, chunks):
            cache.len = e
        last = torch.tensor([a + e - s - 1 for a, s, e in spans])
        return list(self._norm(x[last]) @ p["head"])

    def _attend(self, q: torch.Tensor, kv: torch.Tensor, qs: int, qe: int) -> torch.Tensor:
        """Attention of the queries at positions [qs, qe) over kv[k/v, pos, kv_dim]: query q sees keys in
        (q - window, q]. A float mask keeps SDPA on its fused CPU path (several times faster than a bool one)."""
        c = self.cfg
        H, KV, dh = c.n_heads, c.n_kv_heads, c.head_dim
        k0 = max(0, qs - c.window + 1)
        pos = torch.arange(qs, qe)[:, None]
        kpos = torch.arange(k0, qe)[None, :]
        mask = torch.zeros(qe - qs, qe - k0).masked_fill_((kpos > pos) | (kpos <= pos - c.window), float("-inf"))
        K = kv[0, k0:qe].view(1, qe - k0, KV, dh).transpose(1, 2)
        V = kv[1, k0:qe].view(1, qe - k0, KV, dh).transpose(1, 2)
        Q = q.reshape(1, qe - qs, H, dh).transpose(1, 2)
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask[None, None], enable_gqa=True)[0].transpose(0, 1)

    def new_slots(self, max_slots: int) -> DecodeSlots:
        return DecodeSlots(self.cfg, max_slots)

    @torch.inference_mode()
    def decode(self, tokens: list[int], slots: DecodeSlots) -> torch.Tensor:
        """One decode step of the whole batch: token b goes at slots.pos[b] of slot b. Returns logits [B, V].
        The step runs as one TorchScript call (the math of decode_eager, op for op: the same logits bit for bit), so
        the scheduler thread gives the GIL up once per step instead of at each of its ~50 torch ops; in a server
        whose HTTP and KV threads want the GIL, each of those hand-backs could wait a switch interval."""
        global _SCRIPTED_STEP
        if _SCRIPTED_STEP is None:
            with warnings.catch_warnings():  # torch 2.x calls TorchScript deprecated; it is what runs without the GIL
                warnings.simplefilter("ignore", DeprecationWarning)
                _SCRIPTED_STEP = torch.jit.script(_decode_step)
        c, p = self.cfg, self.p
        return _SCRIPTED_STEP(
            torch.tensor(tokens),
            slots.kv,
            slots.pos[: slots.n],
            p["emb"],
            self._inv_freq,
            self._layers,
            p["head"],
            c.n_heads,
            c.window,
        )

    @torch.inference_mode()
    def decode_eager(self, tokens: list[int], slots: DecodeSlots) -> torch.Tensor:
        """decode in plain eager torch: the reference its TorchScript step is tested against."""
        c, p = self.cfg, self.p
        return _decode_step(
            torch.tensor(tokens),
            slots.kv,
            slots.pos[: slots.n],
            p["emb"],
            self._inv_freq,
            self._layers,
            p["head"],
            c.n_heads,
            c.window,
        )

    def sample(
        self, logits: torch.Tensor, temperature: float, top_p: float = 1.0, generator: torch.Generator | None = None
    ) -> int:
        logits = logits + self.mask
        if temperature <= 1e-5:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / temperature, dim=-1)
        if top_p < 1.0:
            sp, idx = probs.sort(descending=True)
            keep = sp.cumsum(0) - sp < top_p
            probs = torch.zeros_like(probs).scatter(0, idx[keep], sp[keep])
        return int(torch.multinomial(probs, 1, generator=generator))

    def sample_batch(self, logits: torch.Tensor, reqs) -> list[int]:
        """One token per row for requests with .temperature, .top_p, .generator(): the greedy rows in one argmax."""
        out = (logits + self.mask).argmax(-1).tolist()
        for i, r in enumerate(reqs):  # only sampled rows are taken out of the tensor (iterating it costs a view each)
            if not r.temperature <= 1e-5:
                out[i] = self.sample(logits[i], r.temperature, r.top_p, r.generator())
        return out

    def generate_greedy(self, prompt_ids: list[int], max_new_tokens: int, chunk: int = 512) -> list[int]:
        """Reference (non-disaggregated) greedy run, the engine's own math (chunked extend, then DecodeSlots);
        tests check PD output against it."""
        n = len(prompt_ids)
        cache = self.new_cache(n)
        for s in range(0, n, chunk):
            logits = self.extend(prompt_ids[s : s + chunk], cache)
        out = [self.sample(logits, 0.0)]
        slots = self.new_slots(1)
        slots.join(cache.kv[:, :, max(0, n - self.cfg.window) : n], n)
        while len(out) < max_new_tokens:
            out.append(self.sample(self.decode([out[-1]], slots)[0], 0.0))
        return out
