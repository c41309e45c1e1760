"""Paged KV pool: pool[page, layer, k/v, page_size, kv_dim] float32, one contiguous tensor so NIXL
registers it once. A page holds every layer of page_size tokens, so a chunk moves as a few
contiguous runs. Freed pages of failed rooms sit in quarantine a while (a late remote write may
still land there)."""

from __future__ import annotations

import threading
import time

import torch

QUARANTINE_S = 5.0


class KVPool:
    def __init__(self, n_layers: int, kv_dim: int, page_size: int, num_pages: int):
        self.page_size = page_size
        self.num_pages = num_pages
        self.pool = torch.zeros(num_pages, n_layers, 2, page_size, kv_dim)
        self.page_bytes = self.pool[0].numel() * self.pool.element_size()
        self.base_addr = self.pool.data_ptr()
        self.scratch_page = num_pages - 1  # never allocated: target of the connection warm-up write
        self._free = list(range(num_pages - 2, -1, -1))
        self._quarantine: list[tuple[float, list[int]]] = []
        self._lock = threading.Lock()

    def pages_for(self, n_tokens: int) -> int:
        return -(-n_tokens // self.page_size)

    def alloc(self, n: int) -> list[int] | None:
        with self._lock:
            now = time.monotonic()
            while self._quarantine and self._quarantine[0][0] <= now:
                self._free.extend(self._quarantine.pop(0)[1])
            if len(self._free) < n:
                return None
            # Prefer ascending runs: contiguous pages become one NIXL descriptor.
            self._free.sort(reverse=True)
            return [self._free.pop() for _ in range(n)]

    def free(self, pages: list[int], quarantine: bool = False) -> None:
        if not pages:
            return
        with self._lock:
            if quarantine:
                self._quarantine.append((time.monotonic() + QUARANTINE_S, list(pages)))
            else:
                self._free.extend(pages)

    def used_fraction(self) -> float:
        with self._lock:
            q = sum(len(p) for _, p in self._quarantine)
            return 1.0 - (len(self._free) + q) / self.num_pages if self.num_pages else 0.0

    def addr(self, page: int) -> int:
        return self.base_addr + page * self.page_bytes

    def write_tokens(self, pages: list[int], kv: torch.Tensor) -> None:
        """kv[layer, 2, n, d] -> consecutive pages (last one may be partial)."""
        P = self.page_size
        n = kv.shape[2]
        for i, pg in enumerate(pages):
            s, e = i * P, min(n, (i + 1) * P)
            self.pool[pg, :, :, : e - s] = kv[:, :, s:e]

    def read_tokens(self, pages: list[int], n: int) -> torch.Tensor:
        """Gather pages -> kv[layer, 2, n, d]."""
        t = self.pool[torch.tensor(pages, dtype=torch.long)]  # [np, L, 2, P, d]
        L, d = t.shape[1], t.shape[-1]
        return t.permute(1, 2, 0, 3, 4).reshape(L, 2, -1, d)[:, :, :n]


def runs(src: list[int], dst: list[int]) -> list[tuple[int, int, int]]:
    """Merge page pairs into (src_start, dst_start, n_pages) runs contiguous on both sides."""
    out: list[list[int]] = []
    for s, d in zip(src, dst):
        if out and out[-1][0] + out[-1][2] == s and out[-1][1] + out[-1][2] == d:
            out[-1][2] += 1
        else:
            out.append([s, d, 1])
    return [(s, d, n) for s, d, n in out]
