"""A tiny decoder-only transformer (byte vocab) with a dense per-request KV cache.

Weights are seeded, so greedy output is a pure function of the prompt. Sampling is restricted to
printable ASCII and newline so outputs are readable text. Prefill runs in chunks (extend), decode
runs a batch of single tokens (projections and MLP batched, attention per request).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, asdict
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.tokenizer import VOCAB_SIZE


@dataclass
class ModelConfig:
    vocab_size: int = VOCAB_SIZE
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    context_length: int = 32768
    window: int = 1024  # sliding-window attention keeps long-prompt prefill roughly linear on a CPU
    seed: int = 1234

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError("d_model must be a multiple of n_heads")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class KVCache:
    """Dense cache of one request: kv[layer, 0=k/1=v, pos, d_model]."""

    def __init__(self, cfg: ModelConfig, capacity: int):
        self.kv = torch.zeros(cfg.n_layers, 2, capacity, cfg.d_model)
        self.len = 0

    @classmethod
    def from_tensor(cls, kv: torch.Tensor, length: int, capacity: int) -> "KVCache":
        c = cls.__new__(cls)
        c.kv = torch.zeros(kv.shape[0], 2, capacity, kv.shape[-1])
        c.kv[:, :, :length] = kv[:, :, :length]
        c.len = length
        return c


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
            **{f"l{i}.{n}": t for i in range(c.n_layers) for n, t in {
                "wqkv": w(c.d_model, 3 * c.d_model, scale=1 / math.sqrt(c.d_model)),
                "wo": w(c.d_model, c.d_model, scale=1 / math.sqrt(c.d_model)),
                "w1": w(c.d_model, c.d_ff, scale=1 / math.sqrt(c.d_model)),
                "w2": w(c.d_ff, c.d_model, scale=1 / math.sqrt(c.d_ff)),
            }.items()},
            "head": w(c.d_model, c.vocab_size, scale=2 / math.sqrt(c.d_model)),
        }
        self.mask = _allowed_mask(c.vocab_size)
        inv = torch.exp(torch.arange(0, c.d_model, 2).float() * (-math.log(10000.0) / c.d_model))
        self._inv_freq = inv

    # -- checkpoint of the engine's own format: DIR/config.json + DIR/model.pt --------------------
    @classmethod
    def load(cls, model_dir: str | Path) -> "TinyLM":
        d = Path(model_dir)
        cfg = ModelConfig(**json.loads((d / "config.json").read_text()).get("engine_model", {}))
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
        c, p = self.cfg, self.p
        s, n = cache.len, len(tokens)
        e = s + n
        pos = torch.arange(s, e)
        x = p["emb"][torch.tensor(tokens)] + self._pos(pos)
        # Query at absolute position q may see keys in (q - window, q].
        k0 = max(0, s - c.window + 1)
        kpos = torch.arange(k0, e)[None, :]
        allow = (kpos <= pos[:, None]) & (kpos > pos[:, None] - c.window)
        H, dh = c.n_heads, c.head_dim
        for i in range(c.n_layers):
            h = self._norm(x) @ p[f"l{i}.wqkv"]
            q, k, v = h.split(c.d_model, dim=-1)
            cache.kv[i, 0, s:e] = k
            cache.kv[i, 1, s:e] = v
            K = cache.kv[i, 0, k0:e].view(e - k0, H, dh).transpose(0, 1)
            V = cache.kv[i, 1, k0:e].view(e - k0, H, dh).transpose(0, 1)
            a = F.scaled_dot_product_attention(q.view(n, H, dh).transpose(0, 1), K, V, attn_mask=allow)
            x = x + a.transpose(0, 1).reshape(n, c.d_model) @ p[f"l{i}.wo"]
            x = x + F.gelu(self._norm(x) @ p[f"l{i}.w1"]) @ p[f"l{i}.w2"]
        cache.len = e
        return (self._norm(x[-1:]) @ p["head"])[0]

    @torch.inference_mode()
    def decode(self, tokens: list[int], caches: list[KVCache]) -> torch.Tensor:
        """One decode step for a batch: token b goes at caches[b].len. Returns logits [B, V]."""
        c, p = self.cfg, self.p
        H, dh = c.n_heads, c.head_dim
        pos = torch.tensor([kc.len for kc in caches])
        x = p["emb"][torch.tensor(tokens)] + self._pos(pos)
        for i in range(c.n_layers):
            h = self._norm(x) @ p[f"l{i}.wqkv"]
            q, k, v = h.split(c.d_model, dim=-1)
            outs = []
            for b, kc in enumerate(caches):
                t = kc.len
                kc.kv[i, 0, t] = k[b]
                kc.kv[i, 1, t] = v[b]
                k0 = max(0, t + 1 - c.window)
                K = kc.kv[i, 0, k0: t + 1].view(t + 1 - k0, H, dh).transpose(0, 1)
                V = kc.kv[i, 1, k0: t + 1].view(t + 1 - k0, H, dh).transpose(0, 1)
                outs.append(F.scaled_dot_product_attention(q[b].view(H, 1, dh), K, V).reshape(c.d_model))
            x = x + torch.stack(outs) @ p[f"l{i}.wo"]
            x = x + F.gelu(self._norm(x) @ p[f"l{i}.w1"]) @ p[f"l{i}.w2"]
        for kc in caches:
            kc.len += 1
        return self._norm(x) @ p["head"]

    def sample(self, logits: torch.Tensor, temperature: float, top_p: float = 1.0,
               generator: torch.Generator | None = None) -> int:
        logits = logits + self.mask
        if temperature <= 1e-5:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / temperature, dim=-1)
        if top_p < 1.0:
            sp, idx = probs.sort(descending=True)
            keep = sp.cumsum(0) - sp < top_p
            probs = torch.zeros_like(probs).scatter(0, idx[keep], sp[keep])
        return int(torch.multinomial(probs, 1, generator=generator))

    def generate_greedy(self, prompt_ids: list[int], max_new_tokens: int, chunk: int = 512) -> list[int]:
        """Reference (non-disaggregated) greedy run, used by tests to check PD output."""
        cache = self.new_cache(len(prompt_ids) + max_new_tokens + 1)
        for s in range(0, len(prompt_ids), chunk):
            logits = self.extend(prompt_ids[s:s + chunk], cache)
        out = [self.sample(logits, 0.0)]
        while len(out) < max_new_tokens:
            out.append(self.sample(self.decode([out[-1]], [cache])[0], 0.0))
        return out
